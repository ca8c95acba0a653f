package peer

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
)

// What a member says of how to reach a device is checked at the door: only
// dialable TCP addresses, without /p2p, at most maxKnownAddrs, each at most
// maxAddrBytes; a peer id that parses; a time no later than ours.
func TestKnownFromWire(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	id := newDeviceID(t)
	raw := func(ss ...string) [][]byte {
		var out [][]byte
		for _, s := range ss {
			out = append(out, ma.StringCast(s).Bytes())
		}
		return out
	}
	many := make([]string, 20)
	for i := range many {
		many[i] = fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1)
	}
	long := "/dns4/" + strings.Repeat("a", 200) + ".example/tcp/4001"
	tests := []struct {
		name string
		w    wireKnown
		want []string // nil: refused
	}{
		{"lan and loopback", wireKnown{Peer: []byte(id), Addrs: raw("/ip4/192.168.1.5/tcp/4001", "/ip4/127.0.0.1/tcp/4001")},
			[]string{"/ip4/192.168.1.5/tcp/4001", "/ip4/127.0.0.1/tcp/4001"}},
		{"dns name", wireKnown{Peer: []byte(id), Addrs: raw("/dns4/home.example.net/tcp/4001")}, []string{"/dns4/home.example.net/tcp/4001"}},
		{"p2p suffix cut", wireKnown{Peer: []byte(id), Addrs: raw("/ip6/fd00::1/tcp/4001/p2p/" + id.String())}, []string{"/ip6/fd00::1/tcp/4001"}},
		{"duplicates once", wireKnown{Peer: []byte(id), Addrs: raw("/ip4/10.0.0.1/tcp/1", "/ip4/10.0.0.1/tcp/1")}, []string{"/ip4/10.0.0.1/tcp/1"}},
		{"non-dialable dropped", wireKnown{Peer: []byte(id), Addrs: raw(
			"/ip4/0.0.0.0/tcp/4001", "/ip6/::/tcp/4001", "/ip4/224.0.0.251/tcp/5353", "/ip4/10.0.0.1/tcp/0",
			"/ip4/10.0.0.1/udp/4001/quic-v1", "/ip4/10.0.0.1/tcp/4001/p2p/"+id.String()+"/p2p-circuit", "/unix/tmp/x", long,
			"/ip4/10.0.0.9/tcp/9")}, []string{"/ip4/10.0.0.9/tcp/9"}},
		{"nothing dialable", wireKnown{Peer: []byte(id), Addrs: raw("/ip4/0.0.0.0/tcp/1")}, nil},
		{"garbage bytes", wireKnown{Peer: []byte(id), Addrs: [][]byte{{0xff, 0xff, 0xff}, make([]byte, 4096)}}, nil},
		{"capped", wireKnown{Peer: []byte(id), Addrs: raw(many...)}, many[:maxKnownAddrs]},
		{"bad peer id", wireKnown{Peer: []byte("not a peer id"), Addrs: raw("/ip4/10.0.0.1/tcp/1")}, nil},
		{"long peer id", wireKnown{Peer: make([]byte, 1000), Addrs: raw("/ip4/10.0.0.1/tcp/1")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, ok := knownFromWire(tt.w, now)
			if tt.want == nil {
				if ok {
					t.Fatalf("took %v, want refused", k.Addrs)
				}
				return
			}
			if !ok {
				t.Fatal("refused")
			}
			var got []string
			for _, a := range k.Addrs {
				got = append(got, a.String())
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("addrs %v, want %v", got, tt.want)
			}
			if k.Peer != id {
				t.Fatalf("peer %s, want %s", k.Peer, id)
			}
		})
	}
	// Another device's clock ahead of ours does not make its word newer
	// than what we hear now.
	k, _ := knownFromWire(wireKnown{Peer: []byte(id), Addrs: raw("/ip4/10.0.0.1/tcp/1"), SeenMs: uint64(now.UnixMilli()) + 3_600_000}, now)
	if !k.Seen.Equal(now) {
		t.Fatalf("seen %v, want %v", k.Seen, now)
	}
}

