package store

import (
	"testing"
)

// The writer reads badger's own queue of full memtables, and commits
// nothing while one waits to be written out: badger never holds two full
// memtables at once, nor a third arena.
func TestWriterWaitsForFlushes(t *testing.T) {
	// Open opens the database, and IdleClose -1 keeps it open until Close.
	s := open(t, t.TempDir(), Options{IdleClose: -1})
	pending := s.flushing
	if pending == nil {
		t.Fatal("badger.DB has no lock and imm fields: flushQueue must find its full memtables elsewhere")
	}
	var calls, seen, most int
	s.flushing = func() int { // only the writer calls it
		n := pending()
		calls++
		if n > 0 {
			seen++
		}
		most = max(most, n)
		return n
	}
	const books = 30_000 // several memtables
	fill(t, s, books)
	if calls == 0 {
		t.Fatal("the writer never asked for badger's full memtables")
	}
	if seen == 0 {
		t.Errorf("in %d commits of %d books the writer never saw a full memtable waiting", calls, books)
	}
	if most > 1 {
		t.Errorf("badger held %d full memtables at once; the writer should have waited for the first", most)
	}
	if n := countBooks(t, s); n != books {
		t.Errorf("%d books, want %d", n, books)
	}
}

// A commit waits for as long as a full memtable is reported.
func TestCommitWaitsWhileFlushing(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: -1})
	const polls = 3
	calls := 0
	s.flushing = func() int {
		calls++
		if calls <= polls {
			return 1
		}
		return 0
	}
	fill(t, s, 1)
	if calls <= polls {
		t.Fatalf("the commit went ahead after %d looks at a memtable being flushed, want it to wait for %d", calls, polls)
	}
	if n := countBooks(t, s); n != 1 {
		t.Errorf("%d books, want 1", n)
	}
}
