package store

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// fullBook is a full record of book i: position, title and read time written at
// wall, as a device that read it for a while holds it.
func fullBook(t testing.TB, i int, wall uint64) crdt.Entry {
	t.Helper()
	e := pos(t, i, wall, 1234)
	e.Book.Title = crdt.Text{At: ts(wall), Value: strings.Repeat("長い書名", 20)}
	e.Book.ReadTime = crdt.ReadTime{{Device: dev, Ms: 60_000}, {Device: dev + 1, Ms: 5_000}}
	return e
}

func del(t testing.TB, i int, wall uint64) crdt.Entry {
	t.Helper()
	e, err := crdt.Delete(key(i), ts(wall))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// everyone is stability as if every member held the store up to its end.
func everyone(s *Store) crdt.Stability { return crdt.Stability{UpTo: s.LastSeq()} }

func purgeAll(t testing.TB, s *Store, st crdt.Stability) PurgeResult {
	t.Helper()
	var total PurgeResult
	for {
		r, err := s.Purge(context.Background(), st, 100)
		if err != nil {
			t.Fatalf("Purge: %v", err)
		}
		total.Records += r.Records
		total.Bytes += r.Bytes
		total.Kept += r.Kept
		if !r.More {
			return total
		}
	}
}

func counts(t testing.TB, s *Store) (visible, deleted uint64) {
	t.Helper()
	v, d, err := s.BookCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v, d
}

// dbSize is the size of the database's tables once everything is
// compacted into one level, where deleted keys are dropped: the closed
// store's database opened alone, with level 0 compacted from one table on.
func dbSize(t testing.TB, dir string) int64 {
	t.Helper()
	o := Options{}.withDefaults().badger(filepath.Join(dir, "db"))
	o.NumLevelZeroTables = 1
	db, err := badger.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, ti := range db.Tables() {
		n += int64(ti.OnDiskSize)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurgeShrinks: deleted books that every member holds go, with their
// index entries and counts; what survives is the residue; the store is
// smaller on disk once compacted, and stays consistent across a reopen.
func TestPurgeShrinks(t *testing.T) {
	dir := t.TempDir()
	const n, kept = 3000, 100
	s := open(t, dir, Options{IdleClose: -1})
	for lo := 0; lo < n; lo += MaxBatchEntries / 2 {
		var b Batch
		for i := lo; i < min(lo+MaxBatchEntries/2, n); i++ {
			b.Entries = append(b.Entries, fullBook(t, i, 1000))
		}
		apply(t, s, b)
	}
	for lo := kept; lo < n; lo += MaxBatchEntries {
		var b Batch
		for i := lo; i < min(lo+MaxBatchEntries, n); i++ {
			b.Entries = append(b.Entries, del(t, i, 2000))
		}
		apply(t, s, b)
	}
	if v, d := counts(t, s); v != kept || d != n-kept {
		t.Fatalf("before: %d visible, %d deleted", v, d)
	}
	last := s.LastSeq()
	s.Close()
	before := dbSize(t, dir)

	s = open(t, dir, Options{IdleClose: -1})
	got := purgeAll(t, s, everyone(s))
	if got.Records != n-kept || got.Bytes <= 0 {
		t.Fatalf("purged %+v, want %d records and bytes reclaimed", got, n-kept)
	}
	if v, d := counts(t, s); v != kept || d != 0 {
		t.Fatalf("after: %d visible, %d deleted; want %d, 0", v, d, kept)
	}
	if again := purgeAll(t, s, everyone(s)); again.Records != 0 {
		t.Fatalf("a second purge collected %+v", again)
	}
	// A full Since checks the count against what it finds.
	if seqs, _ := since(t, s, 0, 0); len(seqs) != kept {
		t.Fatalf("Since(0) yields %d records, want %d", len(seqs), kept)
	}
	res, ok, err := s.Residue(context.Background(), key(kept))
	if err != nil || !ok || res.Deleted != ts(2000) || res.ReadTime.Total() != 65_000 || res.Title.Value != strings.Repeat("長い書名", 20) {
		t.Fatalf("residue %+v, %v, %v", res, ok, err)
	}
	if _, ok := get(t, s, bookID(kept)); ok {
		t.Fatal("a collected book is still a record")
	}
	listed := 0
	err = s.Page(context.Background(), PageQuery{Order: OrderKey, Deleted: true, Limit: kept + 1}, func(p *Page) error {
		listed = len(p.Items)
		return nil
	})
	if err != nil || listed != kept {
		t.Fatalf("a page with deleted books lists %d, %v; want %d", listed, err, kept)
	}
	s.Close()
	after := dbSize(t, dir)

	s = open(t, dir, Options{IdleClose: -1})
	if s.LastSeq() != last {
		t.Fatalf("LastSeq after reopen = %d, want %d", s.LastSeq(), last)
	}
	if _, lost := s.Loss(); lost {
		t.Fatal("a purge was taken for a loss")
	}
	t.Logf("%d books, %d deleted and collected: reclaimed %d bytes of keys and values, kept %d in residues (%d bytes each); database %d -> %d bytes after compaction",
		n, got.Records, got.Bytes, got.Kept, got.Kept/int64(got.Records), before, after)
	if after >= before {
		t.Fatalf("database did not shrink: %d -> %d bytes", before, after)
	}
}

// TestPurgeOnlyWhatIsStable: a book is collected only when deleted and held
// by every member (its sequence number at or below UpTo).
func TestPurgeOnlyWhatIsStable(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	apply(t, s, Batch{Entries: []crdt.Entry{fullBook(t, 1, 1000), fullBook(t, 2, 1000), fullBook(t, 3, 1000)}})
	apply(t, s, Batch{Entries: []crdt.Entry{del(t, 1, 2000)}}) // seq 4
	upTo := s.LastSeq()
	apply(t, s, Batch{Entries: []crdt.Entry{del(t, 2, 2000)}})    // seq 5: not yet held by all
	apply(t, s, Batch{Entries: []crdt.Entry{del(t, 3, 2000)}})    // seq 6
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 3, 3000, 9)}}) // revived: seq 7
	got := purgeAll(t, s, crdt.Stability{UpTo: upTo})
	if got.Records != 1 {
		t.Fatalf("collected %d books, want 1 (book 1)", got.Records)
	}
	if _, ok := get(t, s, bookID(1)); ok {
		t.Fatal("book 1 not collected")
	}
	got = purgeAll(t, s, everyone(s))
	if got.Records != 1 {
		t.Fatalf("collected %d more, want 1 (book 2; book 3 was revived)", got.Records)
	}
	if e, ok := get(t, s, bookID(3)); !ok || !e.Book.Visible() {
		t.Fatal("the revived book was collected")
	}
	if _, err := s.Purge(context.Background(), crdt.Stability{UpTo: s.LastSeq() + 1}, 0); err == nil {
		t.Fatal("a stability past the end was taken")
	}
}

