package peer

import (
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
)

// Connect and disconnect are reported once per connection, and a peer whose
// clock is off by more than MaxClockOffset is reported with its offset.
func TestEventsAndClockOffset(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	var events eventLog
	a.start(t, lib, nil, func(c *Config) { c.OnEvent = events.add })
	b.start(t, lib, a.node.Addrs(), func(c *Config) {
		c.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	})
	poll.Until(t, "connected and skew events", 5*time.Second, func() bool {
		_, c := events.find(PeerConnected, nil)
		_, s := events.find(PeerClockSkewed, nil)
		return c && s
	})
	e, _ := events.find(PeerClockSkewed, nil)
	if e.Peer.ID != b.id || !e.Peer.ClockSkewed || (e.Peer.ClockOffset-2*time.Minute).Abs() > time.Second {
		t.Fatalf("skew event %+v", e.Peer)
	}
	if e.Peer.Name != "B" || e.Peer.Device != DeviceIDOf(b.id) {
		t.Fatalf("peer info %+v", e.Peer)
	}
	// B sees A behind by as much.
	poll.Until(t, "B's estimate", 5*time.Second, func() bool {
		for _, p := range b.node.Peers() {
			if p.ID == a.id && p.ClockKnown {
				return (p.ClockOffset + 2*time.Minute).Abs() < time.Second
			}
		}
		return false
	})
	b.stop(t)
	poll.Until(t, "a disconnected event", 5*time.Second, func() bool {
		_, ok := events.find(PeerDisconnected, nil)
		return ok
	})
	events.mu.Lock()
	defer events.mu.Unlock()
	counts := map[EventKind]int{}
	for _, e := range events.events {
		counts[e.Kind]++
	}
	if counts[PeerConnected] != 1 || counts[PeerDisconnected] != 1 || counts[PeerClockSkewed] != 1 {
		t.Fatalf("events %v", counts)
	}
}

// A device with books of its own joins a library by invite: it restarts in
// that library, dials the inviter, and both end with the books of both.
func TestJoinByInvite(t *testing.T) {
	a, b := newDevice(t, "A"), newDevice(t, "B")
	if err := a.store.fill(20); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := b.store.setPosition(bookKey(100+i), 42); err != nil {
			t.Fatal(err)
		}
	}
	a.start(t, newLib(t), nil)
	b.start(t, newLib(t), nil) // its own library, before joining
	code := a.node.Invite()
	inv, err := DecodeInvite(code)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Peer != a.id || inv.Library != a.node.cfg.Library {
		t.Fatalf("invite %+v", inv)
	}
	b.stop(t)
	b.start(t, inv.Library, nil)
	if err := b.node.Connect(t.Context(), inv.PeerAddrs()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the joined device to merge", 10*time.Second, func() bool {
		return converged(a.store, b.store) && a.store.len() == 25
	})
}
