package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

func TestDeliveredMarks(t *testing.T) {
	const a, b, c crdt.DeviceID = 0xa, 0xb, 0xc
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Options{})
	marks := func(want ...uint64) {
		t.Helper()
		for i, d := range []crdt.DeviceID{a, b, c} {
			if got := s.Delivered(d); got != want[i] {
				t.Errorf("delivered mark of %v is %d, want %d", d, got, want[i])
			}
		}
	}
	marks(0, 0, 0)
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1), pos(t, 2, 10, 1), pos(t, 3, 10, 1)}})
	for _, bad := range []struct {
		seq  uint64
		devs []crdt.DeviceID
	}{{4, []crdt.DeviceID{a}}, {2, []crdt.DeviceID{a, 0}}} {
		if err := s.MarkDelivered(ctx, bad.seq, bad.devs...); !errors.Is(err, crdt.ErrInvalid) {
			t.Errorf("MarkDelivered(%d, %v): %v, want ErrInvalid", bad.seq, bad.devs, err)
		}
	}
	marks(0, 0, 0)
	if err := s.MarkDelivered(ctx, 2, a); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDelivered(ctx, 1, a, b); err != nil {
		t.Fatal(err)
	}
	marks(2, 1, 0)
	if err := s.MarkDelivered(ctx, 1, a); err != nil {
		t.Fatal(err)
	}
	marks(2, 1, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The marks outlive a reopen, and stay where they were though the
	// store holds more: what was not sent stays unsent.
	s = open(t, dir, Options{})
	marks(2, 1, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A store made before the marks may have sent all it holds to anyone,
	// and stays so after it holds more: its first mark keeps the base.
	db, err := badger.Open(Options{}.withDefaults().badger(filepath.Join(dir, "db")))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		for _, k := range [][]byte{keyDelivered, deliveredKey(a), deliveredKey(b)} {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	marks(3, 3, 3)
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 4, 10, 1), pos(t, 5, 10, 1)}})
	if err := s.MarkDelivered(ctx, 5, a); err != nil {
		t.Fatal(err)
	}
	marks(5, 3, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	marks(5, 3, 3)
}

func TestDeliveredMarkDamaged(t *testing.T) {
	for name, k := range map[string][]byte{
		"value": deliveredKey(0xa),
		"key":   append(append([]byte(nil), keyDelivered...), 1, 2, 3),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, Options{})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := badger.Open(Options{}.withDefaults().badger(filepath.Join(dir, "db")))
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(txn *badger.Txn) error { return txn.Set(k, []byte{1, 2}) })
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Open(context.Background(), dir, Options{Logger: testLogger(t)}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open with a damaged delivered mark: %v, want ErrCorrupt", err)
			}
		})
	}
}

// A mark starts no sync of its own: it is answered once committed, and the
// next change's sync makes it durable with that change.
func TestDeliveredMarkRidesTheNextSync(t *testing.T) {
	const a crdt.DeviceID = 0xa
	dir := t.TempDir()
	s := open(t, dir, Options{})
	s = ridesTheNextSync(t, s, dir, func() error {
		if err := s.MarkDelivered(context.Background(), 1, a); err != nil {
			return err
		}
		if got := s.Delivered(a); got != 1 {
			t.Errorf("delivered mark %d after MarkDelivered, want 1", got)
		}
		return nil
	})
	if got := s.Delivered(a); got != 1 {
		t.Errorf("delivered mark %d after a reopen, want 1", got)
	}
}

// ridesTheNextSync runs write, a lazy batch (Batch.lazy), on s, the store
// in dir: it checks that write starts no sync of its own and that the next
// change starts one, then closes s and returns the store reopened, for the
// caller to find there what write wrote.
func ridesTheNextSync(t *testing.T, s *Store, dir string, write func() error) *Store {
	t.Helper()
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}})
	syncs := s.syncs.Load()
	if err := write(); err != nil {
		t.Fatal(err)
	}
	if got := s.syncs.Load(); got != syncs {
		t.Errorf("a lazy write started %d syncs, want none", got-syncs)
	}
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 2, 10, 1)}})
	if got := s.syncs.Load(); got != syncs+1 {
		t.Errorf("the next change started %d syncs, want 1", got-syncs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return open(t, dir, Options{})
}
