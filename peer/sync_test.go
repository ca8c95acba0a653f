package peer

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	ma "github.com/multiformats/go-multiaddr"
)

// randomOp applies one random local operation of dev on one of keys books.
func randomOp(t *testing.T, r *rand.Rand, s *memStore, keys int) {
	key := bookKey(r.IntN(keys))
	var e crdt.Entry
	var err error
	switch r.IntN(4) {
	case 0:
		e, err = crdt.SetPosition(key, s.now(), uint64(r.IntN(100000)), r.Float64())
	case 1:
		var local *crdt.Book
		if b, ok := s.book(key); ok {
			local = &b
		}
		e, err = crdt.AddReadTime(key, local, s.clock.Device(), uint64(1+r.IntN(60000)))
	case 2:
		e, err = crdt.Delete(key, s.now())
	case 3:
		e, err = crdt.SetTitle(key, s.now(), "title "+string(rune('a'+r.IntN(26))))
	}
	if err != nil {
		t.Errorf("op: %v", err)
		return
	}
	if err := s.write(e); err != nil {
		t.Errorf("write: %v", err)
	}
}

// Random concurrent writes on several connected hosts converge: every store
// ends with the same records, byte for byte (crdt/doc.go, Merge).
func TestConvergence(t *testing.T) {
	lib := newLib(t)
	const hosts, opsPerHost, keys = 4, 300, 40
	devs := make([]*device, hosts)
	var stores []*memStore
	for i := range devs {
		devs[i] = newDevice(t, string(rune('A'+i)))
		stores = append(stores, devs[i].store)
	}
	// A ring plus a chord: some pairs are connected, some only relayed.
	devs[0].start(t, lib, nil)
	for i := 1; i < hosts; i++ {
		devs[i].start(t, lib, devs[i-1].node.Addrs())
	}
	devs[0].node.Connect(t.Context(), devs[hosts-1].node.Addrs())

	var wg sync.WaitGroup
	for i, d := range devs {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 42))
			for range opsPerHost {
				randomOp(t, r, d.store, keys)
				if r.IntN(10) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	poll.Until(t, "convergence", 20*time.Second, func() bool { return converged(stores...) })
	if n := stores[0].len(); n == 0 || n > keys {
		t.Fatalf("%d records, want 1..%d", n, keys)
	}
	for _, d := range devs {
		st := d.node.Stats()
		t.Logf("%s: sent %d records (%d bytes), received %d records (%d bytes), %d echoes skipped",
			d.name, st.RecordsSent, st.BytesSent, st.RecordsReceived, st.BytesReceived, st.EchoesSkipped)
	}
}

// A-B-C in a line: A's writes reach C and C's reach A through B, although A
// and C never connect (a merge that changes state is a local change, and is
// streamed on).
func TestLineRelays(t *testing.T) {
	lib := newLib(t)
	a, b, c := newDevice(t, "A"), newDevice(t, "B"), newDevice(t, "C")
	b.start(t, lib, nil)
	a.start(t, lib, b.node.Addrs())
	c.start(t, lib, b.node.Addrs())

	if err := a.store.setPosition(bookKey(1), 100); err != nil {
		t.Fatal(err)
	}
	if err := c.store.setPosition(bookKey(2), 200); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "A, B and C to converge", 10*time.Second, func() bool {
		return converged(a.store, b.store, c.store) && a.store.len() == 2
	})
	// And a later change too (push, not only the initial pull).
	if err := a.store.setPosition(bookKey(2), 300); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "A's push to reach C", 10*time.Second, func() bool {
		bk, _ := c.store.book(bookKey(2))
		return bk.Position.Char == 300
	})
	for _, p := range a.node.Peers() {
		if p.ID == c.id {
			t.Fatalf("A knows C: %+v", p)
		}
	}
	for _, p := range c.node.Peers() {
		if p.ID == a.id {
			t.Fatalf("C knows A: %+v", p)
		}
	}
}

