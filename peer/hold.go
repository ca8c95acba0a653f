package peer

import (
	"cmp"
	"time"
)

// relayHold is, for one send stream, the state of holding relays back
// (fanout.go): whether the stream may hold anything yet, whether its last
// catch-up held something, and since when. It decides; the sender reads
// the store, asks the puller and sends.
//
// The rules, which its tests check one by one:
//   - a stream's first catch-up holds nothing back, nor does one of a
//     backlog over deferBacklog;
//   - a pass that found held records asks the puller about them at once
//     if a record to send comes after them or the pass was cut short, and
//     otherwise when the hold has lasted deferWindow; until then it sends
//     what comes before them;
//   - a pass that would only move the cursor (no record, nothing held) is
//     held back the same way, until deferWindow has passed;
//   - while held, the stream looks at the store again only when it has
//     something new, the window ends, or the puller's direct list changes.
type relayHold struct {
	window  time.Duration // deferWindow, unless a test sets another
	pushing bool          // the first catch-up is done: holding is allowed
	held    bool          // the last catch-up held records, or a bare cursor advance, back
	last    uint64        // the store's last sequence number that catch-up saw
	since   time.Time     // when the current hold began; zero while nothing is held
}

// pending reports whether the store, whose last sequence number is last,
// has something after cursor that the stream has not looked at: not just
// what the last catch-up held back.
func (h *relayHold) pending(cursor, last uint64) bool {
	return last > cursor && !(h.held && h.last == last)
}

// begin starts a catch-up from cursor up to the store's last, and reports
// whether it may hold records back.
func (h *relayHold) begin(cursor, last uint64) (holding bool) {
	h.held, h.last = false, last
	return h.pushing && last-cursor <= deferBacklog
}

// passView is what the hold decision needs of one pass over the store.
type passView struct {
	seq      uint64 // the last sequence number visited
	records  int    // records to send
	full     bool   // cut short by the batch limits
	heldFrom uint64 // the first held record's sequence number; 0: none held
	later    bool   // a record to send comes after a held one
}

// step is what a catch-up does after a pass.
type step struct {
	// ask: ask the puller about the held records before anything else,
	// then pass again holding nothing.
	ask bool
	// send: send a batch up to seq (its records, or a bare cursor
	// advance).
	send bool
	seq  uint64
	// whole: the batch ends a pass that was not cut short and held
	// nothing (the sender still checks that the store has nothing newer).
	whole bool
	// done: the catch-up ends after this step: caught up, or held back
	// (h.held).
	done bool
}

// next decides what a catch-up from cursor up to at least last, holding
// if holding, does with pass p at time now.
func (h *relayHold) next(p passView, cursor, last uint64, holding bool, now time.Time) step {
	held := p.heldFrom != 0
	seq := p.seq
	switch {
	case held:
		h.start(now)
		if p.later || p.full || h.expired(now) {
			return step{ask: true}
		}
		seq = p.heldFrom - 1
	case !p.full && seq < last:
		// A pass that was not cut short has seen everything up to last:
		// move the cursor there even if the records there were superseded
		// (or the store numbers changes it does not list).
		seq = last
	}
	if holding && !held && !p.full && p.records == 0 && seq > cursor {
		// Only a cursor to move: it can wait for the next record, or for
		// deferWindow.
		h.start(now)
		if !h.expired(now) {
			h.held = true
			return step{done: true}
		}
	}
	s := step{seq: seq, send: seq > cursor && !(held && p.records == 0), whole: !p.full && !held}
	switch {
	case held:
		h.held, s.done = true, true
	case !p.full:
		h.since, h.pushing, s.done = time.Time{}, true, true
	}
	return s
}

// idle is called when the stream has nothing to look at: it returns how
// long until the hold's window ends, or false when nothing is held. A
// stream idle with nothing held is pushing from then on.
func (h *relayHold) idle(now time.Time) (time.Duration, bool) {
	if !h.held {
		h.pushing = true
		return 0, false
	}
	return h.since.Add(h.win()).Sub(now), true
}

// wake ends the wait of a hold: its window ended, or the puller's direct
// list changed, and the stream looks at the store again.
func (h *relayHold) wake() { h.held = false }

func (h *relayHold) start(now time.Time) {
	if h.since.IsZero() {
		h.since = now
	}
}

func (h *relayHold) expired(now time.Time) bool { return now.Sub(h.since) >= h.win() }

func (h *relayHold) win() time.Duration { return cmp.Or(h.window, deferWindow) }
