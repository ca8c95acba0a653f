package library

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
)

// shiftClock is a wall clock that runs with time.Now, shifted by what a
// test adds: the undo window passes without waiting for it, and the hybrid
// clocks still move forward.
type shiftClock struct{ by atomic.Int64 }

func (c *shiftClock) now() time.Time        { return time.Now().Add(time.Duration(c.by.Load())) }
func (c *shiftClock) add(d time.Duration)   { c.by.Add(int64(d)) }
func (c *shiftClock) config() func(*Config) { return func(cfg *Config) { cfg.Now = c.now } }

// Issue 49: with every member online, a deleted book stays readable and
// restorable through the undo window (10 minutes on, it is still there),
// and is collected only once the window has passed and every member holds
// the delete. (The loop's own timer for the window's end runs on real
// time, which this clock does not move: the test wakes the loop.)
func TestDeletedBookOutlivesStabilityUntilTheWindowPasses(t *testing.T) {
	const window = time.Hour
	var clock shiftClock
	cfg := func(c *Config) {
		quick(c)
		clock.config()(c)
		c.KeepDeleted = window
	}
	a, b := openLibrary(t, "laptop", cfg), openLibrary(t, "phone", cfg)
	joinByCode(t, b, a)
	ctx := ctxT(t)
	key, kept := collectKey(0), collectKey(1)
	mustDo(a.SetPosition(ctx, key, 42, 0.1, "to restore"))(t)
	mustDo(a.SetPosition(ctx, kept, 7, 0.2, "to collect"))(t)
	mustDo(a.DeleteBook(ctx, key))(t)
	mustDo(a.DeleteBook(ctx, kept))(t)
	poll.Until(t, "the laptop to know the phone holds the deletes", 20*time.Second, func() bool {
		c := a.Collection(b.Self())
		return c.Summary && !c.Holding && c.Behind == 0
	})
	before := a.CollectionStats().Rounds
	clock.add(10 * time.Minute)
	poll.Until(t, "rounds after every member holds the deletes", 20*time.Second, func() bool {
		a.coll.wake()
		return a.CollectionStats().Rounds >= before+3
	})
	for _, l := range []*Library{a, b} {
		got, err := l.Book(ctx, key)
		if err != nil || got.Visible() || got.Position.Char != 42 {
			t.Fatalf("%s, 10 minutes after the delete: %+v, %v; want the deleted book at 42", l.Name(), got, err)
		}
	}
	restored := mustDo(b.Restore(ctx, key))(t)
	if !restored.Visible() || restored.Position.Char != 42 || restored.Title.Value != "to restore" {
		t.Fatalf("restored on the phone: %+v", restored)
	}
	poll.Until(t, "the laptop to have the book back", 20*time.Second, func() bool {
		got, err := a.Book(ctx, key)
		return err == nil && got.Visible()
	})

	if st := a.CollectionStats(); st.Books != 0 {
		t.Fatalf("collected %d books inside the window", st.Books)
	}
	clock.add(window)
	for _, l := range []*Library{a, b} {
		poll.Until(t, l.Name()+" to collect the deleted book once the window passed", 20*time.Second, func() bool {
			l.coll.wake()
			_, deleted := mustDo2(l.store.BookCounts(ctx))(t)
			return deleted == 0
		})
		if _, err := l.Book(ctx, kept); err == nil {
			t.Errorf("%s still holds the collected book", l.Name())
		}
		if got, err := l.Book(ctx, key); err != nil || !got.Visible() {
			t.Errorf("%s: the restored book %+v, %v", l.Name(), got, err)
		}
	}
}

// The loop wakes by itself when the undo window of a delete every member
// holds has passed: with nothing written after the delete, and no member
// to gossip with, only its timer can collect the book.
func TestCollectionWakesWhenTheWindowPasses(t *testing.T) {
	l := openLibrary(t, "laptop", func(c *Config) { c.SummaryEvery, c.KeepDeleted = 10*time.Millisecond, 300*time.Millisecond })
	ctx := ctxT(t)
	mustDo(l.SetPosition(ctx, collectKey(0), 1, 0.1, "gone"))(t)
	mustDo(l.DeleteBook(ctx, collectKey(0)))(t)
	poll.Until(t, "the deleted book to be collected once its window passed", 20*time.Second, func() bool {
		_, deleted := mustDo2(l.store.BookCounts(ctx))(t)
		return deleted == 0 && l.CollectionStats().Books == 1
	})
}