// TestPurgeKeepsTheUndoWindow: a book every member holds is kept while
// its tombstone is newer than the window's end, and Purge reports the
// earliest such tombstone, across batches; once the window passes it, it
// is collected.
func TestPurgeKeepsTheUndoWindow(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	apply(t, s, Batch{Entries: []crdt.Entry{fullBook(t, 1, 1000), fullBook(t, 2, 1000), fullBook(t, 3, 1000), fullBook(t, 4, 1000)}})
	apply(t, s, Batch{Entries: []crdt.Entry{del(t, 1, 2000), del(t, 2, 3000), del(t, 3, 4000), del(t, 4, 2500)}})
	for _, tt := range []struct {
		by        uint64
		collected int
		held      uint64
	}{
		{1999, 0, 2000},
		{2000, 1, 2500}, // book 1, deleted at the window's end
		{2999, 1, 3000}, // book 4
		{5000, 2, 0},    // books 2 and 3
	} {
		var got PurgeResult
		for {
			r, err := s.Purge(context.Background(), crdt.Stability{UpTo: s.LastSeq(), DeletedBy: tt.by}, 1)
			if err != nil {
				t.Fatal(err)
			}
			got.Records += r.Records
			if !r.More {
				got.Held = r.Held
				break
			}
		}
		if got.Records != tt.collected || got.Held != tt.held {
			t.Errorf("window to %d: collected %d, earliest kept %d; want %d, %d", tt.by, got.Records, got.Held, tt.collected, tt.held)
		}
	}
	if _, deleted := counts(t, s); deleted != 0 {
		t.Fatalf("%d deleted books left, want 0", deleted)
	}
}

// TestPurgedBookArrivesAgain: what an arriving copy of a collected book
// does (crdt.Absorbs): an old copy that holds the delete changes nothing;
// an old copy without it (a device restored from an old copy) cannot
// resurrect the book, and brings the record back, deleted, so that its
// sender learns the delete; a later write revives it with all its read time.
func TestPurgedBookArrivesAgain(t *testing.T) {
	// Reopened: a store finds the residues it holds at open (it skips the
	// residue read while it holds none).
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprintf("reopen=%v", reopen), func(t *testing.T) { testPurgedBookArrivesAgain(t, reopen) })
	}
}

