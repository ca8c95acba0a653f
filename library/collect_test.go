package library

import (
	"fmt"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/store"
)

func collectKey(i int) crdt.BookKey { return crdt.MustParseBookKey(fmt.Sprintf("md5:%032x", i+1)) }

// openStill opens a library whose collection loop has run its round at
// the start and runs the next an hour later, so that the deleted books a
// test writes stay until it collects them itself.
func openStill(t *testing.T) *Library {
	t.Helper()
	l := openLibrary(t, "laptop", func(c *Config) { c.SummaryEvery, c.KeepDeleted = time.Hour, -1 })
	poll.Until(t, "the collection loop's round at the start", 10*time.Second, func() bool {
		return l.CollectionStats().Rounds > 0
	})
	return l
}

// The shelf's counts stay the store's when a collection runs between a
// batch's commit and the library taking note of it (a pull from a peer
// commits, and then updates the counts): a device joining a library of a
// million books once showed more books than it held, one batch counted
// twice, after it collected a deleted book while it pulled.
func TestCollectionKeepsCountsWithABatchInFlight(t *testing.T) {
	d := openStill(t)
	ctx := ctxT(t)
	mustDo(d.SetPosition(ctx, collectKey(0), 1, 0.1, "gone"))(t)
	mustDo(d.DeleteBook(ctx, collectKey(0)))(t)

	var batch []crdt.Entry
	for i := 1; i <= 20; i++ {
		at := crdt.Timestamp{Wall: 1_700_000_000_000 + uint64(i), Device: d.Self()}
		batch = append(batch, mustDo(crdt.SetPosition(collectKey(i), at, 1, 0.1))(t))
	}
	res := mustDo(d.store.Apply(ctx, store.Batch{Entries: batch}))(t) // committed, not yet noted
	d.purge(ctx, nil)
	if _, deleted, _ := d.store.BookCounts(ctx); deleted != 0 {
		t.Fatal("the deleted book was not collected: nothing to test")
	}
	d.changed(res.Changed, true)

	visible, deleted := mustDo2(d.store.BookCounts(ctx))(t)
	if v, del := d.Counts(); uint64(v) != visible || uint64(del) != deleted {
		t.Errorf("the library counts %d books and %d deleted, the store %d and %d", v, del, visible, deleted)
	}
	if st := d.CollectionStats(); st.Books != 1 {
		t.Errorf("collection stats %+v, want the one book collected", st)
	}
}

// mustDo2 returns the values of a call that must not fail.
func mustDo2[T, U any](v T, w U, err error) func(testing.TB) (T, U) {
	return func(t testing.TB) (T, U) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v, w
	}
}

// quick makes the collection loop run often, so that tests wait for it in
// fractions of a second, and keeps no undo window.
func quick(c *Config) { c.SummaryEvery, c.KeepDeleted = 50*time.Millisecond, -1 }

// Issue 15: books deleted on one member are collected on both once both
// hold the deletes, and each says the other holds nothing back.
func TestCollectOnceBothHoldTheDeletes(t *testing.T) {
	a, b := openLibrary(t, "laptop", quick), openLibrary(t, "phone", quick)
	joinByCode(t, b, a)
	ctx := ctxT(t)
	const n = 10
	for i := range n {
		mustDo(a.SetPosition(ctx, collectKey(i), uint64(10*i+1), 0.1, fmt.Sprintf("book %d", i)))(t)
	}
	poll.Until(t, "the phone to have every book", 20*time.Second, func() bool {
		visible, _ := b.Counts()
		return visible == n
	})
	for i := range n {
		mustDo(a.DeleteBook(ctx, collectKey(i)))(t)
	}
	for _, l := range []*Library{a, b} {
		poll.Until(t, l.Name()+" to collect every deleted book", 30*time.Second, func() bool {
			_, deleted := mustDo2(l.store.BookCounts(ctx))(t)
			_, counted := l.Counts()
			return deleted == 0 && counted == 0
		})
	}
	poll.Until(t, "the laptop to know the phone holds everything", 20*time.Second, func() bool {
		c := a.Collection(b.Self())
		return c.Summary && !c.Holding
	})
	if st := a.CollectionStats(); st.Books != n || st.Rounds == 0 {
		t.Errorf("the laptop's collection stats %+v, want %d books", st, n)
	}
}

// With a member away, the deletes made since it left cannot be collected:
// the rounds that the writes wake do not scan every deleted book again
// while what every member holds (Stability.UpTo) stays where it was.
func TestCollectionDoesNotRescanWhileHeldBack(t *testing.T) {
	a, b := openLibrary(t, "laptop", quick), openLibrary(t, "phone", quick)
	joinByCode(t, b, a)
	ctx := ctxT(t)
	mustDo(a.SetPosition(ctx, collectKey(0), 1, 0.1, "before"))(t)
	poll.Until(t, "the laptop to know the phone holds its first book", 20*time.Second, func() bool {
		c := a.Collection(b.Self())
		return c.Summary && !c.Holding
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := 1; i <= n; i++ {
		mustDo(a.SetPosition(ctx, collectKey(i), uint64(10*i+1), 0.1, fmt.Sprintf("book %d", i)))(t)
		mustDo(a.DeleteBook(ctx, collectKey(i)))(t)
	}
	before := a.CollectionStats()
	poll.Until(t, "rounds after the deletes", 20*time.Second, func() bool {
		mustDo(a.SetPosition(ctx, collectKey(0), uint64(a.CollectionStats().Rounds+2), 0.1, "before"))(t)
		return a.CollectionStats().Rounds >= before.Rounds+5
	})
	st := a.CollectionStats()
	if st.Books != 0 {
		t.Fatalf("collected %d books with the phone away", st.Books)
	}
	if scans := st.Scans - before.Scans; scans > 1 {
		t.Errorf("%d scans of the deleted books in %d rounds while the phone held collection back; want at most one", scans, st.Rounds-before.Rounds)
	}
}
