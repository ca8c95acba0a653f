package store

import (
	"context"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// CountSince counts what Since would give, from the start (by the record
// counts) and from any later sequence number (by the index), with records
// changed more than once counted once, at their last change.
func TestCountSince(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	for i := 1; i <= 5; i++ {
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i, 10, uint64(i))}})
	}
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 2, 20, 20)}})
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 4, 20, 40)}})
	apply(t, s, Batch{Entries: []crdt.Entry{del(t, 2, 30)}})
	ctx := context.Background()
	for after := uint64(0); after <= s.LastSeq()+1; after++ {
		var want uint64
		if err := s.Since(ctx, after, 0, func(uint64, []byte) error { want++; return nil }); err != nil {
			t.Fatal(err)
		}
		got, err := s.CountSince(ctx, after)
		if err != nil || got != want {
			t.Errorf("CountSince(%d) = %d, %v; Since gives %d records", after, got, err, want)
		}
	}
}
