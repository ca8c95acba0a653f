package peer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/internal/testport"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// circuitVia is the address that reaches a device through relay r.
func circuitVia(t *testing.T, r *device) ma.Multiaddr {
	t.Helper()
	c, err := ma.NewMultiaddr("/p2p/" + r.id.String() + "/p2p-circuit")
	if err != nil {
		t.Fatal(err)
	}
	return r.node.ListenAddrs()[0].Encapsulate(c)
}

// reserveAt has d reserve a relay slot at r, as a device away does at a
// member it reaches over the internet (on loopback, identified does not
// take r for one).
func reserveAt(ctx context.Context, d, r *device) error {
	_, err := client.Reserve(ctx, d.node.host, lpeer.AddrInfo{ID: r.id, Addrs: r.node.ListenAddrs()})
	return err
}

// A device reached only through a member's relay is shown as relayed, not
// connected, and nothing is synced over that connection: its changes come
// through the member, which holds them anyway.
func TestRelayedConnectionCarriesNoSync(t *testing.T) {
	lib := newLib(t)
	a, b, c := newDevice(t, "A"), newDevice(t, "B"), newDevice(t, "C")
	a.start(t, lib, nil)
	c.start(t, lib, a.node.Addrs())
	// B knows C, at an address where nothing listens.
	nowhere := ma.StringCast("/ip4/127.0.0.1/tcp/" + fmt.Sprint(testport.Loopback(t)) + "/p2p/" + c.id.String())
	b.start(t, lib, append(a.node.Addrs(), nowhere))
	poll.Until(t, "B and C to connect to A", 10*time.Second, func() bool {
		return connectedTo(b.node, a.id) && connectedTo(c.node, a.id)
	})
	if err := reserveAt(t.Context(), c, a); err != nil {
		t.Fatalf("C reserves at A: %v", err)
	}
	ctx := network.WithAllowLimitedConn(t.Context(), "test")
	if err := b.node.host.Connect(ctx, lpeer.AddrInfo{ID: c.id, Addrs: []ma.Multiaddr{circuitVia(t, a)}}); err != nil {
		t.Fatalf("B reaches C through A: %v", err)
	}
	poll.Until(t, "B to show C as relayed", 10*time.Second, func() bool {
		for _, p := range b.node.Peers() {
			if p.ID == c.id {
				return p.Relayed && !p.Connected
			}
		}
		return false
	})
	key := bookKey(1)
	if err := c.store.setPosition(key, 42); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "C's write to reach B through A", 10*time.Second, func() bool {
		_, ok := b.store.book(key)
		return ok
	})
	for _, p := range b.node.Peers() {
		if p.ID == c.id && (p.RecordsIn != 0 || p.RecordsOut != 0) {
			t.Errorf("B and C synced over the relayed connection: %d records in, %d out", p.RecordsIn, p.RecordsOut)
		}
	}
}

