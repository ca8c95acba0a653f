package store

import (
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2/z"
)

// badgerPool is the allocator pool db's table builders take from, found
// where unpoolBuilders takes it.
func badgerPool(t *testing.T, db *badger.DB) *z.AllocatorPool {
	t.Helper()
	field := poolField(db)
	if field == nil {
		t.Fatal("badger.DB has no allocPool field: unpoolBuilders must find the pool elsewhere")
	}
	return *field
}

// The store takes badger's builder pool out of every handle it opens, and
// badger builds tables without it: memtable flushes and compactions write
// every book, and the pool is released when the handle closes.
func TestBuildersUnpooled(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{l0Compact: 2, IdleClose: -1})
	db, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	// Not held while checked, so that a failure does not leave Close
	// waiting for it: IdleClose -1 keeps db open until Close.
	s.release()
	if s.builders == nil {
		t.Fatal("the store kept no pool: unpoolBuilders did not find badger's")
	}
	if p := badgerPool(t, db); p != nil {
		t.Fatalf("badger still has its builder pool %v", p)
	}
	const books = 30_000 // several memtables, and level 0 compacted
	fill(t, s, books)
	if len(db.Tables()) == 0 {
		t.Fatal("no table was built")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.builders != nil {
		t.Error("the pool outlived the handle")
	}

	s = open(t, dir, Options{})
	if n := countBooks(t, s); n != books {
		t.Errorf("%d books after a reopen, want %d", n, books)
	}
}
