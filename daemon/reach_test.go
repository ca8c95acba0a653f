package daemon

import (
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon/api"
	"github.com/multiformats/go-multiaddr"
)

func TestVia(t *testing.T) {
	for _, c := range []struct {
		addrs []string
		want  string
	}{
		{nil, ""},
		{[]string{"/ip4/192.168.1.20/tcp/4001"}, "lan"},
		{[]string{"/ip4/10.0.0.2/tcp/4001"}, "lan"},
		{[]string{"/ip4/100.101.102.103/tcp/4001"}, "lan"}, // a VPN's shared address space
		{[]string{"/ip6/fd00::1/tcp/4001"}, "lan"},
		{[]string{"/ip4/127.0.0.1/tcp/4001"}, "lan"},
		{[]string{"/ip4/198.51.100.1/tcp/4001"}, "internet"},
		{[]string{"/ip6/2001:db8::1/tcp/4001"}, "internet"},
		{[]string{"/ip4/198.51.100.1/tcp/4001", "/ip4/192.168.1.20/tcp/4001"}, "lan"},
	} {
		var addrs []multiaddr.Multiaddr
		for _, s := range c.addrs {
			addrs = append(addrs, multiaddr.StringCast(s))
		}
		if got := via(addrs); got != c.want {
			t.Errorf("via(%v) = %q, want %q", c.addrs, got, c.want)
		}
	}
}

func TestShortDialError(t *testing.T) {
	const head = "failed to dial: failed to dial 12D3KooW: all dials failed\n"
	for _, c := range []struct{ err, want string }{
		{head + "  * [/ip4/127.0.0.1/tcp/4001] dial tcp4 127.0.0.1:4001: connect: connection refused\n" +
			"  * [/ip4/10.1.2.3/tcp/4001] dial tcp4 10.1.2.3:4001: connect: network is unreachable", "network unreachable"},
		{head + "  * [/ip6/::1/tcp/4001] dial tcp6 [::1]:4001: connect: connection refused\n" +
			"  * [/ip4/198.51.100.1/tcp/4001] dial tcp4 198.51.100.1:4001: i/o timeout", "timed out"},
		// Only loopback tried: its refusal is all there is to say.
		{head + "  * [/ip4/127.0.0.1/tcp/4001] dial tcp4 127.0.0.1:4001: connect: connection refused", "connection refused"},
		{"failed to negotiate security protocol", "handshake failed"},
	} {
		if got := shortDialError(c.err); !strings.HasPrefix(got, c.want) {
			t.Errorf("shortDialError(%q) = %q, want %q...", c.err, got, c.want)
		}
	}
}

func TestUnreachable(t *testing.T) {
	for _, c := range []struct {
		name  string
		peers []api.Peer
		want  bool
	}{
		{"no other member", nil, false},
		{"one connected", []api.Peer{{Connected: true, State: "connected"}, {State: "unreachable", LastError: "timed out"}}, false},
		{"never met, never dialled", []api.Peer{{State: "never-met"}}, false},
		{"unreachable, not dialled yet", []api.Peer{{State: "unreachable"}}, false},
		{"every dial failed", []api.Peer{{State: "unreachable", LastError: "timed out"}, {State: "never-met"}}, true},
	} {
		got := unreachable(c.peers)
		if (got != "") != c.want {
			t.Errorf("%s: unreachable = %q, want set: %v", c.name, got, c.want)
		}
		if got != "" && (!strings.Contains(got, "timed out") || !strings.Contains(got, "--announce")) {
			t.Errorf("%s: %q says neither why nor what to do", c.name, got)
		}
	}
}

func TestPeerState(t *testing.T) {
	for _, c := range []struct {
		connected, relayed, known bool
		want                      string
	}{
		{true, false, true, "connected"},
		{false, true, true, "relayed"},
		{false, false, true, "unreachable"},
		{false, false, false, "never-met"},
	} {
		if got := peerState(c.connected, c.relayed, c.known); got != c.want {
			t.Errorf("peerState(connected %v, relayed %v, known %v) = %q, want %q", c.connected, c.relayed, c.known, got, c.want)
		}
	}
}
