package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/danyue/danyue/internal/poll"
	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// walk reads every page of q (q.After and q.Limit as given) and returns the
// ids in the order the pages gave them.
func walk(t testing.TB, s *Store, q PageQuery) [][]byte {
	t.Helper()
	return walkWith(t, s, q, func() {})
}

// walkWith is walk calling between after each page.
func walkWith(t testing.TB, s *Store, q PageQuery, between func()) [][]byte {
	t.Helper()
	var ids [][]byte
	for pages := 0; ; pages++ {
		if pages > 1_000_000 {
			t.Fatal("the page walk does not end")
		}
		var next []byte
		err := s.Page(context.Background(), q, func(p *Page) error {
			n := 0
			err := p.Each(func(e crdt.Entry) error {
				if !bytes.Equal(e.AppendID(nil), p.Items[n].ID) {
					t.Errorf("Each gave %x for item %x", e.AppendID(nil), p.Items[n].ID)
				}
				n++
				return nil
			})
			if n != len(p.Items) {
				t.Errorf("Each gave %d books for %d items", n, len(p.Items))
			}
			for _, it := range p.Items {
				ids = append(ids, it.ID)
			}
			next = p.Next
			return err
		})
		if err != nil {
			t.Fatalf("Page: %v", err)
		}
		if next == nil {
			return ids
		}
		q.After = next
		between()
	}
}

