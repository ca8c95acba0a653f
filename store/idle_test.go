package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// state returns whether the database is open and how often it was opened.
func (s *Store) state() (open bool, opens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db != nil, s.opens
}

func TestIdleClose(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: 20 * time.Millisecond})
	ctx := context.Background()
	last, ch := s.Watch()
	for i := 1; i <= 3; i++ {
		poll.Until(t, "the idle store to close", 5*time.Second, func() bool { open, _ := s.state(); return !open })
		_, opens := s.state()
		// Every kind of use reopens it, transparently.
		uses := []func() error{
			func() error { _, err := s.Apply(ctx, Batch{Entries: []crdt.Entry{pos(t, i, 10, 1)}}); return err },
			func() error { _, _, err := s.Get(ctx, bookID(i)); return err },
			func() error { return s.Since(ctx, 0, 0, func(uint64, []byte) error { return nil }) },
		}
		for _, use := range uses {
			poll.Until(t, "the idle store to close", 5*time.Second, func() bool { open, _ := s.state(); return !open })
			if err := use(); err != nil {
				t.Fatal(err)
			}
		}
		if _, now := s.state(); now <= opens {
			t.Fatalf("opens %d after use, was %d", now, opens)
		}
	}
	// What the store serves from memory survives the closes.
	select {
	case <-ch:
	default:
		t.Error("Watch channel not closed by changes made across idle closes")
	}
	if s.LastSeq() != last+3 {
		t.Errorf("LastSeq %d, want %d", s.LastSeq(), last+3)
	}
	seqs, _ := since(t, s, 0, 0)
	if len(seqs) != 3 {
		t.Errorf("%d records after idle closes, want 3", len(seqs))
	}
}

func TestIdleCloseNeverUnderUse(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				if _, err := s.Apply(ctx, Batch{Entries: []crdt.Entry{pos(t, g*100+i, 10, 1)}}); err != nil {
					t.Error(err)
					return
				}
				err := s.Since(ctx, 0, 0, func(uint64, []byte) error { return nil })
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if s.LastSeq() != 200 {
		t.Errorf("LastSeq %d, want 200", s.LastSeq())
	}
}

// A sync that ends after a later one (which acknowledged its groups and
// released their references) must still find its database open: the idle
// close used to close it under the slow sync, which then called into the
// closed database (a nil memtable in badger, a crash). Slow disks, and
// Windows' fsync, make the order likely.
func TestIdleCloseWaitsForSlowSync(t *testing.T) {
	var (
		armed atomic.Bool
		calls atomic.Int32
	)
	unblock := make(chan struct{})
	s := open(t, t.TempDir(), Options{IdleClose: time.Millisecond, syncErr: func() error {
		if armed.Load() && calls.Add(1) == 1 {
			<-unblock
		}
		return nil
	}})
	armed.Store(true) // not the syncs of the store's creation
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release) // before the store's close, which waits for the sync
	first := make(chan error, 1)
	go func() {
		_, err := s.Apply(context.Background(), Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}})
		first <- err
	}()
	poll.Until(t, "the first sync to start", 10*time.Second, func() bool { return calls.Load() >= 1 })
	// The second group's sync ends first and acknowledges both groups.
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 2, 10, 1)}})
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	users, open := s.users, s.db != nil
	s.mu.Unlock()
	if users == 0 || !open {
		t.Fatalf("with a sync in flight the database has %d users (open %v): the idle close may close it under the sync", users, open)
	}
	release()
	poll.Until(t, "the idle store to close after the sync", 10*time.Second, func() bool { open, _ := s.state(); return !open })
	if s.LastSeq() != 2 {
		t.Errorf("LastSeq %d, want 2", s.LastSeq())
	}
}

func TestCompactionKeepsL0Small(t *testing.T) {
	// Every idle close flushes the memtable to a level-0 table; the store
	// compacts when there are l0Compact of them.
	s := open(t, t.TempDir(), Options{IdleClose: 10 * time.Millisecond, l0Compact: 3})
	ctx := context.Background()
	maxL0 := 0
	for i := range 12 {
		poll.Until(t, "the idle store to close", 5*time.Second, func() bool { open, _ := s.state(); return !open })
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i, 10, 1)}})
		db, err := s.acquire()
		if err != nil {
			t.Fatal(err)
		}
		maxL0 = max(maxL0, l0Tables(db))
		s.release()
	}
	poll.Until(t, "compaction to finish", 10*time.Second, s.compacted)
	if maxL0 > 3 {
		t.Errorf("level 0 grew to %d tables with a threshold of 3", maxL0)
	}
	seqs, _ := since(t, s, 0, 0)
	if len(seqs) != 12 {
		t.Errorf("%d records after compactions, want 12", len(seqs))
	}
	if _, ok, err := s.Get(ctx, bookID(0)); !ok || err != nil {
		t.Errorf("Get after compaction: %v, %v", ok, err)
	}
}
