package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/danyue/danyue/crdt"
)

func TestCursor(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	ctx := context.Background()
	const peer crdt.DeviceID = 0xbeef
	cases := []struct {
		name string
		set  Cursor
		want Cursor
	}{
		{"first", Cursor{peer, 7, 10}, Cursor{peer, 7, 10}},
		{"advances", Cursor{peer, 7, 25}, Cursor{peer, 7, 25}},
		{"never back within an epoch", Cursor{peer, 7, 12}, Cursor{peer, 7, 25}},
		{"a new epoch (the peer was wiped) replaces it", Cursor{peer, 9, 3}, Cursor{peer, 9, 3}},
	}
	for i, tc := range cases {
		c := tc.set
		// The cursor moves with the entries it came with, atomically.
		res := apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, uint64(10+i), uint64(i))}, Cursor: &c})
		if len(res.Changed) != 1 {
			t.Fatalf("%s: %d changes", tc.name, len(res.Changed))
		}
		got, ok, err := s.Cursor(ctx, peer)
		if err != nil || !ok || got != tc.want {
			t.Errorf("%s: Cursor = %+v, %v, %v; want %+v", tc.name, got, ok, err, tc.want)
		}
	}
	// A cursor alone takes no sequence number.
	apply(t, s, Batch{Cursor: &Cursor{2, 1, 1}})
	if s.LastSeq() != uint64(len(cases)) {
		t.Errorf("LastSeq %d after a cursor-only batch, want %d", s.LastSeq(), len(cases))
	}
	s.Close()

	s = open(t, dir, Options{})
	all, err := s.Cursors(ctx)
	if err != nil || fmt.Sprint(all) != fmt.Sprint([]Cursor{{2, 1, 1}, {peer, 9, 3}}) {
		t.Errorf("Cursors = %v, %v", all, err)
	}
	if _, ok, err := s.Cursor(ctx, 99); ok || err != nil {
		t.Errorf("Cursor of an unknown device: %v, %v", ok, err)
	}
}

func TestDaily(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	ctx := context.Background()
	for _, d := range []DailyAdd{
		{"2025-01-31", 1000}, {"2025-02-01", 500}, {"2025-01-31", 250}, {"2025-02-03", 7}, {"2025-02-04", 0},
	} {
		apply(t, s, Batch{Daily: &d})
	}
	if s.LastSeq() != 0 {
		t.Errorf("daily statistics took sequence numbers: LastSeq %d", s.LastSeq())
	}
	cases := []struct {
		from, to string
		want     string
	}{
		{"2025-01-01", "2025-12-31", "[{2025-01-31 1250} {2025-02-01 500} {2025-02-03 7}]"},
		{"2025-02-01", "2025-02-03", "[{2025-02-01 500} {2025-02-03 7}]"},
		{"2025-02-02", "2025-02-02", "[]"},
		{"2025-01-31", "2025-01-31", "[{2025-01-31 1250}]"},
	}
	for _, tc := range cases {
		got, err := s.Daily(ctx, tc.from, tc.to)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("Daily(%s, %s) = %v, %v; want %v", tc.from, tc.to, got, err, tc.want)
		}
	}
	if _, err := s.Daily(ctx, "yesterday", "2025-01-01"); err == nil {
		t.Error("Daily accepted a malformed day")
	}
}
