package peer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	relayproto "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	ma "github.com/multiformats/go-multiaddr"
)

// Redials of a lost member's dead addresses must not use up the connection
// rate of its address: when it comes back, its inbound connection is
// accepted. Inbound connections from one address are still rate-limited.
func TestConnectionRateIsForInboundOnly(t *testing.T) {
	rm, err := newResourceManager()
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	member := ma.StringCast("/ip4/192.168.1.20/tcp/4001")
	for i := range 100 { // a minute and a half of redials every second
		scope, err := rm.OpenConnection(network.DirOutbound, true, member)
		if err != nil {
			t.Fatalf("outbound connection %d refused: %v", i, err)
		}
		scope.Done()
	}
	accepted := 0
	for range 100 {
		scope, err := rm.OpenConnection(network.DirInbound, true, member)
		if errors.Is(err, errInboundRate) {
			break
		}
		if err != nil {
			t.Fatalf("inbound connection refused: %v", err)
		}
		scope.Done()
		accepted++
	}
	if accepted == 0 || accepted == 100 {
		t.Fatalf("accepted %d of 100 inbound connections at once, want the burst and then refusals", accepted)
	}
	t.Logf("a burst of %d inbound connections from one address accepted, then refused", accepted)
}

// A member's connection to us is accepted while we are dialling it at as
// many addresses as libp2p dials at once (stale ones, waiting out their
// timeout): the dials must not take the room its connection needs.
func TestPendingDialsLeaveRoomForThePeer(t *testing.T) {
	rm, err := newResourceManager()
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	member := newDevice(t, "member").id
	for i := range 8 {
		addr := ma.StringCast(fmt.Sprintf("/ip4/172.17.0.%d/tcp/4001", i+1))
		scope, err := rm.OpenConnection(network.DirOutbound, true, addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer scope.Done()
		if err := scope.SetPeer(member); err != nil {
			t.Fatalf("dial %d to the member: %v", i, err)
		}
	}
	scope, err := rm.OpenConnection(network.DirInbound, true, ma.StringCast("/ip4/11.0.0.4/tcp/50000"))
	if err != nil {
		t.Fatal(err)
	}
	defer scope.Done()
	if err := scope.SetPeer(member); err != nil {
		t.Errorf("the member's own connection, while we dial it: %v", err)
	}
}

// The host speaks what newHost says: a connection between two members is
// TCP in the private network, secured by Noise, with yamux agreed inside
// the Noise handshake (no round trip after it), and nothing else runs on
// it but identify and danyue's own protocols.
func TestHostConnection(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	a.start(t, lib, nil)
	b.start(t, lib, nil)
	if err := b.node.Connect(t.Context(), a.node.Addrs()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to connect to A", 5*time.Second, func() bool { return connectedTo(b.node, a.id) })
	conns := b.node.host.Network().ConnsToPeer(a.id)
	if len(conns) == 0 {
		t.Fatal("no connection to A")
	}
	st := conns[0].ConnState()
	if st.Transport != "tcp" || st.Security != noise.ID || st.StreamMultiplexer != yamux.ID || !st.UsedEarlyMuxerNegotiation {
		t.Errorf("connection state %+v; want tcp, %s, %s agreed in the handshake", st, noise.ID, yamux.ID)
	}
	// libp2p's: identify, and the relay and hole punching among members
	// (away.go), whose hole punching starts once a device knows its
	// public address.
	libp2p := []protocol.ID{identify.ID, identify.IDPush, relayproto.ProtoIDv2Hop, relayproto.ProtoIDv2Stop}
	for _, p := range a.node.host.Mux().Protocols() {
		if !strings.HasPrefix(string(p), "/danyue/") && !slices.Contains(libp2p, p) {
			t.Errorf("A serves %s", p)
		}
	}
}

// The host listens only once started, so that a node sets its stream
// handlers before any member can connect: one that connected earlier was
// told the sync protocol is not supported, took it for a build of another
// protocol, and did not pull from this device until it reconnected.
func TestHostListensOnlyOnceStarted(t *testing.T) {
	h, start := unstartedHost(t, newLib(t))
	if addrs := h.Network().ListenAddresses(); len(addrs) != 0 {
		t.Fatalf("the host listens on %v before it is started", addrs)
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	if len(h.Network().ListenAddresses()) == 0 {
		t.Fatal("the host does not listen once started")
	}
}
