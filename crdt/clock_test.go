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

// Rule (Clock): after observing a timestamp at most MaxAhead past local wall
// time, Now orders after it; past that, the clock follows it only to wall +
// MaxAhead. Either way Observe reports how far the timestamp is ahead of
// local wall time, in full (the daemon warns about its writer).
func TestClockObserve(t *testing.T) {
	tests := []struct {
		name      string
		start     crdt.Timestamp // the clock's state before Observe (its last reading)
		observed  crdt.Timestamp
		wall      uint64 // local wall time at Observe and at the following Now
		wantAhead uint64
		wantNext  crdt.Timestamp
		beyond    bool // observed is past MaxAhead: Now need not follow it
	}{
		{
			name:      "within MaxAhead: reported, and the next write follows it",
			start:     ts(t0, 0, devA),
			observed:  ts(t0+crdt.MaxAhead, 5, devB),
			wall:      t0,
			wantAhead: crdt.MaxAhead,
			wantNext:  ts(t0+crdt.MaxAhead, 6, devA),
		},
		{
			name:      "a year ahead: reported, followed only up to MaxAhead",
			start:     ts(t0, 0, devA),
			observed:  ts(t0+year, 5, devB),
			wall:      t0,
			wantAhead: year,
			wantNext:  ts(t0+crdt.MaxAhead, 1, devA),
			beyond:    true,
		},
		{
			name:      "the year 9999: reported in full, followed only up to MaxAhead",
			start:     ts(t0, 0, devA),
			observed:  ts(crdt.MaxWall, 0, devB),
			wall:      t0,
			wantAhead: crdt.MaxWall - t0,
			wantNext:  ts(t0+crdt.MaxAhead, 1, devA),
			beyond:    true,
		},
		{
			name:      "a wall clock at the epoch: 9999 is still not followed",
			start:     crdt.Timestamp{},
			observed:  ts(crdt.MaxWall, 7, devB),
			wall:      0,
			wantAhead: crdt.MaxWall,
			wantNext:  ts(crdt.MaxAhead, 1, devA),
			beyond:    true,
		},
		{
			name:      "a wall clock past 9999 counts as 9999",
			start:     ts(crdt.MaxWall, 0, devA),
			observed:  ts(crdt.MaxWall, 7, devB),
			wall:      math.MaxUint64,
			wantAhead: 0,
			wantNext:  ts(crdt.MaxWall, 8, devA),
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
			if (!tt.beyond && !next.After(tt.observed)) || !next.After(tt.start) {
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
	far := ts(t0+crdt.MaxAhead, math.MaxUint32-2, devB)
	c.Observe(far, t0)
	want := []crdt.Timestamp{
		ts(t0+crdt.MaxAhead, math.MaxUint32-1, devA),
		ts(t0+crdt.MaxAhead, math.MaxUint32, devA),
		ts(t0+crdt.MaxAhead+1, 0, devA), // carried, not wrapped
		ts(t0+crdt.MaxAhead+1, 1, devA),
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

// Rule (StampAfter, doc "Time"): a local write to a record holding a stamp
// the clock did not follow takes the next reading after that stamp, so it
// wins by timestamp and by clock reading (which decides visibility), whatever
// the devices' ids; otherwise the clock's reading stands.
func TestStampAfter(t *testing.T) {
	tests := []struct {
		name      string
		at, floor crdt.Timestamp
		want      crdt.Timestamp
	}{
		{"the clock is ahead: its reading stands", ts(t0, 3, devA), ts(t0-1, 9, devC), ts(t0, 3, devA)},
		{"empty record", ts(t0, 0, devA), crdt.Timestamp{}, ts(t0, 0, devA)},
		{"same wall, larger counter stands", ts(t0, 4, devA), ts(t0, 3, devC), ts(t0, 4, devA)},
		{"equal reading from a larger device: counter+1", ts(t0, 3, devA), ts(t0, 3, devC), ts(t0, 4, devA)},
		{"equal reading from a smaller device: counter+1 still", ts(t0, 3, devC), ts(t0, 3, devA), ts(t0, 4, devC)},
		{"the year 9999", ts(t0, 0, devA), ts(crdt.MaxWall, 0, devB), ts(crdt.MaxWall, 1, devA)},
		{"exhausted counter carries", ts(t0, 0, devA), ts(t0+year, math.MaxUint32, devB), ts(t0+year+1, 0, devA)},
		{"the very last reading: nothing is after it", ts(t0, 0, devA), ts(crdt.MaxWall, math.MaxUint32, devB), ts(crdt.MaxWall, math.MaxUint32, devA)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := crdt.StampAfter(tt.at, tt.floor); got != tt.want {
				t.Errorf("StampAfter(%v, %v) = %v, want %v", tt.at, tt.floor, got, tt.want)
			}
		})
	}
}

// Issue 12: one record stamped 9999-12-31 must not move the clock there for
// good. After observing it, every write not to that record is stamped within
// MaxAhead of the wall clock, and the one write to that record still wins
// over it.
func TestClockIsNotDraggedToTheEndOfTime(t *testing.T) {
	c := crdt.NewClock(devA, crdt.Timestamp{})
	far := ts(crdt.MaxWall, 0, devB)
	if ahead := c.Observe(far, t0); ahead != crdt.MaxWall-t0 {
		t.Errorf("Observe reported %d ms ahead, want %d", ahead, crdt.MaxWall-t0)
	}
	for i := range uint64(1000) {
		wall := t0 + i*minute
		if got := c.Now(wall); got.Wall > wall+crdt.MaxAhead {
			t.Fatalf("write %d at wall %d stamped %v: more than MaxAhead ahead", i, wall, got)
		}
	}
	if got := c.NowAfter(t0+day, far); !got.After(far) || got.Device != devA {
		t.Errorf("a write to the far record is stamped %v, not after %v", got, far)
	}
	if got := c.NowAfter(t0+day, crdt.Timestamp{}); got.Wall > t0+day+crdt.MaxAhead {
		t.Errorf("a write to another record is stamped %v", got)
	}
}
