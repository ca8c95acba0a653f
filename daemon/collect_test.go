package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/internal/testfs"
	"github.com/danyue/danyue/library"
)

// quickCollect makes the collection loop run often, so that tests wait
// for it in fractions of a second, and keeps no undo window.
func quickCollect(c *Config) { c.summaryEvery, c.KeepDeleted = 50*time.Millisecond, -1 }

// threeCollecting starts three paired daemons that collect quickly.
func threeCollecting(t *testing.T) (a, b, c *testDaemon) {
	t.Helper()
	a, b, c = startPairable(t, "laptop", quickCollect), startPairable(t, "phone", quickCollect), startPairable(t, "tablet", quickCollect)
	pairDevices(t, a, b)
	pairDevices(t, a, c)
	for _, d := range []*testDaemon{a, b, c} {
		poll.Until(t, d.cfg.Name+" to know all three members", 20*time.Second, func() bool {
			n := 0
			for _, m := range mustDo(d.client.Devices(ctxT(t)))(t) {
				if m.AddedBy != nil && !m.Removed {
					n++
				}
			}
			return n == 3
		})
	}
	return a, b, c
}

func collectKey(i int) string { return fmt.Sprintf("md5:%032x", i+1) }

// deletedBooks returns how many deleted books d's store holds.
func deletedBooks(t *testing.T, d *testDaemon) uint64 {
	t.Helper()
	_, deleted, err := d.store.BookCounts(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return deleted
}

// readBooks makes n books on d and waits until every other device has them.
func readBooks(t *testing.T, d *testDaemon, n int, others ...*testDaemon) {
	t.Helper()
	for i := range n {
		mustDo(d.client.SetPosition(ctxT(t), collectKey(i), int64(10*i+1), 0.1, fmt.Sprintf("book %d", i)))(t)
	}
	for _, o := range others {
		poll.Until(t, o.cfg.Name+" to have every book", 20*time.Second, func() bool {
			return len(mustDo(o.client.Books(ctxT(t), false))(t)) == n
		})
	}
}

func deleteBooks(t *testing.T, d *testDaemon, n int) {
	t.Helper()
	for i := range n {
		mustDo(d.client.Delete(ctxT(t), collectKey(i)))(t)
	}
}

// savedCursor returns how far the summary of device that d saved says it
// holds the store of into (0 without one).
func savedCursor(t *testing.T, d *testDaemon, device, into crdt.DeviceID) uint64 {
	t.Helper()
	list, err := d.store.Summaries(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Device != device {
			continue
		}
		if c, ok := s.CursorInto(into); ok {
			return c.Seq
		}
	}
	return 0
}

// holding returns the names /v1/devices on d says hold collection back.
func holding(t *testing.T, d *testDaemon) []string {
	var out []string
	for _, m := range mustDo(d.client.Devices(ctxT(t)))(t) {
		if m.Collection != nil && m.Collection.Holding {
			out = append(out, m.Name)
		}
	}
	return out
}

// Issue 15: books deleted on one device are collected on every device once
// all three hold the deletes, and the store's deleted count drops to 0.
func TestCollectOnceAllHoldTheDeletes(t *testing.T) {
	a, b, c := threeCollecting(t)
	const n = 20
	readBooks(t, a, n, b, c)
	deleteBooks(t, a, n)
	for _, d := range []*testDaemon{a, b, c} {
		poll.Until(t, d.cfg.Name+" to collect every deleted book", 30*time.Second, func() bool { return deletedBooks(t, d) == 0 })
		if got := mustDo(d.client.Books(ctxT(t), true))(t); len(got) != 0 {
			t.Errorf("%s still lists %d books with deleted ones", d.cfg.Name, len(got))
		}
		if h := holding(t, d); len(h) != 0 {
			t.Errorf("%s says %v hold collection back, after collecting everything", d.cfg.Name, h)
		}
	}
	// A new device pulls from 0, and gets what is left of the collected
	// books ahead of the records: it holds their deletes too, and
	// collects them in its turn.
	d := startPairable(t, "e-reader", quickCollect)
	pairDevices(t, a, d)
	poll.Until(t, "the new device to hold the deletes", 20*time.Second, func() bool {
		key := mustDo(crdt.ParseBookKey(collectKey(n - 1)))(t)
		b, err := d.lib.Book(ctxT(t), key)
		if err != nil && !errors.Is(err, library.ErrNotFound) {
			t.Fatal(err)
		}
		r, collected, err := d.store.Residue(ctxT(t), key)
		if err != nil {
			t.Fatal(err)
		}
		return !b.Deleted.IsZero() || (collected && !r.Deleted.IsZero())
	})
	poll.Until(t, "the new device to collect them", 30*time.Second, func() bool { return deletedBooks(t, d) == 0 })
	// What was collected stays deleted, and a new read of one of them
	// revives it as it would have without collection.
	mustDo(b.client.SetPosition(ctxT(t), collectKey(3), 99, 0.5, "book 3"))(t)
	waitBook(t, a.client, collectKey(3), "A to see B's new read of a collected book", func(bk api.Book) bool {
		return bk.Position != nil && bk.Position.Char == 99
	})
	if got := len(mustDo(a.client.Books(ctxT(t), false))(t)); got != 1 {
		t.Errorf("A shows %d books, want the one read again", got)
	}
}

// Issue 15: while a member is offline nothing is collected, and
// /v1/devices names it as holding collection back; once it is forgotten,
// collection proceeds on the others.
func TestOfflineMemberHoldsCollectionBack(t *testing.T) {
	a, b, c := threeCollecting(t)
	const n = 10
	readBooks(t, a, n, b, c)
	poll.Until(t, "A to have everyone's summary", 20*time.Second, func() bool { return len(holding(t, a)) == 0 })
	c.client.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	deleteBooks(t, a, n)
	poll.Until(t, "B to merge the deletes", 20*time.Second, func() bool { return deletedBooks(t, b) == n })
	poll.Until(t, "A to name the tablet as holding collection back", 20*time.Second, func() bool {
		return slices.Equal(holding(t, a), []string{"tablet"})
	})
	// B's summary has reached A (B holds the deletes): only C holds it back.
	for _, d := range []*testDaemon{a, b} {
		if got := deletedBooks(t, d); got != n {
			t.Fatalf("%s holds %d deleted books while the tablet is offline, want %d", d.cfg.Name, got, n)
		}
	}
	mustDo(a.client.Forget(ctxT(t), "tablet"))(t)
	for _, d := range []*testDaemon{a, b} {
		poll.Until(t, d.cfg.Name+" to collect once the tablet is forgotten", 30*time.Second, func() bool { return deletedBooks(t, d) == 0 })
	}
	// The forget itself is a change the phone has yet to acknowledge, so
	// the phone may hold A's newest records back for a moment.
	poll.Until(t, "A to name no one holding collection back", 20*time.Second, func() bool { return len(holding(t, a)) == 0 })
}

// Issue 15: a device restored from a copy of its data dir made before the
// deletes, brought back after every device collected them, resurrects
// nothing: its old copies meet the residues and it learns the deletes.
func TestRestoredOldCopyDoesNotResurrect(t *testing.T) {
	a, b, c := threeCollecting(t)
	const n = 5
	readBooks(t, a, n, b, c)
	backup := filepath.Join(t.TempDir(), "tablet")
	c = restart(t, c, func() {
		testfs.CopyTree(t, c.cfg.DataDir, backup)
	})
	deleteBooks(t, a, n)
	for _, d := range []*testDaemon{a, b, c} {
		poll.Until(t, d.cfg.Name+" to collect every deleted book", 30*time.Second, func() bool { return deletedBooks(t, d) == 0 })
	}
	c = restart(t, c, func() {
		if err := os.RemoveAll(c.cfg.DataDir); err != nil {
			t.Fatal(err)
		}
		testfs.CopyTree(t, backup, c.cfg.DataDir)
	})
	// The restored tablet shows the old books until it meets the others;
	// then they are deleted everywhere again, and none comes back.
	for _, d := range []*testDaemon{c, a, b} {
		poll.Until(t, d.cfg.Name+" to show no book", 30*time.Second, func() bool {
			return len(mustDo(d.client.Books(ctxT(t), false))(t)) == 0
		})
	}
}

// Issue 15: the members' summaries outlive a restart. The tablet merged
// the deletes and said so, then left; the laptop restarted while the phone
// was away too. Once the phone is back and catches up, the laptop collects
// on the tablet's last word, without waiting for the tablet to return.
func TestSummariesOutliveARestart(t *testing.T) {
	a, b, c := threeCollecting(t)
	const n = 8
	readBooks(t, a, n, b, c)
	poll.Until(t, "A to have everyone's summary", 20*time.Second, func() bool { return len(holding(t, a)) == 0 })
	// Without mDNS in tests, the phone finds the restarted laptop (same
	// ports) as a static peer.
	for _, addr := range a.lib.ListenAddrs() {
		b.cfg.Peers = append(b.cfg.Peers, addr.String()+"/p2p/"+a.lib.PeerID().String())
	}
	b = restart(t, b, func() {
		deleteBooks(t, a, n)
		deletes := a.store.LastSeq()
		poll.Until(t, "the tablet to merge the deletes", 20*time.Second, func() bool { return deletedBooks(t, c) == n })
		// The tablet "said so" only once the laptop saved its summary
		// holding the deletes: the tablet merges them, gossips a summary
		// (at most one a round of its loop), and the laptop saves it in
		// its next round, which may come after it already shows it. A
		// restart before leaves the laptop with a summary of the tablet
		// short of the deletes, and nothing to collect them on.
		poll.Until(t, "A to save the tablet's summary holding the deletes", 20*time.Second, func() bool {
			return savedCursor(t, a, c.Device(), a.Device()) >= deletes
		})
		poll.Until(t, "A to name only the phone as holding collection back", 20*time.Second, func() bool {
			return slices.Equal(holding(t, a), []string{"phone"})
		})
		c.client.Close()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		a = restart(t, a, func() {})
	})
	for _, d := range []*testDaemon{a, b} {
		poll.Until(t, d.cfg.Name+" to collect on the tablet's saved summary", 30*time.Second, func() bool { return deletedBooks(t, d) == 0 })
	}
	if h := holding(t, a); len(h) != 0 {
		t.Errorf("A says %v hold collection back", h)
	}
}