// The book holds at most maxKnownDevices devices; a newer word replaces an
// older one, an older one changes nothing.
func TestAddrBookBounds(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000)
	b := newAddrBook(nil)
	addr := []ma.Multiaddr{ma.StringCast("/ip4/10.0.0.1/tcp/1")}
	var first lpeer.ID
	for i := range maxKnownDevices + 10 {
		id := newDeviceID(t)
		if i == 0 {
			first = id
		}
		b.learn(Known{Peer: id, Addrs: addr, Seen: t0.Add(time.Duration(i) * time.Second)})
	}
	if n := len(b.list()); n != maxKnownDevices {
		t.Fatalf("book of %d devices, want %d", n, maxKnownDevices)
	}
	if _, ok := b.get(first); ok {
		t.Fatal("the device seen longest ago was kept")
	}
	id := b.list()[0].Peer
	other := []ma.Multiaddr{ma.StringCast("/ip4/10.0.0.2/tcp/2")}
	if b.learn(Known{Peer: id, Addrs: other, Seen: t0}) {
		t.Fatal("an older word changed the book")
	}
	if !b.learn(Known{Peer: id, Addrs: other, Seen: t0.Add(time.Hour)}) {
		t.Fatal("a newer word with new addresses did not change the book")
	}
	if k, _ := b.get(id); !k.Addrs[0].Equal(other[0]) {
		t.Fatalf("book has %v, want %v", k.Addrs, other)
	}
}

// A member's word is bounded and checked: it cannot fill the book past its
// bound, push a member out with devices that are not members, or name this
// device or a removed one.
func TestLearnFromBounds(t *testing.T) {
	lib := newLib(t)
	a := newDevice(t, "A")
	var (
		mu      sync.Mutex
		members = map[crdt.DeviceID]bool{}
	)
	removed := newDeviceID(t)
	a.start(t, lib, nil, withBook, func(c *Config) {
		c.Member = func(d crdt.DeviceID) bool { mu.Lock(); defer mu.Unlock(); return members[d] }
		c.Removed = func(d crdt.DeviceID) bool { return d == DeviceIDOf(removed) }
	})
	remote := newDeviceID(t)
	member := newDeviceID(t)
	mu.Lock()
	members[DeviceIDOf(member)] = true
	mu.Unlock()
	addr := ma.StringCast("/ip4/127.0.0.1/tcp/9").Bytes()
	now := uint64(time.Now().UnixMilli())
	ws := []wireKnown{
		{Peer: []byte(member), Addrs: [][]byte{addr}, SeenMs: now - 1000},
		{Peer: []byte(a.id), Addrs: [][]byte{addr}},
		{Peer: []byte(removed), Addrs: [][]byte{addr}},
	}
	for range 3 * maxKnownDevices {
		ws = append(ws, wireKnown{Peer: []byte(newDeviceID(t)), Addrs: [][]byte{addr}, SeenMs: now})
	}
	a.node.learnFrom(remote, ws)
	if _, ok := a.node.book.get(member); !ok {
		t.Fatal("the member is not in the book")
	}
	for _, p := range []lpeer.ID{a.id, removed} {
		if _, ok := a.node.book.get(p); ok {
			t.Fatalf("the book holds %s", p)
		}
	}
	if n := len(a.node.book.list()); n > maxKnownDevices {
		t.Fatalf("book of %d devices, want at most %d", n, maxKnownDevices)
	}
	// Strangers fill the room left, and push nobody out.
	a.node.learnFrom(remote, ws[3+maxKnownDevices:])
	if _, ok := a.node.book.get(member); !ok {
		t.Fatal("devices that are not members pushed the member out")
	}
	// Only the member is dialled.
	kept := 0
	for _, p := range a.node.Peers() {
		if p.Kept {
			kept++
			if p.ID != member {
				t.Errorf("dials %s, not a member", p.ID)
			}
		}
	}
	if kept != 1 {
		t.Fatalf("%d peers dialled, want the member alone", kept)
	}
	// A device removed from the library leaves the book.
	a.node.Disconnect(DeviceIDOf(member))
	if _, ok := a.node.book.get(member); ok {
		t.Fatal("a removed device is still in the book")
	}
}

