package peer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// countingStore is a memStore that counts what it has to send
// (RecordCounter), by the obvious walk.
type countingStore struct{ *memStore }

func (s countingStore) CountSince(ctx context.Context, after uint64) (uint64, error) {
	var n uint64
	err := s.Since(ctx, after, 1<<30, func(uint64, []byte) error { n++; return nil })
	return n, err
}

// gatedStore is a memStore whose merges after the first wait until the
// test opens the gate: a sync stopped in its middle.
type gatedStore struct {
	*memStore
	first sync.Once
	gate  chan struct{}
}

func (s *gatedStore) ApplyRemote(ctx context.Context, from crdt.DeviceID, epoch, seq uint64, entries []crdt.Entry) error {
	passed := false
	s.first.Do(func() { passed = true })
	if !passed {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.memStore.ApplyRemote(ctx, from, epoch, seq, entries)
}

// Issue 49: in the middle of a first sync of a few thousand records, the
// puller knows how many records are still to come as the sender counted
// them (not its sequence numbers, which changes made twice inflate), and
// once it is over, that none are.
func TestFirstSyncSaysWhatIsToGo(t *testing.T) {
	lib := newLib(t)
	const books, again = 3000, 1000
	a, b := newDevice(t, "A"), newDevice(t, "B")
	if err := a.store.fill(books); err != nil {
		t.Fatal(err)
	}
	for i := books - again; i < books; i++ { // their first changes, late in the log, are superseded
		if err := a.store.setPosition(bookKey(i), 7); err != nil {
			t.Fatal(err)
		}
	}
	gated := &gatedStore{memStore: b.store, gate: make(chan struct{})}
	a.start(t, lib, nil, func(c *Config) { c.Store = countingStore{a.store} })
	b.start(t, lib, a.node.Addrs(), func(c *Config) { c.Store = gated })

	var mid SyncProgress
	poll.Until(t, "B to have merged A's first batch", 20*time.Second, func() bool {
		p, ok := peerInfo(b.node, a)
		mid = p.Pulling
		return ok && mid.In > 0
	})
	if mid.ToGo == 0 || mid.ToGo+mid.In != books || mid.Started.IsZero() {
		t.Errorf("mid-sync: %+v; want %d records to go after %d in", mid, books-int(mid.In), mid.In)
	}
	close(gated.gate)
	poll.Until(t, "the sync to end", 20*time.Second, func() bool {
		p, ok := peerInfo(b.node, a)
		return ok && p.CaughtUp && converged(a.store, b.store)
	})
	if p, _ := peerInfo(b.node, a); p.Pulling != (SyncProgress{}) {
		t.Errorf("after the sync: %+v, want nothing to go", p.Pulling)
	}
}

// Without the sender's count (an older build, or a store that cannot
// count), the puller shows the sequence numbers to go, which bound the
// records from above.
func TestSyncToGoWithoutACount(t *testing.T) {
	lib := newLib(t)
	const books, again = 2000, 500
	a, b := newDevice(t, "A"), newDevice(t, "B")
	if err := a.store.fill(books); err != nil {
		t.Fatal(err)
	}
	for i := books - again; i < books; i++ { // their first changes, late in the log, are superseded
		if err := a.store.setPosition(bookKey(i), 7); err != nil {
			t.Fatal(err)
		}
	}
	gated := &gatedStore{memStore: b.store, gate: make(chan struct{})}
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs(), func(c *Config) { c.Store = gated })
	var mid PeerInfo
	poll.Until(t, "B to have merged A's first batch", 20*time.Second, func() bool {
		var ok bool
		mid, ok = peerInfo(b.node, a)
		return ok && mid.Pulling.In > 0
	})
	if want := mid.RemoteLast - mid.Merged; mid.Pulling.ToGo != want || want+mid.Pulling.In != books+again {
		t.Errorf("mid-sync without a count: %+v, merged %d of %d; want the %d numbers to go", mid.Pulling, mid.Merged, mid.RemoteLast, want)
	}
	close(gated.gate)
	poll.Until(t, "the sync to end", 20*time.Second, func() bool {
		p, ok := peerInfo(b.node, a)
		return ok && p.CaughtUp && p.Pulling.ToGo == 0 && converged(a.store, b.store)
	})
}

// peerInfo returns what n says of device d as a peer.
func peerInfo(n *Node, d *device) (PeerInfo, bool) {
	for _, p := range n.Peers() {
		if p.ID == d.id {
			return p, true
		}
	}
	return PeerInfo{}, false
}
