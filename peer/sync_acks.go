package peer

import (
	"context"
	"sync"
	"sync/atomic"
)

// What a puller says on a send stream, and the window it keeps: a puller
// acknowledges the batches it has applied and says which devices it
// pulls from itself (have frames), and the sender keeps no more than
// maxUnacked batches between the two stores.

// watchPuller reads what the puller sends back on a send stream until the
// stream ends or the puller sends what it may not, and then cancels the
// stream.
func (n *Node) watchPuller(ctx context.Context, cancel context.CancelFunc, fr *frameReader, st *peerState, acks *streamAcks, fo *fanout) {
	defer cancel()
	for {
		body, err := fr.next()
		if err != nil || ctx.Err() != nil {
			return
		}
		f, err := decodeFrame(body)
		switch {
		case err == nil && f.Error != nil:
			n.log.Warn("peer ended its sync stream", "peer", st.id, "err", refusal(f.Error))
			return
		case err == nil && f.Ack != nil:
			if err := n.acked(st, acks, f.Ack); err != nil {
				n.log.Warn("peer sent a bad ack on its sync stream", "peer", st.id, "err", err)
				return
			}
		case err == nil && f.Have != nil:
			if err := fo.have(f.Have); err != nil {
				n.log.Warn("peer sent a bad have frame on its sync stream", "peer", st.id, "err", err)
				return
			}
		default:
			n.log.Warn("peer sent an unexpected frame on its sync stream", "peer", st.id)
			return
		}
	}
}

// maxUnacked bounds the batches a send stream has in flight: sent and not
// yet acknowledged as applied. The puller reads a batch only after it has
// applied the one before, so what a fast sender would otherwise queue for a
// slow puller sits in transport buffers; with this window the sender reads
// the next batch from its store only when the puller has caught up to
// within a few batches, and no more than maxUnacked batches are ever
// between the two stores.
const maxUnacked = 4

// streamAcks is what one send stream has sent and had acknowledged.
type streamAcks struct {
	sent  atomic.Uint64
	acked uint64 // only watchPuller touches it

	mu      sync.Mutex
	unacked []uint64      // seqs of the batches in flight, in order
	room    chan struct{} // signalled when an ack makes room
}

func newStreamAcks(cursor uint64) *streamAcks {
	sa := &streamAcks{acked: cursor, room: make(chan struct{}, 1)}
	sa.sent.Store(cursor)
	return sa
}

// waitRoom returns once fewer than maxUnacked batches are in flight.
func (sa *streamAcks) waitRoom(ctx context.Context, waited func()) error {
	for first := true; ; first = false {
		sa.mu.Lock()
		full := len(sa.unacked) >= maxUnacked
		sa.mu.Unlock()
		if !full {
			return nil
		}
		if first {
			waited()
		}
		select {
		case <-sa.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sentBatch records a batch up to seq as sent.
func (sa *streamAcks) sentBatch(seq uint64) {
	sa.sent.Store(seq)
	sa.mu.Lock()
	sa.unacked = append(sa.unacked, seq)
	sa.mu.Unlock()
}

// ackedUpTo retires the batches an ack of seq covers.
func (sa *streamAcks) ackedUpTo(seq uint64) {
	sa.mu.Lock()
	i := 0
	for i < len(sa.unacked) && sa.unacked[i] <= seq {
		i++
	}
	sa.unacked = append(sa.unacked[:0], sa.unacked[i:]...)
	sa.mu.Unlock()
	select {
	case sa.room <- struct{}{}:
	default:
	}
}

// acked records that the puller st has merged our changes up to a.Seq (of
// the stream's epoch). An ack may neither go back nor pass what this
// stream sent: a peer cannot make a device believe it is delivered further
// than it is.
func (n *Node) acked(st *peerState, sa *streamAcks, a *wireAck) error {
	if sent := sa.sent.Load(); a.Seq < sa.acked || a.Seq > sent {
		return protoErrorf("ack of %d outside [%d, %d]", a.Seq, sa.acked, sent)
	}
	sa.acked = a.Seq
	sa.ackedUpTo(a.Seq)
	n.sends.ackedBy(st.device)
	n.sends.settle()
	n.mu.Lock()
	defer n.mu.Unlock()
	st.acked = max(st.acked, a.Seq)
	n.noteSyncLocked(st)
	n.progressedLocked()
	return nil
}
