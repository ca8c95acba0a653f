package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// dbState returns whether the database is open, how many compactors badger
// runs in it (from badger's own options) and its level-0 tables.
func (s *Store) dbState() (open bool, compactors, l0 int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return false, 0, 0
	}
	return true, s.db.Opts().NumCompactors, l0Tables(s.db)
}

// burstBatch is a batch of n position writes to books from first on.
func burstBatch(t testing.TB, first, n int, wall uint64) Batch {
	entries := make([]crdt.Entry, n)
	for j := range entries {
		entries[j] = pos(t, first+j, wall, uint64(first+j))
	}
	return Batch{Entries: entries}
}

// TestCompactorsOnlyThroughABurst: the database runs badger's compactors
// only from the first memtable flush of a burst of writes until shortly
// after it, whatever Options.IdleClose says (compact.go).
func TestCompactorsOnlyThroughABurst(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: time.Hour, memTable: 1 << 20})
	for i := range 10 {
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i, 10, 1)}})
	}
	if open, n, _ := s.dbState(); !open || n != 0 {
		t.Fatalf("after a few writes: open %v with %d compactors, want open with none", open, n)
	}
	books := 0
	for range 200 {
		_, before, l0 := s.dbState()
		apply(t, s, burstBatch(t, books, 100, 20))
		books += 100
		_, after, _ := s.dbState()
		if before == 0 && after == 0 && l0 >= l0Reopen {
			t.Fatalf("a group committed without compactors into a level 0 of %d tables", l0)
		}
		if after > 0 {
			break
		}
	}
	if _, n, _ := s.dbState(); n != numCompactors {
		t.Fatalf("after a burst of %d books that flushed memtables: %d compactors, want %d", books, n, numCompactors)
	}
	poll.Until(t, "the database to close after the burst", 30*time.Second, func() bool {
		open, _, _ := s.dbState()
		return !open
	})
	if _, ok := get(t, s, bookID(books-1)); !ok {
		t.Fatalf("book %d missing after the burst", books-1)
	}
	if open, n, _ := s.dbState(); !open || n != 0 {
		t.Fatalf("reopened after the burst: open %v with %d compactors, want open with none", open, n)
	}
	if seqs, _ := since(t, s, 0, 0); len(seqs) != books {
		t.Errorf("%d records, want %d", len(seqs), books)
	}
}

// TestIdleCloseWaitsForReopen forces the interleaving in which the idle
// timer fires after the last user has left and before the writer, waiting
// to reopen the database with compactors, runs again: the idle close must
// leave the database to the writer.
func TestIdleCloseWaitsForReopen(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: time.Hour})
	if _, err := s.acquire(); err != nil {
		t.Fatal(err)
	}
	reopened := make(chan error, 1)
	go func() { reopened <- s.startCompactors() }()
	poll.Until(t, "the writer waiting to reopen the database", time.Minute, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.reopening
	})
	// release, with the idle timer's callback run before the waiting
	// writer is woken.
	s.mu.Lock()
	s.users--
	s.mu.Unlock()
	s.closeIdle()
	s.mu.Lock()
	s.idle.Broadcast()
	s.mu.Unlock()
	if err := <-reopened; err != nil {
		t.Fatalf("startCompactors: %v", err)
	}
	if open, compactors, _ := s.dbState(); !open || compactors == 0 {
		t.Errorf("after the reopen: open %v with %d compactors, want open with compactors", open, compactors)
	}
}

// TestStartCompactorsUnderLoad: the reopen with compactors waits for the
// readers and groups in flight and holds off new ones, under writers and
// readers at once, losing nothing and never hanging.
func TestStartCompactorsUnderLoad(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: 5 * time.Millisecond, memTable: 1 << 20})
	ctx := context.Background()
	const writers, batches, perBatch = 4, 40, 50
	var (
		wg      sync.WaitGroup
		done    = make(chan struct{})
		readers sync.WaitGroup
	)
	for r := range 4 {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				var err error
				if r%2 == 0 {
					_, _, err = s.Get(ctx, bookID(i%(writers*batches*perBatch)))
				} else {
					err = s.Since(ctx, 0, 100, func(uint64, []byte) error { return nil })
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				first := (w*batches + b) * perBatch
				if _, err := s.Apply(ctx, burstBatch(t, first, perBatch, 30)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	want := writers * batches * perBatch
	if seqs, _ := since(t, s, 0, 0); len(seqs) != want {
		t.Errorf("%d records after the burst, want %d", len(seqs), want)
	}
}

// TestCompactorsStopUnderATrickle: once a burst is over, the compactors
// stop although writes go on, a few at a time (a reader turning pages),
// which an idle close would wait for in vain.
func TestCompactorsStopUnderATrickle(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: time.Hour, memTable: 1 << 20})
	books := 0
	for _, n, _ := s.dbState(); n == 0; _, n, _ = s.dbState() {
		if books > 20000 {
			t.Fatalf("no compactors after a burst of %d books", books)
		}
		apply(t, s, burstBatch(t, books, 100, 20))
		books += 100
	}
	i := 0
	poll.Until(t, "the compactors to stop under a trickle of writes", 60*time.Second, func() bool {
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i%10, 30+uint64(i), 1)}})
		i++
		_, n, _ := s.dbState()
		return n == 0
	})
}