// oracle returns the ids of the books in s in order o, sorted by the rules
// stated for the orders, from a full Scan.
func oracle(t testing.TB, s *Store, o Order, deleted bool) [][]byte {
	t.Helper()
	var books []crdt.Book
	err := s.Scan(context.Background(), crdt.KindBook, func(e crdt.Entry) error {
		if deleted || e.Book.Visible() {
			books = append(books, e.Book)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	id := func(b crdt.Book) []byte { e := crdt.BookEntry(b); return e.AppendID(nil) }
	title := func(b crdt.Book) (string, bool) {
		f := strings.ToLower(b.Title.Value)
		if n := titleSortBytes; len(f) > n {
			for n > 0 && !utf8.RuneStart(f[n]) {
				n--
			}
			f = f[:n]
		}
		return f, b.Title.Value == ""
	}
	slices.SortFunc(books, func(a, b crdt.Book) int {
		switch o {
		case OrderRecent:
			if c := b.Position.At.Compare(a.Position.At); c != 0 {
				return c
			}
		case OrderTitle:
			ta, na := title(a)
			tb, nb := title(b)
			if na != nb {
				if na {
					return 1
				}
				return -1
			}
			if c := strings.Compare(ta, tb); c != 0 {
				return c
			}
		}
		return bytes.Compare(id(a), id(b))
	})
	ids := make([][]byte, len(books))
	for i, b := range books {
		ids[i] = id(b)
	}
	return ids
}

// shelfWrite is a random change to book i: a position, a title, a delete.
func shelfWrite(t testing.TB, r *rand.Rand, i int, wall uint64) crdt.Entry {
	t.Helper()
	titles := []string{"Alpha", "alpha", "Beta", "gamma", "Ünïcode", "a\x00b", "a", "",
		strings.Repeat("long title ", 10) + "one", strings.Repeat("long title ", 10) + "two"}
	at := crdt.Timestamp{Wall: wall, Logical: uint32(r.IntN(3)), Device: crdt.DeviceID(1 + r.IntN(3))}
	var (
		e   crdt.Entry
		err error
	)
	switch r.IntN(4) {
	case 0:
		e, err = crdt.Delete(key(i), at)
	case 1:
		if tt := titles[r.IntN(len(titles))]; tt != "" {
			// Built by hand, not by SetTitle: a title with NUL can only
			// come from another device (an older version let it in), and
			// the index must still order it.
			e = crdt.BookEntry(crdt.Book{Key: key(i), Title: crdt.Text{At: at, Value: tt}})
			break
		}
		fallthrough
	default:
		e, err = crdt.SetPosition(key(i), at, uint64(r.IntN(1000)), 0.5)
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestPagesMatchOracle(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 6 {
		var entries []crdt.Entry
		for range 150 {
			entries = append(entries, shelfWrite(t, r, r.IntN(300), uint64(1000+r.IntN(50)+round*10)))
		}
		apply(t, s, Batch{Entries: entries})
		for _, o := range orders {
			for _, deleted := range []bool{false, true} {
				want := oracle(t, s, o, deleted)
				for _, limit := range []int{1, 7, 100, MaxPage} {
					got := walk(t, s, PageQuery{Order: o, Deleted: deleted, Limit: limit})
					if !slices.EqualFunc(got, want, bytes.Equal) {
						t.Fatalf("round %d, order %c, deleted %v, limit %d: pages give %d books, want %d in oracle order",
							round, o, deleted, limit, len(got), len(want))
					}
				}
			}
		}
	}
}

// TestPageWalkUnderWrites checks the promise of a cursor: while other
// writes go on, a page walk gives every book that does not change during the
// walk exactly once, and no book twice unless it changed.
func TestPageWalkUnderWrites(t *testing.T) {
	const books = 2000
	s := open(t, t.TempDir(), Options{})
	r := rand.New(rand.NewPCG(3, 4))
	var entries []crdt.Entry
	for i := range books {
		entries = append(entries, shelfWrite(t, r, i, uint64(1000+r.IntN(500))))
		if len(entries) == MaxBatchEntries {
			apply(t, s, Batch{Entries: entries})
			entries = nil
		}
	}
	apply(t, s, Batch{Entries: entries})

	for _, o := range orders {
		for _, deleted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%c/deleted=%v", o, deleted), func(t *testing.T) {
				before := oracle(t, s, o, true)
				visible := map[string]bool{}
				for _, id := range oracle(t, s, o, false) {
					visible[string(id)] = true
				}
				var (
					mu      sync.Mutex
					touched = map[string]bool{}
					written atomic.Int64
					stop    = make(chan struct{})
					wg      sync.WaitGroup
				)
				// Stopped however the walk ends, so that the writer never
				// reports to a test that has finished.
				stopWriter := sync.OnceFunc(func() { close(stop); wg.Wait() })
				defer stopWriter()
				wg.Add(1)
				go func() {
					defer wg.Done()
					wr := rand.New(rand.NewPCG(5, uint64(o)))
					for wall := uint64(2000); ; wall++ {
						select {
						case <-stop:
							return
						default:
						}
						i := wr.IntN(books + 100) // some new books too
						mu.Lock()
						touched[string(bookID(i))] = true
						mu.Unlock()
						if _, err := s.Apply(context.Background(), Batch{Entries: []crdt.Entry{shelfWrite(t, wr, i, wall)}}); err != nil {
							t.Error(err)
							return
						}
						written.Add(1)
					}
				}()
				// Between pages, wait for another write (any, not only one
				// to a book not touched yet), so that the walk surely
				// overlaps them.
				got := walkWith(t, s, PageQuery{Order: o, Deleted: deleted, Limit: 13}, func() {
					n := written.Load()
					poll.Until(t, "a write", 30*time.Second, func() bool { return written.Load() > n })
				})
				stopWriter()

				seen := map[string]int{}
				for _, id := range got {
					seen[string(id)]++
				}
				unchanged := 0
				for _, id := range before {
					k := string(id)
					if touched[k] || (!deleted && !visible[k]) {
						continue
					}
					unchanged++
					if seen[k] != 1 {
						t.Errorf("unchanged book %x came %d times", id, seen[k])
					}
				}
				for k, n := range seen {
					if n > 1 && !touched[k] {
						t.Errorf("book %x came %d times without changing", k, n)
					}
				}
				t.Logf("%d books in the walk, %d unchanged, %d written to meanwhile", len(got), unchanged, len(touched))
				if unchanged == 0 || len(touched) < 50 {
					t.Errorf("the test did not test: %d unchanged, %d touched", unchanged, len(touched))
				}
			})
		}
	}
}

func TestPageRefusesBadQueries(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}})
	for _, q := range []PageQuery{
		{Order: OrderKey, Limit: 0},
		{Order: OrderKey, Limit: MaxPage + 1},
		{Order: OrderKey, Limit: 1, After: []byte{1, 2, 3}},
		{Order: OrderRecent, Limit: 1, After: bookID(1)},
		{Order: OrderTitle, Limit: 1, After: []byte{1, 'a'}},
		{Order: 'x', Limit: 1, After: bookID(1)},
		{Order: 'x', Limit: 1},
	} {
		err := s.Page(context.Background(), q, func(*Page) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "invalid") {
			t.Errorf("Page(%+v): %v, want an invalid-input error", q, err)
		}
	}
}

// TestIndexBuiltForOldStore opens a store as schema 1 left it, without
// indexes, or with a part of them from an interrupted build, and checks
// that Open builds them.
func TestIndexBuiltForOldStore(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partial=%v", partial), func(t *testing.T) { testIndexBuilt(t, partial) })
	}
}