// A library paired in a chain (A invited B, B invited C; no mDNS) becomes a
// mesh: A and C learn each other's addresses through B and connect.
func TestChainBecomesMesh(t *testing.T) {
	lib := newLib(t)
	a, b, c := newDevice(t, "A"), newDevice(t, "B"), newDevice(t, "C")
	a.start(t, lib, nil, withBook)
	b.start(t, lib, a.node.Addrs(), withBook)
	poll.Until(t, "B to connect to A", 10*time.Second, func() bool { return connectedTo(a.node, b.id) })
	c.start(t, lib, b.node.Addrs(), withBook)
	poll.Until(t, "A and C to connect", 10*time.Second, func() bool {
		return connectedTo(a.node, c.id) && connectedTo(c.node, a.id)
	})
}

// A device dials the members its book kept from the last run at start,
// and hands the book over to be kept whenever it learns.
func TestKnownDialledAtStartAndSaved(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	var (
		mu    sync.Mutex
		saved []Known
	)
	onKnown := func(c *Config) {
		c.OnKnown = func(l []Known) { mu.Lock(); saved = l; mu.Unlock() }
	}
	a.start(t, lib, nil, withBook, onKnown)
	b.start(t, lib, a.node.Addrs(), withBook)
	poll.Until(t, "A to save B's addresses", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(saved) == 1 && saved[0].Peer == b.id && len(saved[0].Addrs) > 0
	})
	mu.Lock()
	book := saved
	mu.Unlock()
	// A restarts, with no static peer: it finds B where B was.
	a.stop(t)
	a.start(t, lib, nil, withBook, func(c *Config) { c.Known = book })
	poll.Until(t, "A to reconnect to B from its book", 10*time.Second, func() bool { return connectedTo(a.node, b.id) })
}

// A user-announced address comes first in what the device shares, and an
// address members could not dial is refused at start.
func TestAnnounce(t *testing.T) {
	lib := newLib(t)
	a := newDevice(t, "A")
	home := ma.StringCast("/dns4/home.example.net/tcp/4001")
	a.start(t, lib, nil, withBook, func(c *Config) { c.Announce = []ma.Multiaddr{home} })
	own := a.node.ownKnown()
	if len(own.Addrs) < 2 || !own.Addrs[0].Equal(home) {
		t.Fatalf("shares %v, want %s first", own.Addrs, home)
	}
	b := newDevice(t, "B")
	_, err := New(t.Context(), Config{
		Identity: b.key, Library: lib, Store: b.store, Listen: loopback, Logger: testLogger(t, "B"),
		Announce: []ma.Multiaddr{ma.StringCast("/ip4/0.0.0.0/tcp/4001")},
	})
	if err == nil || !strings.Contains(err.Error(), "announce") {
		t.Fatalf("New with a wildcard announce: %v, want refused", err)
	}
}

// A member that moves about leaves no address behind for good: the
// addresses it was at are as bounded in the peerstore, which libp2p
// dials whole, as in its state.
func TestMovingMemberLeavesBoundedAddrs(t *testing.T) {
	lib := newLib(t)
	a := newDevice(t, "A")
	a.start(t, lib, nil, withBook)
	member := newDeviceID(t)
	for i := range 4 * maxPeerAddrs {
		addr := ma.StringCast(fmt.Sprintf("/ip4/192.0.2.%d/tcp/%d", i%250+1, 5000+i))
		a.node.meet(Known{Peer: member, Addrs: []ma.Multiaddr{addr}, Seen: time.Now()})
	}
	// The keeper's dials add what they dial for two minutes (libp2p's
	// TempAddrTTL), a dropped address among them when a meet raced the
	// dial; what is kept for good is what the state keeps.
	ps := a.node.host.Peerstore()
	ps.UpdateAddrs(member, peerstore.TempAddrTTL, 0)
	if n := len(ps.Addrs(member)); n > maxPeerAddrs {
		t.Errorf("the peerstore keeps %d addresses of the member, want at most %d", n, maxPeerAddrs)
	}
}
