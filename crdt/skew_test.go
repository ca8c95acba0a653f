package crdt_test

import (
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Rule (doc "Time", issue 3): a device whose clock is far off cannot pin a
// book. Once another device has observed its write, that device's next write
// wins over it, whatever either wall clock says; and the skewed device, once
// it observes that write in turn, wins again with its next one. Every pair of
// the offsets +1 year, -1 day and 0, both as the first writer and as the one
// that follows.
func TestSkewedDeviceCannotPinABook(t *testing.T) {
	offsets := map[string]int64{"+1y": int64(year), "-1d": -int64(day), "0": 0}
	for firstName, firstOff := range offsets {
		for nextName, nextOff := range offsets {
			t.Run(firstName+" then "+nextName, func(t *testing.T) {
				first := crdt.NewClock(devC, crdt.Timestamp{}) // the largest id: ties do not help the follower
				next := crdt.NewClock(devA, crdt.Timestamp{})
				wallOf := func(off int64, now uint64) uint64 { return uint64(int64(now) + off) }

				w1 := must(t)(crdt.SetPosition(keyMD5, first.Now(wallOf(firstOff, t0)), 1000, 0.1))
				// The follower observes the write one millisecond later.
				ahead := next.Observe(w1.MaxTimestamp(), wallOf(nextOff, t0+1))
				if want := max(int64(0), firstOff-nextOff-1); ahead != uint64(want) {
					t.Errorf("Observe reported %d ms ahead, want %d", ahead, want)
				}
				w2 := must(t)(crdt.SetPosition(keyMD5, next.NowAfter(wallOf(nextOff, t0+2), w1.MaxTimestamp()), 2000, 0.2))
				wantPosition(t, "the follower's write", 2000, w1, w2)

				d := must(t)(crdt.Delete(keyMD5, next.NowAfter(wallOf(nextOff, t0+3), latest(t, w1, w2))))
				if got := fold(t, w1, w2, d); got.Book.Visible() {
					t.Errorf("the follower's delete lost to an earlier write")
				}

				// The skewed device observes the delete and reads on: its
				// write wins back, whichever way the clocks are off.
				first.Observe(d.MaxTimestamp(), wallOf(firstOff, t0+4))
				w3 := must(t)(crdt.SetPosition(keyMD5, first.NowAfter(wallOf(firstOff, t0+4), latest(t, w1, d)), 3000, 0.3))
				wantPosition(t, "the first device's next write", 3000, w1, w2, d, w3)
				if got := fold(t, d, w3); !got.Book.Visible() {
					t.Errorf("a write made after observing the delete did not resurrect the book")
				}
			})
		}
	}
}

// wantPosition checks that merging the writes, in every order, leaves the
// position at char.
func wantPosition(t *testing.T, what string, char uint64, writes ...crdt.Entry) {
	t.Helper()
	permutations(len(writes), func(order []int) {
		ordered := make([]crdt.Entry, len(order))
		for i, j := range order {
			ordered[i] = writes[j]
		}
		if got := fold(t, ordered...).Book.Position; got.Char != char {
			t.Errorf("%s does not win in order %v: position %+v", what, order, got)
		}
	})
}

// latest returns the latest timestamp of the record the entries merge into:
// the floor of a local write to it.
func latest(t *testing.T, entries ...crdt.Entry) crdt.Timestamp {
	e := fold(t, entries...)
	return e.MaxTimestamp()
}