func testIndexBuilt(t *testing.T, partial bool) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	r := rand.New(rand.NewPCG(7, 8))
	var entries []crdt.Entry
	for i := range 400 {
		entries = append(entries, shelfWrite(t, r, i, uint64(1000+i)))
	}
	apply(t, s, Batch{Entries: entries})
	want := map[Order][][]byte{}
	for _, o := range orders {
		want[o] = oracle(t, s, o, true)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it a schema 1 store: no index, version 1.
	opt := Options{Logger: testLogger(t)}.withDefaults()
	db, err := badger.Open(opt.badger(dir + "/db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DropPrefix([]byte{pOrder}); err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(keySchema, binary.BigEndian.AppendUint32(nil, 1)); err != nil || !partial {
			return err
		}
		// A leftover of an interrupted build, which must not survive.
		return txn.Set(append(orderPrefix(OrderKey, scopeVisible), bookID(9999)...), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	// Kept open, so that it is still the database the build ran in.
	s = open(t, dir, Options{IdleClose: -1})
	if _, n, _ := s.dbState(); n != numCompactors {
		t.Errorf("the book index was built with %d compactors, want %d: a large build would fill level 0 with nothing to drain it", n, numCompactors)
	}
	for _, o := range orders {
		got := walk(t, s, PageQuery{Order: o, Deleted: true, Limit: 50})
		if !slices.EqualFunc(got, want[o], bytes.Equal) {
			t.Errorf("order %c after the upgrade: %d books, want %d in order", o, len(got), len(want[o]))
		}
	}
	var v []byte
	if err := s.view(context.Background(), func(txn *badger.Txn) (err error) { v, err = getValue(txn, keySchema); return err }); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(v); got != SchemaVersion {
		t.Errorf("schema after the upgrade: %d, want %d", got, SchemaVersion)
	}
}

// TestWorstBatchFits: a batch of MaxBatchEntries records that each move in
// every index (resurrected, retitled and repositioned) fits one
// transaction, as the limits promise.
func TestWorstBatchFits(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	long := strings.Repeat("é", 190) // as large as MaxBatchBytes allows
	var first, second []crdt.Entry
	for i := range MaxBatchEntries {
		del, err := crdt.Delete(key(i), ts(20))
		if err != nil {
			t.Fatal(err)
		}
		e := pos(t, i, 10, 1)
		e.Book.Merge(&del.Book)
		first = append(first, e)
		e = pos(t, i, 30, 2)
		title, err := crdt.SetTitle(key(i), ts(30), long[:len(long)-2*(i%10)])
		if err != nil {
			t.Fatal(err)
		}
		e.Book.Merge(&title.Book)
		second = append(second, e)
	}
	apply(t, s, Batch{Entries: first})
	res := apply(t, s, Batch{Entries: second})
	if len(res.Changed) != MaxBatchEntries {
		t.Fatalf("%d changed, want %d", len(res.Changed), MaxBatchEntries)
	}
	if got := walk(t, s, PageQuery{Order: OrderTitle, Limit: MaxPage}); len(got) != MaxBatchEntries {
		t.Errorf("%d visible books, want %d", len(got), MaxBatchEntries)
	}
}

// The book counts the store keeps with every write agree with a scan of the
// books, through deletes and resurrections, across a reopen, and for a
// store written before the deleted count was kept.
func TestBookCountsMatchScan(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	r := rand.New(rand.NewPCG(5, 6))
	check := func(when string) {
		t.Helper()
		var visible, deleted uint64
		if err := s.Scan(context.Background(), crdt.KindBook, func(e crdt.Entry) error {
			if e.Book.Visible() {
				visible++
			} else {
				deleted++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		gv, gd, err := s.BookCounts(context.Background())
		if err != nil || gv != visible || gd != deleted {
			t.Fatalf("%s: BookCounts = %d visible, %d deleted, %v; a scan finds %d and %d", when, gv, gd, err, visible, deleted)
		}
	}
	for round := range 8 {
		var entries []crdt.Entry
		for range 100 {
			entries = append(entries, shelfWrite(t, r, r.IntN(120), uint64(1000+r.IntN(80)+round*10)))
		}
		apply(t, s, Batch{Entries: entries})
		check(fmt.Sprintf("round %d", round))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	check("after a reopen")
	// As a store of the version before: no deleted count.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(Options{}.withDefaults().badger(filepath.Join(dir, "db")))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(keyDeletedBooks) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = open(t, dir, Options{})
	check("after the count was rebuilt")
}
