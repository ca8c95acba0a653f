package crdt_test

import (
	"math"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Rule (doc "Time"): timestamps are ordered by wall ms, then logical counter,
// then device.
func TestTimestampOrder(t *testing.T) {
	tests := []struct {
		name string
		a, b crdt.Timestamp
		want int
	}{
		{"wall decides first", ts(t0+1, 0, devA), ts(t0, math.MaxUint32, devC), +1},
		{"then the logical counter", ts(t0, 1, devA), ts(t0, 0, devC), +1},
		{"then the device", ts(t0, 7, devB), ts(t0, 7, devA), +1},
		{"equal", ts(t0, 7, devB), ts(t0, 7, devB), 0},
		{"zero is before everything", crdt.Timestamp{}, ts(0, 0, 1), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Compare(tt.b); got != tt.want {
				t.Errorf("%v.Compare(%v) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := tt.b.Compare(tt.a); got != -tt.want {
				t.Errorf("%v.Compare(%v) = %d, want %d", tt.b, tt.a, got, -tt.want)
			}
			if got := tt.a.After(tt.b); got != (tt.want > 0) {
				t.Errorf("%v.After(%v) = %v", tt.a, tt.b, got)
			}
		})
	}
}

// Rule (Clock): Now never goes backwards, even when the wall clock does
// (NTP steps, a user changing the time); it counts on the logical counter
// until the wall clock passes its last reading again.
func TestClockNowNeverGoesBackwards(t *testing.T) {
	c := crdt.NewClock(devA, crdt.Timestamp{})
	steps := []struct {
		wall uint64
		want crdt.Timestamp
	}{
		{t0, ts(t0, 0, devA)},
		{t0, ts(t0, 1, devA)},                       // same millisecond: count
		{t0 - 1, ts(t0, 2, devA)},                   // wall went back 1 ms
		{t0 - day, ts(t0, 3, devA)},                 // wall went back a day
		{t0 + 1, ts(t0+1, 0, devA)},                 // wall passed the last reading: counter resets
		{t0 + 1, ts(t0+1, 1, devA)},                 // and counts again
		{t0 + hour, ts(t0+hour, 0, devA)},           // plain progress
		{0, ts(t0+hour, 1, devA)},                   // a clock reset to 1970
		{math.MaxUint64, ts(crdt.MaxWall, 0, devA)}, // a wall past year 9999 is clamped
	}
	for i, s := range steps {
		if got := c.Now(s.wall); got != s.want {
			t.Fatalf("step %d: Now(%d) = %v, want %v", i, s.wall, got, s.want)
		}
		if got := c.Last(); got != s.want {
			t.Fatalf("step %d: Last() = %v, want %v", i, got, s.want)
		}
	}
}

// Rule (Clock): after observing a timestamp, Now orders after it, and
// Observe reports how far the timestamp is ahead of local wall time (the
// daemon warns about such peers) without refusing it.
func TestClockObserve(t *testing.T) {
	tests := []struct {
		name      string
		start     crdt.Timestamp // the clock's state before Observe (its last reading)
		observed  crdt.Timestamp
		wall      uint64 // local wall time at Observe and at the following Now
		wantAhead uint64
		wantNext  crdt.Timestamp
	}{
		{
			name:      "a year ahead: accepted, reported, and the next write follows it",
			start:     ts(t0, 0, devA),
			observed:  ts(t0+year, 5, devB),
			wall:      t0,
			wantAhead: year,
			wantNext:  ts(t0+year, 6, devA),
		},
		{
			name:      "behind: nothing to report, the clock keeps its own reading",
			start:     ts(t0, 3, devA),
			observed:  ts(t0-day, 9, devB),
			wall:      t0,
			wantAhead: 0,
			wantNext:  ts(t0, 4, devA),
		},
		{
			name:      "same wall, larger counter: the counter follows",
			start:     ts(t0, 3, devA),
			observed:  ts(t0, 8, devB),
			wall:      t0,
			wantAhead: 0,
			wantNext:  ts(t0, 9, devA),
		},
		{
			name:      "equal wall and counter from a larger device id: the next write still follows",
			start:     ts(t0, 3, devA),
			observed:  ts(t0, 3, devC),
			wall:      t0,
			wantAhead: 0,
			wantNext:  ts(t0, 4, devA),
		},
		{
			name:      "ahead of wall time but behind the clock: still reported",
			start:     ts(t0+hour, 0, devA),
			observed:  ts(t0+minute, 0, devB),
			wall:      t0,
			wantAhead: minute,
			wantNext:  ts(t0+hour, 1, devA),
		},
		{
			name:      "the wall clock has caught up: wall time wins again",
			start:     ts(t0, 0, devA),
			observed:  ts(t0+minute, 2, devB),
			wall:      t0 + hour,
			wantAhead: 0,
			wantNext:  ts(t0+hour, 0, devA),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := crdt.NewClock(devA, tt.start)
			if ahead := c.Observe(tt.observed, tt.wall); ahead != tt.wantAhead {
				t.Errorf("Observe(%v, %d) = %d ahead, want %d", tt.observed, tt.wall, ahead, tt.wantAhead)
			}
			next := c.Now(tt.wall)
			if next != tt.wantNext {
				t.Errorf("Now(%d) = %v, want %v", tt.wall, next, tt.wantNext)
			}
			if !next.After(tt.observed) || !next.After(tt.start) {
				t.Errorf("Now = %v does not order after observed %v and last %v", next, tt.observed, tt.start)
			}
		})
	}
}

