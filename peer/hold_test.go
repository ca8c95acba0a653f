package peer

import (
	"testing"
	"time"
)

// The decisions of relayHold, one pass at a time (hold.go states the
// rules these cases check).
func TestRelayHoldNext(t *testing.T) {
	t0 := time.Unix(1000, 0)
	inWindow, pastWindow := t0.Add(deferWindow/2), t0.Add(deferWindow)
	for _, tc := range []struct {
		name     string
		hold     relayHold // before
		p        passView
		cursor   uint64
		last     uint64
		holding  bool
		now      time.Time
		want     step
		wantHeld bool
		// wantSince: when the hold began afterwards (zero: nothing held).
		wantSince time.Time
		wantPush  bool
	}{
		{name: "a record to send", p: passView{seq: 12, records: 1}, cursor: 11, last: 12, holding: true, now: t0,
			want: step{send: true, seq: 12, whole: true, done: true}, wantPush: true},
		{name: "a catch-up cut short goes on", p: passView{seq: 600, records: 512, full: true}, cursor: 0, last: 2000, now: t0,
			want: step{send: true, seq: 600}},
		{name: "a pass that saw all moves the cursor to last", p: passView{seq: 12, records: 1}, cursor: 10, last: 14, now: t0,
			want: step{send: true, seq: 14, whole: true, done: true}, wantPush: true},
		{name: "a held record waits", p: passView{seq: 11, heldFrom: 12}, cursor: 11, last: 12, holding: true, now: t0,
			want: step{seq: 11, done: true}, wantHeld: true, wantSince: t0},
		{name: "what comes before a held record is sent", p: passView{seq: 13, records: 2, heldFrom: 14}, cursor: 11, last: 14, holding: true, now: t0,
			want: step{send: true, seq: 13, done: true}, wantHeld: true, wantSince: t0},
		{name: "a held record keeps its start", hold: relayHold{pushing: true, since: t0}, p: passView{seq: 11, heldFrom: 12}, cursor: 11, last: 12, holding: true, now: inWindow,
			want: step{seq: 11, done: true}, wantHeld: true, wantSince: t0, wantPush: true},
		{name: "a held record is asked about when the window ends", hold: relayHold{pushing: true, since: t0}, p: passView{seq: 11, heldFrom: 12}, cursor: 11, last: 12, holding: true, now: pastWindow,
			want: step{ask: true}, wantSince: t0, wantPush: true},
		{name: "a record after a held one asks at once", p: passView{seq: 11, heldFrom: 12, later: true}, cursor: 11, last: 13, holding: true, now: t0,
			want: step{ask: true}, wantSince: t0},
		{name: "a pass cut short after a held record asks at once", p: passView{seq: 11, heldFrom: 12, full: true}, cursor: 11, last: 13, holding: true, now: t0,
			want: step{ask: true}, wantSince: t0},
		{name: "a bare cursor advance waits", p: passView{seq: 12}, cursor: 11, last: 12, holding: true, now: t0,
			want: step{done: true}, wantHeld: true, wantSince: t0},
		{name: "a bare cursor advance is sent when the window ends", hold: relayHold{since: t0}, p: passView{seq: 12}, cursor: 11, last: 12, holding: true, now: pastWindow,
			want: step{send: true, seq: 12, whole: true, done: true}, wantPush: true},
		{name: "a bare cursor advance is sent when not holding", p: passView{seq: 12}, cursor: 11, last: 12, now: t0,
			want: step{send: true, seq: 12, whole: true, done: true}, wantPush: true},
		{name: "nothing to send", p: passView{seq: 11}, cursor: 11, last: 11, holding: true, now: t0,
			want: step{seq: 11, whole: true, done: true}, wantPush: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.hold
			got := h.next(tc.p, tc.cursor, tc.last, tc.holding, tc.now)
			if got != tc.want {
				t.Errorf("step %+v, want %+v", got, tc.want)
			}
			if h.held != tc.wantHeld || !h.since.Equal(tc.wantSince) || h.pushing != tc.wantPush {
				t.Errorf("hold afterwards: held %v since %v pushing %v; want %v, %v, %v", h.held, h.since, h.pushing, tc.wantHeld, tc.wantSince, tc.wantPush)
			}
		})
	}
}

// A stream holds nothing before its first catch-up is done, nor in a
// catch-up of a backlog over deferBacklog; once held, it looks at the
// store again only when there is something new, and waits out the rest of
// the window.
func TestRelayHoldStream(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var h relayHold
	if h.begin(0, 10) {
		t.Fatal("the first catch-up holds")
	}
	if _, held := h.idle(t0); held || !h.pushing {
		t.Fatalf("idle after the first catch-up: held %v, pushing %v", held, h.pushing)
	}
	for _, tc := range []struct {
		cursor, last uint64
		want         bool
	}{{10, 11, true}, {10, 10 + deferBacklog, true}, {10, 11 + deferBacklog, false}} {
		if got := h.begin(tc.cursor, tc.last); got != tc.want {
			t.Errorf("begin(%d, %d) holding %v, want %v", tc.cursor, tc.last, got, tc.want)
		}
	}
	// A catch-up up to 12 holds a record at 12 back.
	h.begin(11, 12)
	if s := h.next(passView{seq: 11, heldFrom: 12}, 11, 12, true, t0); !s.done || !h.held {
		t.Fatalf("step %+v, held %v", s, h.held)
	}
	for _, tc := range []struct {
		cursor, last uint64
		want         bool
	}{{11, 12, false}, {11, 13, true}, {12, 12, false}} {
		if got := h.pending(tc.cursor, tc.last); got != tc.want {
			t.Errorf("held: pending(%d, %d) = %v, want %v", tc.cursor, tc.last, got, tc.want)
		}
	}
	if wait, held := h.idle(t0.Add(deferWindow / 4)); !held || wait != deferWindow*3/4 {
		t.Errorf("idle while held: %v, %v; want the rest of the window", wait, held)
	}
	h.wake()
	if !h.pending(11, 12) {
		t.Error("woken: the held record is not looked at again")
	}
}
