package peer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/lan"
	"github.com/danyue/danyue/internal/poll"
	"github.com/hashicorp/mdns"
	ma "github.com/multiformats/go-multiaddr"
)

func TestAnnouncement(t *testing.T) {
	lib, other := newLib(t), newLib(t)
	self, them := newDeviceID(t), newDeviceID(t)
	addrs := []ma.Multiaddr{
		ma.StringCast("/ip4/192.168.1.2/tcp/4001"),
		ma.StringCast("/ip6/fd00::2/tcp/4002"),
	}
	txt := announceTXT(lib.announceHash(), them, addrs)
	for _, f := range txt {
		if strings.Contains(f, string(lib.Secret[:])) || strings.Contains(f, lib.IDString()) {
			t.Fatalf("announcement %q reveals the library", f)
		}
	}
	id, got, err := parseAnnouncement(txt, lib.announceHash(), self)
	if err != nil || id != them || len(got) != 2 || !got[0].Equal(addrs[0]) || !got[1].Equal(addrs[1]) {
		t.Fatalf("parse: %v %v %v", id, got, err)
	}
	if _, _, err := parseAnnouncement(txt, other.announceHash(), self); err == nil {
		t.Fatal("an announcement of another library was accepted")
	}
	if _, _, err := parseAnnouncement(txt, lib.announceHash(), them); !errors.Is(err, errOwnAnnouncement) {
		t.Fatalf("own announcement: %v", err)
	}
	// Only plain IP/TCP addresses are dialled, at most maxTXTAddrs.
	odd := []string{"lib=" + lib.announceHash(), "id=" + them.String(),
		"addr=/ip4/1.2.3.4/udp/5/quic-v1", "addr=/dns4/example.com/tcp/1", "addr=garbage",
		"addr=/ip4/1.2.3.4/tcp/5/p2p/" + self.String()}
	for range 20 {
		odd = append(odd, "addr=/ip4/10.0.0.1/tcp/7")
	}
	_, got, err = parseAnnouncement(odd, lib.announceHash(), self)
	if err != nil || len(got) != maxTXTAddrs {
		t.Fatalf("got %v, %v; want %d plain tcp addresses", got, err, maxTXTAddrs)
	}
	if _, _, err := parseAnnouncement([]string{"lib=" + lib.announceHash(), "id=nope"}, lib.announceHash(), self); err == nil {
		t.Fatal("a malformed peer id was accepted")
	}
}

func TestLibraryDerivations(t *testing.T) {
	l := Library{ID: [16]byte{1, 2, 3}, Secret: [32]byte{4, 5, 6}}
	// The announced hash is the documented one, and fixed: other builds
	// must find each other.
	sum := sha256.Sum256(append([]byte("danyue library\x00"), l.ID[:]...))
	if got := l.announceHash(); got != "9fd4c8fa137622f2" || got != strings.ToLower(strings.TrimSpace(hexString(sum[:8]))) {
		t.Fatalf("announce hash %s", got)
	}
	k1, err := l.psk()
	if err != nil || len(k1) != 32 {
		t.Fatalf("psk: %d bytes, %v", len(k1), err)
	}
	if bytes.Contains(k1, l.Secret[:8]) {
		t.Fatal("the network key contains the secret")
	}
	l2 := l
	l2.Secret[31] ^= 1
	k2, _ := l2.psk()
	if bytes.Equal(k1, k2) {
		t.Fatal("two secrets give one network key")
	}
	id := newDeviceID(t)
	sum = sha256.Sum256([]byte(id))
	if d := DeviceIDOf(id); uint64(d) != binary.BigEndian.Uint64(sum[:8]) || d == 0 {
		t.Fatalf("device id %s", d)
	}
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(digits[c>>4])
		s.WriteByte(digits[c&15])
	}
	return s.String()
}

func TestBackoffSchedule(t *testing.T) {
	b := backoff{min: time.Second, max: 5 * time.Minute}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i, w := range want {
		if got := b.delay(i); got != w*time.Second {
			t.Errorf("retry %d: %v, want %v", i, got, w*time.Second)
		}
	}
	if got := b.delay(1 << 20); got != 5*time.Minute {
		t.Errorf("retry 2^20: %v", got)
	}
	b.jitter = true
	for i := range 50 {
		d := b.delay(3)
		if d > 8*time.Second || d < 8*time.Second*4/5 {
			t.Fatalf("jittered delay %d: %v outside [6.4s, 8s]", i, d)
		}
	}
}

