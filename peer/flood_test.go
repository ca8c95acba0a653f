package peer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// slowStore is a memStore whose ApplyRemote waits for open to be closed and
// checks, before each batch, what the sender has sent meanwhile.
type slowStore struct {
	*memStore
	open    chan struct{}
	mu      sync.Mutex
	applied uint64 // records applied so far
	check   func(applied uint64)
}

func (s *slowStore) ApplyRemote(ctx context.Context, from crdt.DeviceID, epoch, seq uint64, entries []crdt.Entry) error {
	select {
	case <-s.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	applied := s.applied
	s.applied += uint64(len(entries))
	s.mu.Unlock()
	s.check(applied)
	return s.memStore.ApplyRemote(ctx, from, epoch, seq, entries)
}

// A sender never runs more than maxUnacked batches ahead of what its puller
// has applied, however many records it has: a member that writes (or
// relays) a flood makes no queue grow between two devices, and a puller that
// stops applying stops the sender reading its store (doc.go, "back-pressure").
func TestSenderWaitsForSlowPuller(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	const batches = 24
	if err := a.store.fill(batches * maxBatchRecords); err != nil {
		t.Fatal(err)
	}
	const bound = maxUnacked * maxBatchRecords
	slow := &slowStore{memStore: b.store, open: make(chan struct{})}
	slow.check = func(applied uint64) {
		if sent := a.node.Stats().RecordsSent; sent > applied+bound {
			t.Errorf("A has sent %d records while B applied %d: more than %d batches in flight", sent, applied, maxUnacked)
		}
	}
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs(), func(c *Config) { c.Store = slow })

	// B holds its first batch: A fills its window and waits.
	poll.Until(t, "A to wait for B's acks", 10*time.Second, func() bool { return a.node.Stats().SendWaits > 0 })
	if sent := a.node.Stats().RecordsSent; sent > bound {
		t.Errorf("A sent %d records before B applied any, want at most %d", sent, bound)
	}
	close(slow.open)
	poll.Until(t, "B to have all of A", 20*time.Second, func() bool { return mergedAll(b.node, a) })
	if !converged(a.store, b.store) {
		t.Fatalf("not converged: %s", diffStores(a.store, b.store))
	}
}
