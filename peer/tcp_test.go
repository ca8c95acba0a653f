package peer

import (
	"net"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// A node dials from an ephemeral port, not from its listen port: two devices
// on fixed ports that dialled each other from them would, dialling at the
// same moment, make one TCP connection by simultaneous open that fails the
// security handshake, and a dial would collide with a dead connection its
// peer still holds on that address pair (see newTCPTransport).
func TestDialsFromEphemeralPort(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs())
	poll.Until(t, "B to connect to A", 10*time.Second, func() bool { return connectedTo(b.node, a.id) })
	listen := map[int]bool{}
	for _, l := range b.node.ListenAddrs() {
		listen[tcpPort(t, l)] = true
	}
	dialled := 0
	for _, c := range b.node.host.Network().ConnsToPeer(a.id) {
		if c.Stat().Direction != network.DirOutbound {
			continue
		}
		dialled++
		if port := tcpPort(t, c.LocalMultiaddr()); listen[port] {
			t.Errorf("B dialled A from its listen port %d", port)
		}
	}
	if dialled == 0 {
		t.Fatal("B has no connection it dialled to A")
	}
}

func tcpPort(t *testing.T, a ma.Multiaddr) int {
	t.Helper()
	na, err := manet.ToNetAddr(a)
	if err != nil {
		t.Fatal(err)
	}
	ta, ok := na.(*net.TCPAddr)
	if !ok {
		t.Fatalf("%s is not a TCP address", a)
	}
	return ta.Port
}

// A connection over the internet probes rarely: each probe crosses the
// mobile network and wakes a phone's radio; one on a private network keeps
// the quick schedule that finds a vanished LAN peer within lostPeerBound.
func TestKeepAliveFor(t *testing.T) {
	if internetKeepAlive.Idle <= tcpKeepAlive.Idle {
		t.Fatalf("internet keepalive idle %v, LAN %v: want the internet's longer", internetKeepAlive.Idle, tcpKeepAlive.Idle)
	}
	for _, c := range []struct {
		addr string
		want net.KeepAliveConfig
	}{
		{"/ip4/192.168.1.20/tcp/4001", tcpKeepAlive},
		{"/ip4/10.1.2.3/tcp/4001", tcpKeepAlive},
		{"/ip4/127.0.0.1/tcp/4001", tcpKeepAlive},
		{"/ip4/100.64.0.7/tcp/4001", tcpKeepAlive}, // a VPN
		{"/ip6/fe80::1/tcp/4001", tcpKeepAlive},
		{"/ip4/11.0.0.1/tcp/4001", internetKeepAlive},
		{"/ip6/2001:db8::1/tcp/4001", internetKeepAlive},
	} {
		if got := keepAliveFor(ma.StringCast(c.addr)); got != c.want {
			t.Errorf("keepAliveFor(%s) = %+v, want %+v", c.addr, got, c.want)
		}
	}
}
