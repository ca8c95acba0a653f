package crdt_test

import (
	"bytes"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Rule (doc "Visibility", seed 004): a book is visible when it was never
// deleted or when its position was written strictly after its tombstone;
// equal timestamps leave it deleted; read time and title writes do not revive
// it; read-time slots survive delete and revival. Every case is checked in
// every delivery order, since replicas see the same writes in different
// orders and must agree.
func TestVisibility(t *testing.T) {
	// Operations at literal timestamps. A reads on the phone, B on the laptop.
	pos := func(at crdt.Timestamp, char uint64) crdt.Entry {
		return must(t)(crdt.SetPosition(keyMD5, at, char, 0.5))
	}
	del := func(at crdt.Timestamp) crdt.Entry { return must(t)(crdt.Delete(keyMD5, at)) }
	read := func(dev crdt.DeviceID, ms uint64) crdt.Entry { return must(t)(crdt.AddReadTime(keyMD5, nil, dev, ms)) }
	title := func(at crdt.Timestamp) crdt.Entry { return must(t)(crdt.SetTitle(keyMD5, at, "红楼梦")) }

	tests := []struct {
		name        string
		ops         []crdt.Entry
		wantVisible bool
		wantTotal   uint64
	}{
		{"never deleted", []crdt.Entry{pos(ts(t0, 0, devA), 10)}, true, 0},
		{"deleted without ever being read", []crdt.Entry{del(ts(t0, 0, devA))}, false, 0},
		{"write then delete", []crdt.Entry{pos(ts(t0, 0, devA), 10), del(ts(t0+minute, 0, devA))}, false, 0},
		{"delete then write resurrects", []crdt.Entry{del(ts(t0, 0, devA)), pos(ts(t0+minute, 0, devB), 10)}, true, 0},
		{"equal timestamps: the delete wins", []crdt.Entry{pos(ts(t0, 0, devA), 10), del(ts(t0, 0, devA))}, false, 0},
		// The logical counter orders events within a millisecond; the
		// device does not: the same clock reading on two devices is a tie,
		// and ties go to the delete (seed 004).
		{"same ms, later counter writes: resurrects", []crdt.Entry{del(ts(t0, 0, devB)), pos(ts(t0, 1, devA), 10)}, true, 0},
		{"same ms, later counter deletes", []crdt.Entry{pos(ts(t0, 1, devB), 10), del(ts(t0, 2, devA))}, false, 0},
		{"same reading, larger device deletes: the delete wins", []crdt.Entry{pos(ts(t0, 0, devA), 10), del(ts(t0, 0, devB))}, false, 0},
		{"same reading, larger device writes: the delete still wins", []crdt.Entry{del(ts(t0, 0, devA)), pos(ts(t0, 0, devB), 10)}, false, 0},
		{
			// A deletes the book while B, which has not heard of it yet,
			// keeps reading: whoever still reads it revives it, with all
			// the time both spent.
			"delete on A while B keeps reading: B resurrects, read time of both kept",
			[]crdt.Entry{
				pos(ts(t0, 0, devA), 100), read(devA, 10*hour),
				del(ts(t0+hour, 0, devA)),
				pos(ts(t0+2*hour, 0, devB), 200), read(devB, 5*hour),
			},
			true, 15 * hour,
		},
		{
			"read time after a delete counts but does not resurrect",
			[]crdt.Entry{pos(ts(t0, 0, devA), 10), del(ts(t0+minute, 0, devA)), read(devB, hour)},
			false, hour,
		},
		{
			"a title written after a delete does not resurrect",
			[]crdt.Entry{pos(ts(t0, 0, devA), 10), del(ts(t0+minute, 0, devA)), title(ts(t0+hour, 0, devB))},
			false, 0,
		},
		{
			"an older write delivered late does not resurrect",
			[]crdt.Entry{del(ts(t0+hour, 0, devA)), pos(ts(t0+minute, 0, devB), 10)},
			false, 0,
		},
		{
			"the latest delete counts: deleted, revived, deleted again",
			[]crdt.Entry{
				pos(ts(t0, 0, devA), 10), del(ts(t0+1, 0, devA)),
				pos(ts(t0+2, 0, devB), 10), del(ts(t0+3, 0, devB)),
			},
			false, 0,
		},
		{
			"deleted on two devices, read again after both",
			[]crdt.Entry{
				read(devA, 10*hour), del(ts(t0, 0, devA)), del(ts(t0+1, 0, devB)),
				read(devB, 5*hour), pos(ts(t0+2, 0, devC), 10),
			},
			true, 15 * hour,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first []byte
			permutations(len(tt.ops), func(order []int) {
				ordered := make([]crdt.Entry, len(order))
				for i, j := range order {
					ordered[i] = tt.ops[j]
				}
				got := fold(t, ordered...)
				if v := got.Book.Visible(); v != tt.wantVisible {
					t.Fatalf("order %v: Visible() = %v, want %v (position at %v, deleted at %v)",
						order, v, tt.wantVisible, got.Book.Position.At, got.Book.Deleted)
				}
				if total := got.Book.ReadTime.Total(); total != tt.wantTotal {
					t.Fatalf("order %v: read time total = %d, want %d", order, total, tt.wantTotal)
				}
				b := encode(t, got)
				if first == nil {
					first = b
				} else if !bytes.Equal(b, first) {
					t.Fatalf("order %v: replicas disagree:\n%x\n%x", order, b, first)
				}
			})
		})
	}
}
