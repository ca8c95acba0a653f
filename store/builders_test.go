package store

import (
	"reflect"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// badgerPool is the allocator pool db's table builders take from, read
// the way unpoolBuilders finds it.
func badgerPool(t *testing.T, db *badger.DB) any {
	t.Helper()
	f := reflect.ValueOf(db).Elem().FieldByName("allocPool")
	if !f.IsValid() {
		t.Fatal("badger.DB has no allocPool field: unpoolBuilders must find the pool elsewhere")
	}
	if f.IsNil() {
		return nil
	}
	return f.Pointer()
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
	s.release()
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
