package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

func TestApplyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	title, err := crdt.SetTitle(key(1), ts(30), "Dream of the Red Chamber")
	if err != nil {
		t.Fatal(err)
	}
	devEntry, err := crdt.RenameDevice(ts(40), "Pixel")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		entry   crdt.Entry
		changed bool   // the merge changed the record
		seq     uint64 // the record's sequence number after
		isNew   bool
	}{
		{"new book", pos(t, 1, 10, 100), true, 1, true},
		{"newer position", pos(t, 1, 20, 200), true, 2, false},
		{"older position: no change, no seq", pos(t, 1, 15, 150), false, 2, false},
		{"same again: idempotent", pos(t, 1, 20, 200), false, 2, false},
		{"title", title, true, 3, false},
		{"a device record", devEntry, true, 4, true},
	}
	want := map[string]crdt.Entry{}
	for _, tc := range cases {
		id := string(idOf(tc.entry))
		before, had := want[id]
		merged := tc.entry.Clone()
		if had {
			merged = before.Clone()
			merged.Merge(&tc.entry)
		}
		res := apply(t, s, Batch{Entries: []crdt.Entry{tc.entry}})
		if !tc.changed {
			if len(res.Changed) != 0 {
				t.Errorf("%s: changed %+v, want nothing", tc.name, res.Changed)
			}
			continue
		}
		want[id] = merged
		if len(res.Changed) != 1 {
			t.Fatalf("%s: %d changes, want 1", tc.name, len(res.Changed))
		}
		c := res.Changed[0]
		if c.Seq != tc.seq || (c.Prev == nil) != tc.isNew {
			t.Errorf("%s: change seq %d prev %v, want seq %d new %v", tc.name, c.Seq, c.Prev, tc.seq, tc.isNew)
		}
		if !tc.isNew && !equalEntry(*c.Prev, before) {
			t.Errorf("%s: Prev = %+v, want %+v", tc.name, c.Prev, before)
		}
		if !equalEntry(*c.Entry, merged) {
			t.Errorf("%s: Entry = %+v, want %+v", tc.name, c.Entry, merged)
		}
		if s.LastSeq() != tc.seq {
			t.Errorf("%s: LastSeq %d, want %d", tc.name, s.LastSeq(), tc.seq)
		}
	}
	check := func(s *Store) {
		for id, w := range want {
			got, ok := get(t, s, []byte(id))
			if !ok || !equalEntry(got, w) {
				t.Errorf("Get(%x) = %+v, %v; want %+v", id, got, ok, w)
			}
		}
		if _, ok := get(t, s, bookID(99)); ok {
			t.Error("Get of an absent book found it")
		}
	}
	check(s)
	s.Close()
	s = open(t, dir, Options{})
	check(s)
	if s.LastSeq() != 4 || s.ClockHighWater() != ts(40) {
		t.Errorf("reopened: LastSeq %d, high water %v", s.LastSeq(), s.ClockHighWater())
	}
}

func equalEntry(a, b crdt.Entry) bool {
	ea, err1 := a.Encode()
	eb, err2 := b.Encode()
	return err1 == nil && err2 == nil && string(ea) == string(eb)
}

func TestApplyBatch(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	// One record changed twice in a batch takes one sequence number; an
	// entry that changes nothing takes none.
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 3, 50, 1)}})
	res := apply(t, s, Batch{Entries: []crdt.Entry{
		pos(t, 1, 10, 1), pos(t, 2, 10, 1), pos(t, 1, 20, 2), pos(t, 3, 40, 1),
	}})
	var got []string
	for _, c := range res.Changed {
		got = append(got, fmt.Sprintf("%d:%d", c.Seq, c.Entry.Book.Position.Char))
	}
	if fmt.Sprint(got) != "[2:2 3:1]" || s.LastSeq() != 3 {
		t.Errorf("changes %v, LastSeq %d; want [2:2 3:1] and 3", got, s.LastSeq())
	}
	if hw := s.ClockHighWater(); hw != ts(50) {
		t.Errorf("high water %v, want %v", hw, ts(50))
	}
}

func TestApplyInvalidWritesNothing(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	bad := pos(t, 2, 10, 1)
	bad.Book.Furthest.Char = 0 // furthest behind the position: no correct device makes this
	bad.Book.Position.Char = 5
	cursor := &Cursor{Device: 7, Epoch: 1, Seq: 9}
	cases := []struct {
		name string
		b    Batch
	}{
		{"invalid entry", Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1), bad}, Cursor: cursor, Daily: &DailyAdd{"2025-01-02", 5}}},
		{"invalid built entry", Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}, Cursor: cursor,
			Build: func(func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) { return []crdt.Entry{bad}, nil }}},
		{"build error", Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}, Cursor: cursor,
			Build: func(func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) { return nil, crdt.ErrInvalid }}},
		{"bad day", Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}, Daily: &DailyAdd{"2025-1-2", 5}}},
		{"cursor without device", Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}, Cursor: &Cursor{Epoch: 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Apply(context.Background(), tc.b)
			if !errors.Is(err, crdt.ErrInvalid) {
				t.Fatalf("Apply: %v, want crdt.ErrInvalid", err)
			}
			if _, ok := get(t, s, bookID(1)); ok || s.LastSeq() != 0 || !s.ClockHighWater().IsZero() {
				t.Errorf("a failed batch wrote: LastSeq %d, high water %v", s.LastSeq(), s.ClockHighWater())
			}
			if _, ok, _ := s.Cursor(context.Background(), 7); ok {
				t.Error("a failed batch wrote its cursor")
			}
			if d, _ := s.Daily(context.Background(), "2025-01-01", "2025-01-31"); len(d) != 0 {
				t.Errorf("a failed batch wrote its daily statistic: %v", d)
			}
		})
	}
}