// A device restarting with its store resumes from its cursor: only what
// changed while it was away crosses the wire.
func TestRestartResumesFromCursor(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	if err := a.store.fill(1000); err != nil {
		t.Fatal(err)
	}
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs())
	poll.Until(t, "initial sync", 20*time.Second, func() bool {
		return converged(a.store, b.store) && mergedAll(a.node, b) && mergedAll(b.node, a)
	})
	if got := b.node.Stats().RecordsReceived; got != 1000 {
		t.Errorf("initial sync: B received %d records, want 1000", got)
	}
	if got := a.node.Stats().RecordsReceived; got != 0 {
		t.Errorf("initial sync: A received %d records back, want 0 (echoes)", got)
	}

	b.stop(t)
	for i := range 3 {
		if err := a.store.setPosition(bookKey(i), 5000); err != nil {
			t.Fatal(err)
		}
	}
	aBefore := a.node.Stats()
	b.start(t, lib, a.node.Addrs())
	poll.Until(t, "B to catch up", 10*time.Second, func() bool {
		return converged(a.store, b.store) && mergedAll(a.node, b) && mergedAll(b.node, a)
	})
	st := b.node.Stats()
	if st.RecordsReceived != 3 {
		t.Errorf("after restart B received %d records, want 3", st.RecordsReceived)
	}
	aAfter := a.node.Stats()
	if got := aAfter.RecordsReceived - aBefore.RecordsReceived; got != 0 {
		t.Errorf("after restart A received %d records, want 0", got)
	}
	wire := st.BytesSent + st.BytesReceived
	t.Logf("resume: B received %d records in %d frames, %d bytes both ways", st.RecordsReceived, st.FramesReceived, wire)
	if wire > 2048 {
		t.Errorf("resume cost %d bytes on the wire, want <= 2048", wire)
	}
}

// A device whose store was wiped (same identity, new epoch) is re-sent
// everything, and what it sends from its new store is not mistaken for the
// old sequence.
func TestWipedPeerIsResent(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	if err := a.store.fill(200); err != nil {
		t.Fatal(err)
	}
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs())
	poll.Until(t, "initial sync", 10*time.Second, func() bool { return converged(a.store, b.store) })

	b.stop(t)
	b.store = newMemStore(DeviceIDOf(b.id))
	if err := b.store.setPosition(bookKey(10_000), 1); err != nil {
		t.Fatal(err)
	}
	b.start(t, lib, a.node.Addrs())
	poll.Until(t, "the wiped device to get everything back", 10*time.Second, func() bool {
		return converged(a.store, b.store) && a.store.len() == 201
	})
	if got := b.node.Stats().RecordsReceived; got != 200 {
		t.Errorf("wiped B received %d records, want 200", got)
	}
}

// A host without the library secret cannot complete a handshake: neither
// side learns anything, and the stranger's redials back off instead of
// looping.
func TestStrangerRefused(t *testing.T) {
	lib, other := newLib(t), newLib(t)
	a, s := newDevice(t, "A"), newDevice(t, "stranger")
	if err := a.store.fill(10); err != nil {
		t.Fatal(err)
	}
	if err := s.store.fill(5); err != nil {
		t.Fatal(err)
	}
	a.start(t, lib, nil)
	s.start(t, other, a.node.Addrs())
	poll.Until(t, "the stranger's first dial to fail", 10*time.Second, func() bool {
		for _, p := range s.node.Peers() {
			if p.ID == a.id {
				return p.LastError != ""
			}
		}
		return false
	})
	// Its redials back off: the gap before retry k is at least what the
	// backoff schedule allows less its jitter, however slow the machine
	// (a busy machine only stretches the gaps). Looping redials fail this.
	var at []time.Time
	poll.Until(t, "the stranger's third dial", 60*time.Second, func() bool {
		if n := int(s.node.Stats().DialAttempts); n > len(at) {
			for len(at) < n {
				at = append(at, time.Now())
			}
		}
		return len(at) >= 3
	})
	for k := 1; k < 3; k++ {
		gap, least := at[k].Sub(at[k-1]), dialBackoff.delay(k-1)*4/5
		t.Logf("stranger: retry %d after %v", k, gap.Round(time.Millisecond))
		// The poll sees a dial up to one poll late; allow that much.
		if gap < least-50*time.Millisecond {
			t.Errorf("retry %d came %v after the previous dial, want at least %v (backoff)", k, gap, least)
		}
	}
	t.Logf("stranger: last error: %s", s.node.Peers()[0].LastError)
	for _, n := range []*Node{a.node, s.node} {
		if st := n.Stats(); st.BytesReceived != 0 || st.BytesSent != 0 {
			t.Errorf("sync traffic with a stranger: %+v", st)
		}
		for _, p := range n.Peers() {
			if p.Connected {
				t.Errorf("connected to %s", p.ID)
			}
		}
	}
	if a.store.len() != 10 || s.store.len() != 5 {
		t.Errorf("stores changed: A has %d records, stranger %d", a.store.len(), s.store.len())
	}
}

