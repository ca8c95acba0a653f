package peer

import (
	"errors"
	"sync/atomic"
	"time"
)

// A stream whose records were refused. The store may refuse some records
// of a batch (their writer is over the bounds of what it may originate,
// see Store.ApplyRemote): the rest of the batch is merged, and the stream
// goes on, so that one device's flood does not stop the others' records
// that the same peer relays. But from that batch on the stream claims
// nothing: the cursor into the sender stays where it was before the batch,
// and no cursor, full mark or whole batch of the stream is noted as
// knowledge (knowledge.go), since this device no longer has everything the
// sender sent. The sender still gets its acks: they say how far the stream
// was delivered, which is what its flow control and SyncOnce count, not
// what this device holds.
//
// The refused records are offered again when the stream is pulled again
// from the cursor it kept: at the next connection, or when reofferAfter
// ends the stream. Records merged since are merged again as no-ops. The
// delay doubles for every stream of the peer in a row that refused
// records, so a writer that stays over its bounds costs a re-send of the
// peer's changes since the refusal at most once per maxReoffer.

// ErrRecordsRefused is what Store.ApplyRemote returns, wrapped, when it
// merged a batch but refused some of its records: it did not move the
// cursor. The store has logged why.
var ErrRecordsRefused = errors.New("records refused")

// errReoffer ends a stream that refused records, to pull again from
// the cursor it kept.
var errReoffer = errors.New("pulling again the records this stream refused")

const (
	// defaultReoffer is how long a stream that refused records runs
	// before it is pulled again: about the time a writer's bound takes to
	// allow a few more records (the library's bounds refill per minute).
	defaultReoffer = time.Minute
	// maxReoffer bounds the doubling: a writer refused for good costs
	// one re-send of what the peer changed since the refusal per period.
	maxReoffer = time.Hour
)

// reofferAfter is how long the stream of a peer that refused records runs
// before it is pulled again, when inARow streams of the peer before it
// refused records too.
func reofferAfter(base time.Duration, inARow int) time.Duration {
	d := base
	for i := 0; i < inARow && d < maxReoffer; i++ {
		d *= 2
	}
	return min(d, max(base, maxReoffer))
}

// streamRefusal is what a puller keeps once records were refused.
type streamRefusal struct {
	on      bool        // a batch had records refused
	at      uint64      // the cursor the stream keeps
	retry   *time.Timer // ends the stream
	retried atomic.Bool // retry ended it
}

func (h *streamRefusal) stop() {
	if h.retry != nil {
		h.retry.Stop()
	}
}

// refused makes the stream claim nothing from now on (see above), and
// ends it after reofferAfter. cursor is the stream's cursor before the batch
// whose records were refused.
func (p *puller) refused(cursor uint64) {
	n, st := p.n, p.st
	p.refusal.on, p.refusal.at = true, cursor
	n.mu.Lock()
	inARow := st.refusals
	st.refusals++
	n.mu.Unlock()
	base := n.cfg.Reoffer
	if base <= 0 {
		base = defaultReoffer
	}
	d := reofferAfter(base, inARow)
	n.log.Debug("records from peer refused; pulling again later", "peer", st.id, "device", st.device, "cursor", cursor, "after", d)
	p.refusal.retry = time.AfterFunc(d, func() {
		p.refusal.retried.Store(true)
		p.cancel()
	})
}
