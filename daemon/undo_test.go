package daemon

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/poll"
)

// shiftClock is a wall clock shared by a test's daemons: time.Now shifted
// by what the test adds, so that an undo window passes without waiting for
// it and the hybrid clocks still move forward.
type shiftClock struct{ by atomic.Int64 }

func (c *shiftClock) now() time.Time      { return time.Now().Add(time.Duration(c.by.Load())) }
func (c *shiftClock) add(d time.Duration) { c.by.Add(int64(d)) }

// withClock makes a daemon read c, and keep deleted books for keep.
func withClock(c *shiftClock, keep time.Duration) func(*Config) {
	return func(cfg *Config) { cfg.clock, cfg.KeepDeleted = c.now, keep }
}

// holdsAllOf reports whether d knows that its member o holds every change
// of d's store: with no undo window, its deleted books would go now.
func holdsAllOf(t *testing.T, d, o *testDaemon) bool {
	m, ok := member(t, d, o.lib.Self().String())
	return ok && m.Collection != nil && m.Collection.Summary && !m.Collection.Holding && m.Collection.Behind == 0
}

// rounds waits until d's collection loop has run n more rounds, writing
// to wake it (the loop sleeps without writes, and the test's clock moves
// no timer).
func rounds(t *testing.T, d *testDaemon, n int) {
	t.Helper()
	from := d.lib.CollectionStats().Rounds
	poll.Until(t, d.cfg.Name+"'s collection rounds", 20*time.Second, func() bool {
		mustDo(d.client.SetPosition(ctxT(t), collectKey(99), int64(d.lib.CollectionStats().Rounds), 0.1, "a book to wake the loop"))(t)
		return d.lib.CollectionStats().Rounds >= from+n
	})
}

// Issue 49: with every member online, a deleted book is still listed,
// readable with its deleted state and restorable 10 minutes after its
// delete, although every member holds the delete; it goes only once the
// undo window has passed as well.
func TestDeletedBookRestorableInsideTheWindow(t *testing.T) {
	const window = 24 * time.Hour
	var clock shiftClock
	a := startPairable(t, "laptop", func(c *Config) { quickCollect(c); withClock(&clock, window)(c) })
	b := startPairable(t, "phone", func(c *Config) { quickCollect(c); withClock(&clock, window)(c) })
	pairDevices(t, a, b)
	ctx := ctxT(t)
	key := collectKey(0)
	mustDo(a.client.SetPosition(ctx, key, 4200, 0.42, "红楼梦"))(t)
	mustDo(a.client.AddReadTime(ctx, key, 60_000, ""))(t)
	waitBook(t, b.client, key, "the phone to have the book", func(bk api.Book) bool { return bk.ReadTime.TotalMs == 60_000 })
	deletedAt := clock.now()
	mustDo(b.client.Delete(ctx, key))(t)
	for _, p := range [][2]*testDaemon{{a, b}, {b, a}} {
		poll.Until(t, p[0].cfg.Name+" to know "+p[1].cfg.Name+" holds the delete", 20*time.Second, func() bool {
			bk, err := p[0].client.Book(ctx, key)
			return err == nil && bk.Deleted && holdsAllOf(t, p[0], p[1])
		})
	}
	clock.add(10 * time.Minute)
	rounds(t, a, 3)
	rounds(t, b, 3)

	bk := mustDo(a.client.Book(ctx, key))(t)
	if !bk.Deleted || bk.KeptUntil == nil || bk.Position == nil || bk.Position.Char != 4200 {
		t.Fatalf("10 minutes after the delete, GET answers %+v; want it deleted, at 4200, with keptUntil", bk)
	}
	until := mustDo(time.Parse(time.RFC3339, *bk.KeptUntil))(t)
	if d := until.Sub(deletedAt); d < window-time.Second || d > window+time.Minute {
		t.Errorf("keptUntil %v is %v after the delete, want the window %v", until, d, window)
	}
	listed := false
	for _, l := range mustDo(a.client.Books(ctx, true))(t) {
		listed = listed || l.Key == key && l.Deleted
	}
	if !listed {
		t.Fatal("the deleted book is not listed with ?deleted=1")
	}
	back := mustDo(a.client.Restore(ctx, key))(t)
	if back.Deleted || back.Position.Char != 4200 || back.Title != "红楼梦" || back.ReadTime.TotalMs != 60_000 {
		t.Fatalf("restored: %+v", back)
	}
	waitBook(t, b.client, key, "the phone to have it back", func(bk api.Book) bool { return !bk.Deleted && bk.Position.Char == 4200 })
	if again := mustDo(a.client.Restore(ctx, key))(t); again.Deleted || again.Position.Stamp != back.Position.Stamp {
		t.Errorf("a second restore wrote again: %+v", again)
	}

	// Deleted again; once the window has passed too, it is collected on
	// both, and no longer restorable.
	mustDo(b.client.Delete(ctx, key))(t)
	poll.Until(t, "the laptop to know the phone holds the second delete", 20*time.Second, func() bool {
		bk, err := a.client.Book(ctx, key)
		return err == nil && bk.Deleted && holdsAllOf(t, a, b) && holdsAllOf(t, b, a)
	})
	rounds(t, a, 3)
	if n := deletedBooks(t, a); n != 1 {
		t.Fatalf("%d deleted books inside the window, want the one", n)
	}
	clock.add(window)
	for _, d := range []*testDaemon{a, b} {
		poll.Until(t, d.cfg.Name+" to collect the book once its window passed", 20*time.Second, func() bool {
			rounds(t, d, 1)
			return deletedBooks(t, d) == 0
		})
		_, err := d.client.Book(ctx, key)
		wantAPIError(t, err, api.CodeNotFound)
		_, err = d.client.Restore(ctx, key)
		wantAPIError(t, err, api.CodeNotFound)
	}
}
