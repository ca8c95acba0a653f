package peer

import (
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// removedSet is what the daemon gives Config.Removed: a set it changes as
// removals are merged.
type removedSet struct {
	mu  sync.Mutex
	ids map[crdt.DeviceID]bool
}

func (r *removedSet) add(d crdt.DeviceID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = map[crdt.DeviceID]bool{}
	}
	r.ids[d] = true
}

func (r *removedSet) has(d crdt.DeviceID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[d]
}

// Issue 15: a device removed from the library is refused at once: its open
// connections close (Disconnect), its dials to us are refused as soon as
// its identity is known, and we do not dial it; nothing more is synced with
// it. Another member keeps syncing.
func TestRemovedDeviceRefused(t *testing.T) {
	lib := newLib(t)
	a, b, c := newDevice(t, "A"), newDevice(t, "B"), newDevice(t, "C")
	var removed removedSet
	withRemoved := func(cfg *Config) { cfg.Removed = removed.has }
	a.start(t, lib, nil, withRemoved)
	b.start(t, lib, a.node.Addrs())
	c.start(t, lib, a.node.Addrs())
	poll.Until(t, "B and C to connect to A", 10*time.Second, func() bool {
		return connectedTo(a.node, b.id) && connectedTo(a.node, c.id)
	})
	removed.add(DeviceIDOf(b.id))
	if n := a.node.Disconnect(DeviceIDOf(b.id)); n != 1 {
		t.Errorf("Disconnect closed the connections of %d peers, want 1", n)
	}
	poll.Until(t, "A to be disconnected from B", 10*time.Second, func() bool {
		return len(a.node.host.Network().ConnsToPeer(b.id)) == 0 && !connectedTo(b.node, a.id)
	})
	// B keeps redialling A (a static peer): each dial is refused.
	dials := b.node.Stats().DialAttempts
	poll.Until(t, "B to redial A twice", 30*time.Second, func() bool { return b.node.Stats().DialAttempts >= dials+2 })
	if conns := a.node.host.Network().ConnsToPeer(b.id); len(conns) != 0 {
		t.Fatalf("A holds %d connections to removed B", len(conns))
	}
	if err := a.node.host.Connect(t.Context(), lpeer.AddrInfo{ID: b.id, Addrs: b.node.host.Addrs()}); err == nil {
		t.Fatal("A dialled removed B")
	}
	// Nothing B writes reaches A; what C writes does.
	if err := b.store.setPosition(bookKey(1), 7); err != nil {
		t.Fatal(err)
	}
	if err := c.store.setPosition(bookKey(2), 9); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "C's write to reach A", 10*time.Second, func() bool { return a.store.len() == 1 })
	if !converged(a.store, c.store) {
		t.Fatalf("A and C differ: %s", diffStores(a.store, c.store))
	}
}

// Once the node is closing, the gater refuses every dial and accept.
func TestGaterRefusesAllWhenClosing(t *testing.T) {
	g := &gater{}
	id := newDevice(t, "X").id
	if !g.InterceptPeerDial(id) || !g.InterceptAddrDial(id, loopback[0]) || !g.InterceptSecured(0, id, nil) {
		t.Fatal("an open gater without removals refused a peer")
	}
	g.closing.Store(true)
	if g.InterceptPeerDial(id) || g.InterceptAddrDial(id, loopback[0]) || g.InterceptAccept(nil) || g.InterceptSecured(0, id, nil) {
		t.Fatal("a closing gater let a connection through")
	}
}