// addReadTime is the daemon's read-modify-write: the new slot is the
// current slot plus ms, computed inside the write.
func addReadTime(k crdt.BookKey, ms uint64) func(func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
	return func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(idOf(crdt.BookEntry(crdt.Book{Key: k})))
		if err != nil {
			return nil, err
		}
		var local *crdt.Book
		if ok {
			local = &cur.Book
		}
		e, err := crdt.AddReadTime(k, local, dev, ms)
		if err != nil {
			return nil, err
		}
		return []crdt.Entry{e}, nil
	}
}

func TestBuildConcurrentAdders(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	const adders, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, adders)
	for range adders {
		wg.Go(func() {
			for range each {
				if _, err := s.Apply(context.Background(), Batch{Build: addReadTime(key(1), 1)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// A failing batch in the same groups does not fail the others.
	wg.Go(func() {
		for range each {
			_, err := s.Apply(context.Background(), Batch{Build: func(func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
				return nil, errors.New("no")
			}})
			if err == nil {
				errs <- errors.New("a failing Build succeeded")
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e, _ := get(t, s, bookID(1))
	if got := e.Book.ReadTime.Of(dev); got != adders*each || s.LastSeq() != adders*each {
		t.Errorf("read time %d ms, LastSeq %d; want %d for both (an increment was lost)", got, s.LastSeq(), adders*each)
	}
}

func TestDedup(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	b := Batch{Build: addReadTime(key(1), 1000), Dedup: "req-1", Daily: &DailyAdd{"2025-03-04", 1000}}
	apply(t, s, b)
	if _, err := s.Apply(context.Background(), b); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("repeated request: %v, want ErrDuplicate", err)
	}
	b.Dedup = "req-2"
	apply(t, s, b)
	e, _ := get(t, s, bookID(1))
	days, err := s.Daily(context.Background(), "2025-03-04", "2025-03-04")
	if err != nil {
		t.Fatal(err)
	}
	if e.Book.ReadTime.Of(dev) != 2000 || len(days) != 1 || days[0].Ms != 2000 {
		t.Errorf("read time %d, days %v; want 2000 each", e.Book.ReadTime.Of(dev), days)
	}
}

func TestDedupExpires(t *testing.T) {
	s := open(t, t.TempDir(), Options{DedupTTL: time.Second})
	b := Batch{Build: addReadTime(key(1), 1), Dedup: "k"}
	apply(t, s, b)
	poll.Until(t, "the dedup key to expire", 5*time.Second, func() bool {
		_, err := s.Apply(context.Background(), b)
		return err == nil
	})
}

func TestApplyCanceled(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Apply(ctx, Batch{Entries: []crdt.Entry{pos(t, 1, 1, 1)}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply: %v", err)
	}
	if s.LastSeq() != 0 {
		t.Error("a canceled Apply wrote")
	}
}

// A dedup key recorded with a digest refuses another request under the same
// key (ErrDedupMismatch) and takes a retry of the same one as a duplicate;
// neither applies anything.
func TestDedupMismatch(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	b := Batch{Build: addReadTime(key(1), 1000), Dedup: "req-1", DedupSum: []byte("sum-a")}
	apply(t, s, b)
	seq := s.LastSeq()
	tests := []struct {
		name string
		sum  []byte
		want error
	}{
		{"same request", []byte("sum-a"), ErrDuplicate},
		{"another request", []byte("sum-b"), ErrDedupMismatch},
		{"no digest", nil, ErrDedupMismatch},
	}
	for _, tt := range tests {
		r := b
		r.DedupSum = tt.sum
		if _, err := s.Apply(context.Background(), r); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	// A key recorded without a digest (an older version) is a retry of
	// whatever comes.
	apply(t, s, Batch{Build: addReadTime(key(1), 1), Dedup: "old"})
	if _, err := s.Apply(context.Background(), Batch{Build: addReadTime(key(1), 2), Dedup: "old", DedupSum: []byte("x")}); !errors.Is(err, ErrDuplicate) {
		t.Errorf("key without a digest: %v, want ErrDuplicate", err)
	}
	if e, _ := get(t, s, bookID(1)); e.Book.ReadTime.Of(dev) != 1001 || s.LastSeq() != seq+1 {
		t.Errorf("read time %d, seq %d; want 1001, %d", e.Book.ReadTime.Of(dev), s.LastSeq(), seq+1)
	}
}