// A member's relay serves members only: a device that holds the key but
// is no member gets no slot and reaches nobody through it.
func TestRelayServesMembersOnly(t *testing.T) {
	lib := newLib(t)
	a, c, d := newDevice(t, "A"), newDevice(t, "C"), newDevice(t, "D")
	stranger := DeviceIDOf(d.id)
	a.start(t, lib, nil, func(cfg *Config) {
		cfg.Member = func(dev crdt.DeviceID) bool { return dev != stranger }
	})
	c.start(t, lib, a.node.Addrs())
	d.start(t, lib, nil)
	if err := d.node.host.Connect(t.Context(), lpeer.AddrInfo{ID: a.id, Addrs: a.node.ListenAddrs()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "C to connect to A", 10*time.Second, func() bool { return connectedTo(c.node, a.id) })
	if err := reserveAt(t.Context(), c, a); err != nil {
		t.Fatalf("a member's reservation: %v", err)
	}
	var re client.ReservationError
	if err := reserveAt(t.Context(), d, a); !errors.As(err, &re) {
		t.Errorf("the stranger's reservation: %v, want refused", err)
	}
	ctx := network.WithAllowLimitedConn(t.Context(), "test")
	if err := d.node.host.Connect(ctx, lpeer.AddrInfo{ID: c.id, Addrs: []ma.Multiaddr{circuitVia(t, a)}}); err == nil {
		t.Error("the stranger reached C through A's relay")
	}
}

// A hole punch dials from the listen port, so that a NAT that keeps
// source ports maps it where the other side is told to dial, and only to
// public addresses; ordinary dials do neither (TestDialsFromEphemeralPort).
func TestHolePunchDialsFromListenPort(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	a.start(t, lib, nil)
	b.start(t, lib, nil)
	target := b.node.ListenAddrs()[0]
	tpt, ok := a.node.host.Network().(*swarm.Swarm).TransportForDialing(target).(*tcpTransport)
	if !ok {
		t.Fatal("the swarm dials TCP with another transport")
	}
	punch := network.WithSimultaneousConnect(t.Context(), true, "test")
	for _, c := range []struct {
		ctx   context.Context
		addr  string
		want  *tcp.TcpTransport
		error error
	}{
		{t.Context(), "/ip4/11.0.0.1/tcp/4001", tpt.TcpTransport, nil},
		{t.Context(), "/ip4/192.168.1.2/tcp/4001", tpt.TcpTransport, nil},
		{punch, "/ip4/11.0.0.1/tcp/4001", tpt.punch, nil},
		{punch, "/ip4/192.168.1.2/tcp/4001", nil, errPunchPrivate},
		{punch, "/ip4/127.0.0.1/tcp/4001", nil, errPunchPrivate},
	} {
		got, err := tpt.pick(c.ctx, ma.StringCast(c.addr))
		if got != c.want || !errors.Is(err, c.error) {
			t.Errorf("pick(%s, punch %v) = %p, %v; want %p, %v", c.addr, c.ctx == punch, got, err, c.want, c.error)
		}
	}
	// The hole punch's transport, on loopback, which pick refuses.
	conn, err := tpt.punch.Dial(punch, target, b.id)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, listen := tcpPort(t, conn.LocalMultiaddr()), tcpPort(t, a.node.ListenAddrs()[0])
	if runtime.GOOS == "windows" {
		// Whether a second socket may bind a listening port is the OS's
		// SO_REUSEADDR to say (under wine, Linux's, which refuses);
		// libp2p then dials from another port, and a device behind NAT
		// syncs through the member in between.
		t.Logf("the hole punch dialled from port %d; the listen port is %d", got, listen)
		return
	}
	if got != listen {
		t.Errorf("the hole punch dialled from port %d, not the listen port %d", got, listen)
	}
}

// A fixed listen port another process holds is refused, although the
// listener sets SO_REUSEPORT for hole punches.
func TestListenPortTakenIsRefused(t *testing.T) {
	lib := newLib(t)
	a := newDevice(t, "A")
	a.start(t, lib, nil)
	taken := a.node.ListenAddrs()[0]
	b := newDevice(t, "B")
	_, err := New(context.Background(), Config{Identity: b.key, Library: lib, Name: "B", Store: b.store, Listen: []ma.Multiaddr{taken}, Logger: testLogger(t, "B"), noBook: true})
	if err == nil {
		t.Fatalf("a second node listens on %s", taken)
	}
}

func TestPublic(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"/ip4/11.0.0.1/tcp/4001", true},
		{"/ip6/2001:db8::1/tcp/4001", true},
		{"/ip4/192.168.1.20/tcp/4001", false},
		{"/ip4/100.64.0.7/tcp/4001", false},
		{"/ip4/127.0.0.1/tcp/4001", false},
		{"/ip4/0.0.0.0/tcp/4001", false},
		{"/ip4/11.0.0.1/tcp/4001/p2p/12D3KooWLK587zEKDn7weyJJ9AZy1tskx3S8FgK3ULnvoiN5oEuf/p2p-circuit", false},
	} {
		if _, got := public(ma.StringCast(c.addr)); got != c.want {
			t.Errorf("public(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
}
