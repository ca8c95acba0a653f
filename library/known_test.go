package library

import (
	"strconv"
	"testing"
	"time"

	"github.com/danyue/danyue/peer"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// The address book goes to the store with this device's own addresses, and
// comes back as the members' entries and the port this device listened on,
// which its next run listens on again when no --listen is given.
func TestKnownAddrsRoundTrip(t *testing.T) {
	l := openLibrary(t, "laptop", nil)
	other, err := lpeer.Decode("12D3KooWDnZYQKVZWRf5PD8q6BZsqoDfrTdSuMEDoin7VG2trXMp")
	if err != nil {
		t.Fatal(err)
	}
	seen := time.UnixMilli(1_800_000_000_000)
	l.saveKnown([]peer.Known{{Peer: other, Addrs: []multiaddr.Multiaddr{multiaddr.StringCast("/ip4/192.168.1.5/tcp/4001")}, Seen: seen}})
	known, port := l.loadKnown(ctxT(t))
	if len(known) != 1 || known[0].Peer != other || known[0].Addrs[0].String() != "/ip4/192.168.1.5/tcp/4001" || !known[0].Seen.Equal(seen) {
		t.Fatalf("loaded %+v, want the one member saved", known)
	}
	own, err := l.Addrs()[0].ValueForProtocol(multiaddr.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	if strconv.Itoa(port) != own {
		t.Fatalf("port %d, want the one this device listens on, %s", port, own)
	}
	if got := portListen(port); len(got) != 2 {
		t.Fatalf("listen %v, want IPv4 and IPv6 on port %d", got, port)
	}
}
