package peer

import (
	"context"
	"time"
)

// How many records a long sync has still to go, so that a person watching
// a first sync sees how far it is (status, the page). The sender knows what
// it has to send once the puller's Start frame says where to start: at the
// start of a catch-up longer than a batch it counts the records after its
// cursor, if its store can (RecordCounter), and each batch then carries the
// records left after it (wireBatch.Left, an optional field an older build
// ignores). The puller takes that, and without it (an older sender, or a
// short catch-up) the sequence numbers still to come, which bound the
// records from above (a record changed twice is sent once).

// RecordCounter is what a Store may also do for sync progress: count the
// records Since(after) would give, as of now. A store without it syncs the
// same; pullers then see sequence numbers to go instead of records.
type RecordCounter interface {
	CountSince(ctx context.Context, after uint64) (uint64, error)
}

// countFrom is the backlog (in sequence numbers) from which a sender
// counts what it has to send: below it a catch-up is a batch or two, over
// before anyone could watch it, and the count is not worth a scan.
const countFrom = 2 * maxBatchRecords

// toGo is a sender's count of the records it has still to send in the
// current catch-up.
type toGo struct {
	counted bool
	left    uint64
}

// count starts a catch-up from cursor up to last: it counts the records to
// send when the backlog is long enough and the store can count them. An
// error leaves it uncounted; the sync goes on without the figure.
func (g *toGo) count(ctx context.Context, n *Node, cursor, last uint64) {
	g.counted = false
	c, ok := n.store.(RecordCounter)
	if !ok || last-cursor < countFrom {
		return
	}
	left, err := c.CountSince(ctx, cursor)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Debug("count the records to send", "err", err)
		}
		return
	}
	g.counted, g.left = true, left
}

// sent takes the records of a batch off the count, and returns what the
// batch's Left says: 0 when not counted.
func (g *toGo) sent(records int) uint64 {
	if !g.counted {
		return 0
	}
	g.left -= min(g.left, uint64(records))
	return g.left
}

// noteToGoLocked records, after batch b (Last filled in), what is still to
// come from st. n.mu must be held.
func noteToGoLocked(st *peerState, b *wireBatch) {
	span := b.Last - b.Seq
	switch {
	case span == 0:
		st.toGo = 0
	case b.Left > 0:
		st.toGo = min(b.Left, span) // a sender cannot have more records than numbers to go
	default:
		st.toGo = span
	}
}

// SyncProgress is how a round of pulling from a peer is going while it has
// records to come.
type SyncProgress struct {
	// ToGo is the records still to come, as the sender counted them (from
	// an older build, or for a short catch-up, its sequence numbers to go,
	// which bound them from above); 0 when caught up.
	ToGo uint64
	// In is the records received in this round, since Started.
	In      uint64
	Started time.Time
}

// progressLocked returns the progress of the round with st. n.mu must be
// held.
func (n *Node) progressLocked(st *peerState) SyncProgress {
	if !st.connected || st.toGo == 0 || !st.round.busy {
		return SyncProgress{}
	}
	return SyncProgress{ToGo: st.toGo, In: st.recordsIn - st.round.in, Started: st.round.start}
}
