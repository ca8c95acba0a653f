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
	for _, l := range b.node.host.Network().ListenAddresses() {
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
