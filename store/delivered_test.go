package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

func TestDeliveredMark(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(ctx, dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Delivered(); got != 0 {
		t.Fatalf("a new store's delivered mark is %d", got)
	}
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1), pos(t, 2, 10, 1), pos(t, 3, 10, 1)}})
	if err := s.MarkDelivered(ctx, 4); !errors.Is(err, crdt.ErrInvalid) {
		t.Errorf("MarkDelivered past LastSeq: %v, want ErrInvalid", err)
	}
	if err := s.MarkDelivered(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDelivered(ctx, 1); err != nil || s.Delivered() != 2 {
		t.Fatalf("MarkDelivered(1) after 2: %v, mark %d, want it kept at 2", err, s.Delivered())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The mark outlives a reopen, and stays where it was though the store
	// holds more: what was not sent stays unsent.
	s, err = Open(ctx, dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Delivered(); got != 2 {
		t.Fatalf("delivered mark %d after a reopen, want 2", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A store made before the mark existed may have sent all it holds.
	db, err := badger.Open(Options{}.withDefaults().badger(filepath.Join(dir, "db")))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(keyDelivered) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = open(t, dir, Options{})
	if got := s.Delivered(); got != 3 {
		t.Fatalf("delivered mark %d of a store without one, want its last change 3", got)
	}
}
