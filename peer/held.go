package peer

import (
	"errors"
	"time"
)

// A stream that held records back. The store may refuse some records of
// a batch (their writer is over the bounds of what it may originate, see
// Store.ApplyRemote): the rest of the batch is merged, and the stream goes
// on, so that one device's flood does not stop the others' records that
// the same peer relays. But from that batch on the stream claims nothing:
// the cursor into the sender stays where it was before the batch, and no
// cursor, full mark or whole batch of the stream is noted as knowledge
// (knowledge.go), since this device no longer has everything the sender
// sent. The sender still gets its acks: they say how far the stream was
// delivered, which is what its flow control and SyncOnce count, not what
// this device holds.
//
// The refused records are offered again when the stream is pulled again
// from the held cursor: at the next connection, or when heldRetry ends
// the stream. Records merged since are merged again as no-ops. The delay
// doubles for every stream of the peer in a row that held records back,
// so a writer that stays over its bounds costs a re-send of the peer's
// changes since the hold at most once per maxHeldRetry.

// ErrRecordsRefused is what Store.ApplyRemote returns, wrapped, when it
// merged a batch but refused some of its records: it did not move the
// cursor. The store has logged why.
var ErrRecordsRefused = errors.New("records refused")

// errHeldRetry ends a stream that held records back, to pull again from
// its held cursor.
var errHeldRetry = errors.New("pulling again the records this stream held back")

const (
	// defaultHeldRetry is how long a stream that held records back runs
	// before it is pulled again: about the time a writer's bound takes to
	// allow a few more records (library.DefaultBounds refills per minute).
	defaultHeldRetry = time.Minute
	// maxHeldRetry bounds the doubling: a writer held back for good costs
	// one re-send of what the peer changed since the hold per period.
	maxHeldRetry = time.Hour
)

// heldRetry is how long the stream of a peer that held records back runs
// before it is pulled again, when inARow streams of the peer before it
// held records back too.
func heldRetry(base time.Duration, inARow int) time.Duration {
	d := base
	for i := 0; i < inARow && d < maxHeldRetry; i++ {
		d *= 2
	}
	return min(d, max(base, maxHeldRetry))
}

// hold makes the stream claim nothing from now on (see above), and ends
// it after heldRetry. cursor is the stream's cursor before the batch
// whose records were refused.
func (p *puller) hold(cursor uint64) {
	n, st := p.n, p.st
	p.held, p.heldAt = true, cursor
	n.mu.Lock()
	inARow := st.heldInARow
	st.heldInARow++
	n.mu.Unlock()
	base := n.cfg.HeldRetry
	if base <= 0 {
		base = defaultHeldRetry
	}
	d := heldRetry(base, inARow)
	n.log.Debug("records from peer held back; pulling again later", "peer", st.id, "device", st.device, "cursor", cursor, "after", d)
	p.retry = time.AfterFunc(d, func() {
		p.retried.Store(true)
		p.cancel()
	})
}
