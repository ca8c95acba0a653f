package portmap

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeNet is a home router that maps ports: its mappings, the ports other
// devices of the LAN hold, and its public address. Each restart makes a
// new control point (as a UPnP router's new HTTP port), so the Router the
// Mapper held fails from then on.
type fakeNet struct {
	mu          sync.Mutex
	up          bool
	generation  int
	public      netip.Addr
	mappings    map[int]int // external -> internal
	taken       map[int]bool
	discoveries int
	asked       []int // external ports asked for, in order
}

func newFakeNet() *fakeNet {
	return &fakeNet{up: true, public: netip.MustParseAddr("203.0.113.1"), mappings: map[int]int{}, taken: map[int]bool{}}
}

func (n *fakeNet) discover(ctx context.Context) (Router, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.discoveries++
	if !n.up {
		return nil, errors.New("no router answered")
	}
	return &fakeRouter{n: n, generation: n.generation}, nil
}

func (n *fakeNet) restart() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.generation++
	clear(n.mappings)
}

func (n *fakeNet) set(f func(n *fakeNet)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n)
}

func (n *fakeNet) get(f func(n *fakeNet)) { n.set(f) }

type fakeRouter struct {
	n          *fakeNet
	generation int
}

func (r *fakeRouter) check() error {
	if !r.n.up || r.n.generation != r.generation {
		return errors.New("connection refused")
	}
	return nil
}

func (r *fakeRouter) Map(ctx context.Context, internal, external int, lease time.Duration) (int, error) {
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	if err := r.check(); err != nil {
		return 0, err
	}
	r.n.asked = append(r.n.asked, external)
	if r.n.taken[external] {
		return 0, fmt.Errorf("ConflictInMappingEntry: port %d", external)
	}
	r.n.mappings[external] = internal
	return external, nil
}

func (r *fakeRouter) Unmap(ctx context.Context, internal, external int) error {
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	if err := r.check(); err != nil {
		return err
	}
	delete(r.n.mappings, external)
	return nil
}

func (r *fakeRouter) External(ctx context.Context) (netip.Addr, error) {
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	return r.n.public, r.check()
}

func (r *fakeRouter) String() string { return "the fake router" }

// lease is short, so that renewals come quickly; the tests wait for
// outcomes, never for a time.
const lease = 30 * time.Millisecond

func newMapper(t *testing.T, n *fakeNet) *Mapper {
	m := New(Config{Discover: n.discover, Lease: lease, Retry: lease})
	t.Cleanup(func() { m.Close() })
	return m
}

func waitMapping(t *testing.T, m *Mapper, internal int, want netip.AddrPort) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("port %d mapped at %v", internal, want), 10*time.Second, func() bool {
		got, ok := m.Mapping(internal)
		return ok && got == want
	})
}

func TestMapsTheListenPortItself(t *testing.T) {
	n := newFakeNet()
	m := newMapper(t, n)
	m.SetPorts(4001)
	waitMapping(t, m, 4001, netip.MustParseAddrPort("203.0.113.1:4001"))
	if !m.Found() {
		t.Error("Found() = false after a mapping")
	}
	n.get(func(n *fakeNet) {
		if n.mappings[4001] != 4001 {
			t.Errorf("the router maps %v, want 4001 -> 4001", n.mappings)
		}
	})
}

// A port held by another device of the LAN: another is taken, and then
// kept, renewal after renewal and across the router's restart.
func TestKeepsTheExternalPortItWasGiven(t *testing.T) {
	n := newFakeNet()
	n.taken[4001] = true
	m := newMapper(t, n)
	m.SetPorts(4001)
	var ext netip.AddrPort
	poll.Until(t, "a mapping on another port", 10*time.Second, func() bool {
		var ok bool
		ext, ok = m.Mapping(4001)
		return ok
	})
	if ext.Port() == 4001 {
		t.Fatalf("mapped on the taken port 4001")
	}
	n.restart()
	poll.Until(t, "the router found again after its restart", 10*time.Second, func() bool {
		var d int
		n.get(func(n *fakeNet) { d = n.discoveries })
		return d >= 2
	})
	waitMapping(t, m, 4001, ext)
	// Renewals ask for the port held, not a new one.
	n.set(func(n *fakeNet) { n.asked = nil })
	poll.Until(t, "three renewals", 10*time.Second, func() bool {
		var asked int
		n.get(func(n *fakeNet) { asked = len(n.asked) })
		return asked >= 3
	})
	n.get(func(n *fakeNet) {
		for _, p := range n.asked {
			if p != int(ext.Port()) {
				t.Errorf("a renewal asked for port %d, want %d: %v", p, ext.Port(), n.asked)
				break
			}
		}
	})
}

func TestRouterRestartKeepsThePort(t *testing.T) {
	n := newFakeNet()
	m := newMapper(t, n)
	m.SetPorts(4001)
	want := netip.MustParseAddrPort("203.0.113.1:4001")
	waitMapping(t, m, 4001, want)
	n.restart()
	poll.Until(t, "the mapping made again on the restarted router", 10*time.Second, func() bool {
		var again bool
		n.get(func(n *fakeNet) { again = n.mappings[4001] == 4001 && n.discoveries >= 2 })
		return again
	})
	waitMapping(t, m, 4001, want)
}

func TestFollowsANewPublicAddress(t *testing.T) {
	n := newFakeNet()
	m := newMapper(t, n)
	m.SetPorts(4001)
	waitMapping(t, m, 4001, netip.MustParseAddrPort("203.0.113.1:4001"))
	n.set(func(n *fakeNet) { n.public = netip.MustParseAddr("198.51.100.7") })
	waitMapping(t, m, 4001, netip.MustParseAddrPort("198.51.100.7:4001"))
}

func TestNoRouterThenOne(t *testing.T) {
	n := newFakeNet()
	n.up = false
	m := newMapper(t, n)
	m.SetPorts(4001)
	poll.Until(t, "two searches", 10*time.Second, func() bool {
		var d int
		n.get(func(n *fakeNet) { d = n.discoveries })
		return d >= 2
	})
	if _, ok := m.Mapping(4001); ok || m.Found() {
		t.Fatalf("a mapping or a router with no router: Found %v", m.Found())
	}
	n.set(func(n *fakeNet) { n.up = true })
	waitMapping(t, m, 4001, netip.MustParseAddrPort("203.0.113.1:4001"))
}

func TestCloseAndSetPortsUnmap(t *testing.T) {
	n := newFakeNet()
	m := New(Config{Discover: n.discover, Lease: lease, Retry: lease})
	m.SetPorts(4001, 4002)
	waitMapping(t, m, 4001, netip.MustParseAddrPort("203.0.113.1:4001"))
	waitMapping(t, m, 4002, netip.MustParseAddrPort("203.0.113.1:4002"))
	m.SetPorts(4001)
	poll.Until(t, "port 4002 unmapped", 10*time.Second, func() bool {
		var gone bool
		n.get(func(n *fakeNet) { _, had := n.mappings[4002]; gone = !had })
		return gone
	})
	if _, ok := m.Mapping(4002); ok {
		t.Error("port 4002 still reported mapped")
	}
	m.Close()
	n.get(func(n *fakeNet) {
		if len(n.mappings) != 0 {
			t.Errorf("after Close the router still maps %v", n.mappings)
		}
	})
}