// Connect remembers a peer and redials it after it goes away and comes back.
func TestRedialAfterRestart(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	a.start(t, lib, nil)
	addr := a.node.Addrs()
	b.start(t, lib, nil)
	if err := b.node.Connect(t.Context(), addr); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to connect to A", 5*time.Second, func() bool { return connectedTo(b.node, a.id) })
	a.stop(t)
	poll.Until(t, "B to notice", 5*time.Second, func() bool { return !connectedTo(b.node, a.id) })
	// A comes back on the same port.
	a.start(t, lib, nil, func(c *Config) {
		c.Listen = []ma.Multiaddr{addr[0].Decapsulate(ma.StringCast("/p2p/" + a.id.String()))}
	})
	if err := a.store.setPosition(bookKey(1), 7); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to redial A and sync", 10*time.Second, func() bool { return converged(a.store, b.store) && b.store.len() == 1 })
}

// A device whose store went back under the same epoch (its whole data
// directory restored from an old copy) and then writes more changes than
// it lost before it meets a device that pulled the lost state, in the same
// run or in an earlier one: the puller's cursor lies inside its new
// changes, and resuming there would skip those below it for good. The
// cursor is past anything the device has sent since the copy (its
// delivered mark) and in this run, so it sends everything, and numbers
// later changes after the cursor.
func TestRestoredSenderWritesPastCursor(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			lib := newLib(t)
			a, b := newDevice(t, "A"), newDevice(t, "B")
			if err := a.store.fill(200); err != nil {
				t.Fatal(err)
			}
			a.start(t, lib, nil)
			b.start(t, lib, a.node.Addrs())
			poll.Until(t, "initial sync", 10*time.Second, func() bool { return mergedAll(b.node, a) })
			poll.Until(t, "A's delivered mark to cover the 200 records sent to B", 10*time.Second, func() bool {
				return a.store.Delivered(DeviceIDOf(b.id)) >= 200
			})
			b.stop(t)
			a.stop(t)

			a.restoreBlank()
			a.start(t, lib, nil)
			writeBooks(t, a.store, 1000, 250)
			if restart {
				a.stop(t)
				a.start(t, lib, nil)
			}
			b.start(t, lib, a.node.Addrs())
			poll.Until(t, "convergence", 10*time.Second, func() bool {
				return converged(a.store, b.store) && b.store.len() == 450
			})
			// A change made now comes after B's old cursor.
			if err := a.store.setPosition(bookKey(2000), 1); err != nil {
				t.Fatal(err)
			}
			if last, _ := a.store.Watch(); last <= 250 {
				t.Errorf("A's change took sequence number %d, inside what B saw before", last)
			}
			poll.Until(t, "the change on B", 10*time.Second, func() bool { return converged(a.store, b.store) })
		})
	}
}

