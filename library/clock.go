package library

import (
	"sync"

	"github.com/danyue/danyue/crdt"
)

// hlc is this device's hybrid logical clock. It has a lock of its own:
// every local write reads it and every batch from a peer moves it, on the
// handlers' and the peer layer's goroutines.
type hlc struct {
	mu sync.Mutex
	c  *crdt.Clock
}

// now returns a new timestamp at wall time wall (ms).
func (h *hlc) now(wall uint64) crdt.Timestamp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.c.Now(wall)
}

// aheadStamp is a stamp the clock observed ahead of the wall time.
type aheadStamp struct {
	ts      crdt.Timestamp
	aheadMs uint64
}

// observeAll makes the clock follow the newest stamp of every entry (as far
// as crdt.MaxAhead), and returns the stamps more than warnMs ahead of wall
// that their writer's own clock made: a stamp whose counter is 0, which a
// device makes from its wall clock. One with a counter took its wall time
// from another stamp, such as a write ordered after a far-future one
// (crdt.StampAfter), and blaming its device would name a device whose
// clock is right.
func (h *hlc) observeAll(entries []crdt.Entry, wall, warnMs uint64) []aheadStamp {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []aheadStamp
	for i := range entries {
		ts := entries[i].MaxTimestamp()
		if ahead := h.c.Observe(ts, wall); ahead > warnMs && ts.Logical == 0 {
			out = append(out, aheadStamp{ts, ahead})
		}
	}
	return out
}

// stamp returns a new timestamp from the hybrid clock.
func (l *Library) stamp() crdt.Timestamp {
	return l.clock.now(l.wallMs())
}
