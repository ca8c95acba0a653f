package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// has reports whether book i is in the snapshot.
func (sn *snapshot) has(t *testing.T, s *Store, i int) bool {
	t.Helper()
	_, _, found, err := s.readRecord(sn.txn, bookID(i))
	if err != nil {
		t.Fatalf("read book %d from a snapshot: %v", i, err)
	}
	return found
}

// TestSnapshotLifetime: each commit replaces the snapshot reads share; a
// reader keeps the one it took, unchanged, and the last reader of a
// replaced snapshot discards it (its read timestamp would otherwise hold
// back what compactions may drop).
func TestSnapshotLifetime(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: -1})
	ctx := context.Background()
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}})
	db, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer s.release()
	first := s.snaps.take(db)
	if first == nil {
		t.Fatal("no snapshot after a commit")
	}
	if !first.has(t, s, 1) {
		t.Fatal("the snapshot taken after a commit misses its write")
	}
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 2, 10, 1)}})
	second := s.snaps.take(db)
	if second == nil || second == first {
		t.Fatal("a commit did not replace the snapshot")
	}
	if first.has(t, s, 2) {
		t.Error("a snapshot taken before a commit sees its write")
	}
	if !second.has(t, s, 2) {
		t.Error("the snapshot taken after a commit misses its write")
	}
	if _, found, err := s.Get(ctx, bookID(2)); err != nil || !found {
		t.Errorf("Get after an acknowledged write: found %v, %v", found, err)
	}
	s.snaps.put(first)
	if _, err := first.txn.Get([]byte{pMeta}); !errors.Is(err, badger.ErrDiscardedTxn) {
		t.Errorf("a replaced snapshot's last reader left it open (Get: %v)", err)
	}
	s.snaps.put(second)
	if _, err := second.txn.Get([]byte{pMeta}); errors.Is(err, badger.ErrDiscardedTxn) {
		t.Error("the current snapshot was discarded when its readers left")
	}
}

// TestSnapshotDroppedOnIdleClose: the idle close discards the snapshot of
// the handle it closes, reads after the reopen open their own transaction
// until the next commit, and see everything.
func TestSnapshotDroppedOnIdleClose(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: 20 * time.Millisecond})
	ctx := context.Background()
	for i := 1; i <= 2; i++ {
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i, 10, 1)}})
		poll.Until(t, "the idle store to close", 5*time.Second, func() bool { open, _ := s.state(); return !open })
		s.snaps.mu.Lock()
		cur := s.snaps.cur
		s.snaps.mu.Unlock()
		if cur != nil {
			t.Fatal("the idle close left a snapshot")
		}
		for j := 1; j <= i; j++ {
			if _, found, err := s.Get(ctx, bookID(j)); err != nil || !found {
				t.Errorf("Get of book %d after reopening: found %v, %v", j, found, err)
			}
		}
	}
}

// Since lists a record at the number LastSeq covers while a change to it is
// committed and not yet acknowledged: the change has taken the record to a
// later number in the database, and a sync sender that found nothing at
// the old one would move its cursor past it and be acknowledged for a
// change it never sent.
func TestSinceWhileAChangeAwaitsItsSync(t *testing.T) {
	var holding atomic.Bool
	entered, hold := make(chan struct{}), make(chan struct{})
	s := open(t, t.TempDir(), Options{syncErr: func() error {
		if holding.Load() {
			entered <- struct{}{}
			<-hold
		}
		return nil
	}})
	ctx := context.Background()
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 1000, 10)}})
	first := s.LastSeq()

	holding.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := s.Apply(ctx, Batch{Entries: []crdt.Entry{pos(t, 1, 2000, 20)}})
		done <- err
	}()
	<-entered // committed; its sync waits
	holding.Store(false)

	seqs, entries := since(t, s, 0, 0)
	if len(seqs) != 1 || seqs[0] != first || entries[0].Book.Position.Char != 10 {
		t.Errorf("Since(0) before the change is acknowledged listed seqs %v (%d records), want the book at %d with char 10", seqs, len(entries), first)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	seqs, entries = since(t, s, first, 0)
	if len(seqs) != 1 || seqs[0] <= first || entries[0].Book.Position.Char != 20 {
		t.Errorf("Since(%d) after the change listed seqs %v, want the book at a later number with char 20", first, seqs)
	}
}