// The delivered mark is kept per puller: a restored device that first
// sends its new changes to another device, restarts, and only then meets
// the one that pulled the lost state, still finds that one's cursor past
// what it can have sent it. With one mark for the store, the first
// meeting raised it past that cursor, and the puller skipped the new
// changes below it for good.
func TestRestoredSenderMeetsAnotherFirst(t *testing.T) {
	lib := newLib(t)
	a, b, c := newDevice(t, "A"), newDevice(t, "B"), newDevice(t, "C")
	if err := a.store.fill(200); err != nil {
		t.Fatal(err)
	}
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs())
	poll.Until(t, "B to pull A", 10*time.Second, func() bool { return mergedAll(b.node, a) })
	b.stop(t)
	a.stop(t)

	a.restoreBlank()
	writeBooks(t, a.store, 1000, 250)
	a.start(t, lib, nil)
	c.start(t, lib, a.node.Addrs())
	poll.Until(t, "C to pull the restored A", 10*time.Second, func() bool {
		return converged(a.store, c.store) && c.store.len() == 250
	})
	// C, which holds A's new changes, must not hand them to B: B has to
	// get them from A.
	c.stop(t)
	a.stop(t)
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs())
	poll.Until(t, "B to converge with A", 10*time.Second, func() bool {
		return converged(a.store, b.store) && b.store.len() == 450
	})
}

// A sender whose store went back in time under the same epoch (restored
// from an old copy) cannot resume from the puller's cursor; it says so in
// its hello and sends everything, and the devices converge.
func TestSenderBehindCursorResendsAll(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	if err := a.store.fill(200); err != nil {
		t.Fatal(err)
	}
	a.start(t, lib, nil)
	addr := a.node.Addrs()
	b.start(t, lib, addr)
	poll.Until(t, "initial sync", 10*time.Second, func() bool { return mergedAll(b.node, a) })

	a.stop(t)
	a.restoreBlank()
	writeBooks(t, a.store, 1000, 50)
	before := b.node.Stats().RecordsReceived
	// Back on the same port, where B's keeper redials it.
	a.start(t, lib, nil, func(c *Config) {
		c.Listen = []ma.Multiaddr{addr[0].Decapsulate(ma.StringCast("/p2p/" + a.id.String()))}
	})
	poll.Until(t, "convergence", 10*time.Second, func() bool {
		return converged(a.store, b.store) && b.store.len() == 250
	})
	// Either A saw B's cursor past its end and sent its 50 records, or A had
	// already merged B's 200 back when B's hello arrived, B noticed the
	// regression from A's hello, and pulled A's whole store again. Never
	// more than that.
	if got := b.node.Stats().RecordsReceived - before; got < 50 || got > 250 {
		t.Errorf("B received %d records from the restored A, want its 50, or its whole store of 250", got)
	}
}

// restoreBlank gives d an empty store in its store's epoch: what putting
// back a copy of its data directory made before it wrote anything does.
func (d *device) restoreBlank() {
	epoch := d.store.epoch
	d.store = newMemStore(DeviceIDOf(d.id))
	d.store.epoch = epoch
}

// writeBooks sets a position in n books, numbered from first, in s.
func writeBooks(t *testing.T, s *memStore, first, n int) {
	t.Helper()
	for i := range n {
		if err := s.setPosition(bookKey(first+i), 1); err != nil {
			t.Fatal(err)
		}
	}
}

// A device restored from an old copy gets back what it wrote after the
// copy from a device that pulled it, even one that never noticed the
// restore: behind a partition, its connection to the stopped run stays
// open until it times out, and with it its memory of what that run sent.
// The pipe links here never close a libp2p connection, so B keeps that
// memory, as it does then.
func TestRestoredPullerGetsWhatItLost(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	a.start(t, lib, nil, quiet)
	b.start(t, lib, nil, quiet)
	writeBooks(t, a.store, 0, 100)
	pull := openLink(b, a)
	poll.Until(t, "B to pull A's books", 10*time.Second, func() bool { return b.store.len() == 100 })
	pull.cut()

	a.stop(t)
	a.restoreBlank()
	writeBooks(t, a.store, 1000, 150) // past the cursor B holds, so B's pull resends everything
	a.start(t, lib, nil, quiet)
	links := []*pipeLink{openLink(b, a), openLink(a, b)}
	defer func() {
		for _, l := range links {
			l.cut()
		}
	}()
	poll.Until(t, "A to get back the books it lost", 10*time.Second, func() bool {
		return a.store.len() == 250 && converged(a.store, b.store)
	})
}