// Rule (Clock): after a jump the clock may run on its counter for months of
// writes; at math.MaxUint32 the counter carries into the wall value instead of
// wrapping to 0, which would order new writes before old ones.
func TestClockCounterCarriesInsteadOfWrapping(t *testing.T) {
	c := crdt.NewClock(devA, crdt.Timestamp{})
	far := ts(t0+year, math.MaxUint32-2, devB)
	c.Observe(far, t0)
	want := []crdt.Timestamp{
		ts(t0+year, math.MaxUint32-1, devA),
		ts(t0+year, math.MaxUint32, devA),
		ts(t0+year+1, 0, devA), // carried, not wrapped
		ts(t0+year+1, 1, devA),
	}
	for i, w := range want {
		if got := c.Now(t0); got != w {
			t.Fatalf("write %d: Now = %v, want %v", i, got, w)
		}
	}
	// Many more writes with the wall clock far behind: strictly increasing,
	// every one after the observed timestamp.
	prev := c.Last()
	for i := range 100_000 {
		got := c.Now(t0 + uint64(i%3)) // a wall clock that jitters too
		if !got.After(prev) || !got.After(far) {
			t.Fatalf("write %d: Now = %v does not follow %v", i, got, prev)
		}
		prev = got
	}
}

// Rule (NewClock): a clock resumes strictly after the high-water mark the
// store persisted, so a restart with a clock set back (or the same
// millisecond) cannot reuse or precede a timestamp.
func TestNewClockResumesAfterHighWater(t *testing.T) {
	tests := []struct {
		name      string
		highWater crdt.Timestamp
		wall      uint64
		want      crdt.Timestamp
	}{
		{"fresh device", crdt.Timestamp{}, t0, ts(t0, 0, devA)},
		{"restart in the same millisecond", ts(t0, 4, devA), t0, ts(t0, 5, devA)},
		{"restart with the wall clock set back", ts(t0, 4, devA), t0 - day, ts(t0, 5, devA)},
		{"high water observed from another device", ts(t0+year, 0, devC), t0, ts(t0+year, 1, devA)},
		{"high water at the end of the counter", ts(t0, math.MaxUint32, devA), t0, ts(t0+1, 0, devA)},
		{"restart later", ts(t0, 4, devA), t0 + minute, ts(t0+minute, 0, devA)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := crdt.NewClock(devA, tt.highWater)
			if c.Device() != devA {
				t.Errorf("Device() = %v, want %v", c.Device(), devA)
			}
			got := c.Now(tt.wall)
			if got != tt.want {
				t.Errorf("Now(%d) = %v, want %v", tt.wall, got, tt.want)
			}
			if !got.After(tt.highWater) {
				t.Errorf("Now = %v does not order after high water %v", got, tt.highWater)
			}
		})
	}
}