func testPurgedBookArrivesAgain(t *testing.T, reopen bool) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	full := fullBook(t, 1, 1000)
	apply(t, s, Batch{Entries: []crdt.Entry{full, fullBook(t, 2, 1000)}})
	apply(t, s, Batch{Entries: []crdt.Entry{del(t, 1, 2000)}})
	withDelete, _ := get(t, s, bookID(1))
	purgeAll(t, s, everyone(s))
	if reopen {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, dir, Options{})
	}
	last := s.LastSeq()

	if res := apply(t, s, Batch{Entries: []crdt.Entry{withDelete}}); len(res.Changed) != 0 || s.LastSeq() != last {
		t.Fatalf("an old copy holding the delete changed %+v", res.Changed)
	}
	if _, ok := get(t, s, bookID(1)); ok {
		t.Fatal("an old copy holding the delete brought the record back")
	}

	res := apply(t, s, Batch{Entries: []crdt.Entry{full}}) // restored from before the delete
	if len(res.Changed) != 1 {
		t.Fatalf("an old copy without the delete changed %d records, want 1", len(res.Changed))
	}
	e, ok := get(t, s, bookID(1))
	if !ok || e.Book.Visible() || e.Book.Deleted != ts(2000) {
		t.Fatalf("after an old copy: %+v, %v; want the book deleted at 2000", e.Book, ok)
	}
	if v, d := counts(t, s); v != 1 || d != 1 {
		t.Fatalf("counts %d visible, %d deleted; want 1, 1", v, d)
	}
	if _, ok, _ := s.Residue(ctx, key(1)); ok {
		t.Fatal("the residue stayed beside the record")
	}
	// It is shipped again (Since), and collected again once held by all.
	if seqs, _ := since(t, s, last, 0); len(seqs) != 1 {
		t.Fatalf("the record brought back is not shipped: %v", seqs)
	}
	purgeAll(t, s, everyone(s))

	// A local read-time write continues the slot the residue kept
	// (Build sees the residue), and a later position revives the book.
	apply(t, s, Batch{Build: addReadTime(key(1), 1_000)})
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 3000, 77)}})
	e, _ = get(t, s, bookID(1))
	if !e.Book.Visible() || e.Book.ReadTime.Of(dev) != 61_000 || e.Book.ReadTime.Total() != 66_000 {
		t.Fatalf("revived book %+v: want visible with all its read time (61000 + 5000)", e.Book)
	}
}

// TestPurgeLastChange: collecting the record that holds the last sequence
// number keeps the sequence where it was across a reopen (no number is used
// twice, and nothing is taken for a loss).
func TestPurgeLastChange(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	apply(t, s, Batch{Entries: []crdt.Entry{fullBook(t, 1, 1000), fullBook(t, 2, 1000)}})
	apply(t, s, Batch{Entries: []crdt.Entry{del(t, 2, 2000)}})
	last := s.LastSeq()
	purgeAll(t, s, everyone(s))
	s.Close()
	s = open(t, dir, Options{})
	if s.LastSeq() != last {
		t.Fatalf("LastSeq = %d after reopen, want %d", s.LastSeq(), last)
	}
	if _, lost := s.Loss(); lost {
		t.Fatal("reported a loss")
	}
	res := apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 3, 1000, 1)}})
	if res.Changed[0].Seq != last+1 {
		t.Fatalf("next change got %d, want %d", res.Changed[0].Seq, last+1)
	}
}

func TestSummary(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{})
	apply(t, s, Batch{Entries: []crdt.Entry{fullBook(t, 1, 1000)}, Cursor: &Cursor{Device: dev + 2, Epoch: 7, Seq: 40}})
	apply(t, s, Batch{Cursor: &Cursor{Device: dev + 1, Epoch: 9, Seq: 3}})
	at := crdt.Timestamp{Wall: 5000, Device: dev}
	sm, err := s.Summary(ctx, dev, at)
	if err != nil {
		t.Fatal(err)
	}
	want := []crdt.Cursor{{Device: dev + 1, Epoch: 9, Seq: 3}, {Device: dev + 2, Epoch: 7, Seq: 40}}
	if sm.Device != dev || sm.Epoch != s.Epoch() || sm.Seq != s.LastSeq() || sm.At != at || !slices.Equal(sm.Cursors, want) {
		t.Fatalf("summary %+v", sm)
	}
	if _, err := crdt.EncodeSummaries([]crdt.Summary{sm}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.Residues(ctx, func([]byte) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("residues %d, %v", n, err)
	}
}
