package store

import (
	"context"
	"errors"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Issue 15: forgetting a device drops the cursor into it, durably, and
// takes no sequence number; the next merge from it sets a new one.
func TestForgetCursor(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	ctx := context.Background()
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}, Cursor: &Cursor{5, 7, 40}})
	apply(t, s, Batch{Cursor: &Cursor{6, 8, 2}})
	last := s.LastSeq()
	for _, tc := range []struct {
		device crdt.DeviceID
		had    bool
	}{{5, true}, {5, false}, {99, false}} {
		had, err := s.ForgetCursor(ctx, tc.device)
		if err != nil || had != tc.had {
			t.Fatalf("ForgetCursor(%v) = %v, %v; want %v", tc.device, had, err, tc.had)
		}
	}
	if _, err := s.ForgetCursor(ctx, 0); !errors.Is(err, crdt.ErrInvalid) {
		t.Fatalf("ForgetCursor(0) = %v, want ErrInvalid", err)
	}
	if s.LastSeq() != last {
		t.Fatalf("LastSeq %d after forgetting a cursor, want %d", s.LastSeq(), last)
	}
	s.Close()
	s = open(t, dir, Options{})
	all, err := s.Cursors(ctx)
	if err != nil || len(all) != 1 || all[0] != (Cursor{6, 8, 2}) {
		t.Fatalf("Cursors after reopening = %v, %v; want the other device's alone", all, err)
	}
	apply(t, s, Batch{Cursor: &Cursor{5, 7, 3}})
	if c, ok, _ := s.Cursor(ctx, 5); !ok || c.Seq != 3 {
		t.Fatalf("a cursor set after forgetting is %+v, %v; want seq 3 (not held back by the old 40)", c, ok)
	}
}
