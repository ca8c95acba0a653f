package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
)

func TestSinceIndex(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	for i := 1; i <= 5; i++ {
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i, 10, uint64(i))}})
	}
	// Books 2 and 4 change again: their index entries 2 and 4 are superseded
	// by 6 and 7; book 2's second change (8) supersedes 6.
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 2, 20, 20)}})
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 4, 20, 40)}})
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 2, 30, 21)}})
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 3, 5, 1)}}) // older, and not further: no change

	cases := []struct {
		after uint64
		limit int
		want  string // seq:char of each record, in order
	}{
		{0, 0, "[1:1 3:3 5:5 7:40 8:21]"},
		{0, 2, "[1:1 3:3]"},
		{3, 0, "[5:5 7:40 8:21]"},
		{5, 1, "[7:40]"},
		{6, 0, "[7:40 8:21]"},
		{8, 0, "[]"},
		{1 << 62, 0, "[]"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("after %d limit %d", tc.after, tc.limit), func(t *testing.T) {
			seqs, entries := since(t, s, tc.after, tc.limit)
			var got []string
			for i := range seqs {
				got = append(got, fmt.Sprintf("%d:%d", seqs[i], entries[i].Book.Position.Char))
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("Since(%d, %d) = %v, want %v", tc.after, tc.limit, got, tc.want)
			}
		})
	}

	// One index entry per record, holding exactly the stored record.
	seqs, entries := since(t, s, 0, 0)
	seen := map[string]bool{}
	for i, e := range entries {
		id := string(idOf(e))
		if seen[id] {
			t.Errorf("record %x appears twice in the index", id)
		}
		seen[id] = true
		got, _ := get(t, s, []byte(id))
		if !equalEntry(got, e) {
			t.Errorf("index entry %d holds %+v, Get says %+v", seqs[i], e, got)
		}
	}
	if len(seen) != 5 {
		t.Errorf("%d records indexed, want 5", len(seen))
	}
}

func TestSinceStops(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	for i := 1; i <= 3; i++ {
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i, 10, 1)}})
	}
	stop := errors.New("stop")
	n := 0
	err := s.Since(context.Background(), 0, 0, func(uint64, []byte) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("Since returned %v after %d calls, want fn's error after 1", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Since(ctx, 0, 0, func(uint64, []byte) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Since with a canceled context: %v", err)
	}
}

func TestScan(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	for _, i := range []int{5, 1, 4, 2, 3} {
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i, 10, uint64(i))}})
	}
	d, err := crdt.RenameDevice(ts(11), "laptop")
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Entries: []crdt.Entry{d}})
	cases := []struct {
		kind crdt.Kind
		want string
	}{
		{crdt.KindBook, "[1 2 3 4 5]"},
		{crdt.KindDevice, "[laptop]"},
	}
	for _, tc := range cases {
		var got []string
		var last []byte
		err := s.Scan(context.Background(), tc.kind, func(e crdt.Entry) error {
			if e.Kind != tc.kind {
				t.Errorf("Scan(%v) yielded a %v", tc.kind, e.Kind)
			}
			if id := idOf(e); bytes.Compare(id, last) <= 0 {
				t.Errorf("Scan(%v) out of id order", tc.kind)
			} else {
				last = id
			}
			if e.Kind == crdt.KindBook {
				got = append(got, fmt.Sprint(e.Book.Position.Char))
			} else {
				got = append(got, e.Device.Name.Value)
			}
			return nil
		})
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("Scan(%v) = %v, %v; want %v", tc.kind, got, err, tc.want)
		}
	}
}

func TestWatch(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	last, ch := s.Watch()
	if last != 0 {
		t.Fatalf("Watch on an empty store: last %d", last)
	}
	e := pos(t, 1, 10, 1)
	done := make(chan error, 1)
	go func() {
		_, err := s.Apply(context.Background(), Batch{Entries: []crdt.Entry{e}})
		done <- err
	}()
	defer func() {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not wake the waiter")
	}
	last, ch = s.Watch()
	if last != 1 {
		t.Fatalf("after a change, Watch last = %d, want 1", last)
	}
	// A batch that changes nothing does not wake anyone.
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}})
	select {
	case <-ch:
		t.Error("a batch that changed nothing woke the waiter")
	default:
	}
}