func TestMulticastInterfacesSkipLoopback(t *testing.T) {
	for _, ifc := range lan.Interfaces(true) {
		if ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagMulticast == 0 || ifc.Flags&net.FlagUp == 0 {
			t.Errorf("interface %s (%v) chosen", ifc.Name, ifc.Flags)
		}
	}
}

// Two nodes with mDNS on the loopback interface find each other and
// connect. The loopback interface here lacks the MULTICAST flag, but Linux
// still carries IPv4 multicast on it when both the server and the query are
// bound to it explicitly; IPv6 multicast on it fails (network unreachable).
func TestMDNSLoopback(t *testing.T) {
	lo := loopbackInterface(t)
	testMDNS(t, []net.Interface{lo}, loopback)
}

// The same on the machine's real interfaces, where a host's own multicast
// packets loop back to its other sockets. Opt-in: it sends mDNS packets on
// the LAN.
func TestMDNSLAN(t *testing.T) {
	if os.Getenv("DANYUE_TEST_MDNS_LAN") == "" {
		t.Skip("set DANYUE_TEST_MDNS_LAN=1 to run mDNS on the real interfaces")
	}
	testMDNS(t, nil, nil)
}

func testMDNS(t *testing.T, ifaces []net.Interface, listen []ma.Multiaddr) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	// A third device of another library on the same LAN is never dialled.
	c := newDevice(t, "C")
	opts := func(cfg *Config) {
		cfg.MDNS, cfg.MDNSInterfaces = true, ifaces
		cfg.Listen = listen
	}
	a.start(t, lib, nil, opts)
	c.start(t, newLib(t), nil, opts)
	start := time.Now()
	b.start(t, lib, nil, opts)
	// The bound is generous: how fast is measured by testnet's discovery
	// scenario, not asserted on a machine that may be loaded.
	poll.Until(t, "A and B to find each other", 30*time.Second, func() bool {
		return connectedTo(a.node, b.id) && connectedTo(b.node, a.id)
	})
	t.Logf("connected %v after the second node started", time.Since(start).Round(time.Millisecond))
	for _, n := range []*Node{a.node, b.node, c.node} {
		if st := n.Stats(); n == c.node && st.DialAttempts != 0 {
			t.Errorf("the other library's node dialled %d times", st.DialAttempts)
		}
		for _, p := range n.Peers() {
			if (n == c.node) || p.ID == c.id {
				t.Errorf("%s knows %s across libraries", n.ID(), p.ID)
			}
		}
	}
}

// A device whose library moved to a new secret runs a node on the old one
// beside its main node, of the same identity, to bring over the members
// still on it: one query finds both.
func TestMDNSFindsEveryNodeOfADevice(t *testing.T) {
	lo := loopbackInterface(t)
	old := newLib(t)
	cur := old
	cur.Secret[0] ^= 1
	cur.Epoch = 1
	a := newDevice(t, "A")
	opts := func(cfg *Config) { cfg.MDNS, cfg.MDNSInterfaces, cfg.Listen = true, []net.Interface{lo}, loopback }
	var ports []string
	for _, n := range []*Node{
		a.start(t, cur, nil, opts),
		a.start(t, old, nil, opts, func(cfg *Config) {
			cfg.Restricted, cfg.Admit = true, func(crdt.DeviceID) bool { return true }
		}),
	} {
		ports = append(ports, valueOr(n.ListenAddrs()[0], ma.P_TCP))
	}
	entries := make(chan *mdns.ServiceEntry, 16)
	err := mdns.Query(&mdns.QueryParam{
		Service: mdnsService, Domain: "local", Timeout: 3 * time.Second, Interface: &lo,
		Entries: entries, DisableIPv6: true, Logger: log.New(io.Discard, "", 0),
	})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	close(entries)
	found := map[string]bool{}
	for e := range entries {
		id, addrs, err := parseAnnouncement(e.InfoFields, old.announceHash(), newDeviceID(t))
		if err != nil || id != a.id {
			continue
		}
		for _, ad := range addrs {
			found[valueOr(ad, ma.P_TCP)] = true
		}
	}
	for _, p := range ports {
		if !found[p] {
			t.Errorf("one query found A's nodes on ports %v, not the one on %s", found, p)
		}
	}
}

func loopbackInterface(t *testing.T) net.Interface {
	all, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	for _, ifc := range all {
		if ifc.Flags&net.FlagLoopback != 0 && ifc.Flags&net.FlagUp != 0 {
			return ifc
		}
	}
	t.Skip("no loopback interface")
	return net.Interface{}
}
