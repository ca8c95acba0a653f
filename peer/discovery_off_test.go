package peer

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/logbuf"
	"github.com/danyue/danyue/internal/netnstest"
	"github.com/danyue/danyue/internal/poll"
	"github.com/hashicorp/mdns"
)

func TestIsBindError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		// The texts of hashicorp/mdns v1.0.7's newClient.
		{errors.New("failed to bind to any unicast udp port"), true},
		{errors.New("failed to bind to any multicast udp port"), true},
		// A send that fails now may work later: not a reason to stop.
		{errors.New("write udp6 [::]:5353->[ff02::fb]:5353: sendto: network is unreachable"), false},
		{errors.New("write udp4 0.0.0.0:41234->224.0.0.251:5353: sendto: no route to host"), false},
	} {
		if got := isBindError(tc.err); got != tc.want {
			t.Errorf("isBindError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// holdMDNSPort binds UDP 5353 on every address and both families without
// SO_REUSEADDR, as a responder that does not share the port would, so that
// every mDNS socket of this process fails to bind. It holds the port for
// the whole network namespace, so its callers run in one of their own
// where they can (netnstest.Rerun): the mDNS tests of other processes, such
// as the Windows tests CI runs under wine beside these, would fail. Linux
// only: the sharing rules differ elsewhere (on Windows SO_REUSEADDR would
// take the port over).
func holdMDNSPort(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("simulates a held port with Linux's bind rules")
	}
	// "udp" on the wildcard is one dual-stack socket: it holds the port
	// for IPv4 too.
	held, err := net.ListenUDP("udp", &net.UDPAddr{Port: 5353})
	if err != nil {
		t.Skipf("cannot hold UDP 5353, an mDNS responder probably runs here: %v", err)
	}
	t.Cleanup(func() { held.Close() })
}

// offLines returns the log lines that turn discovery off.
func offLines(logs string) []string {
	var out []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "LAN discovery is off") {
			out = append(out, line)
		}
	}
	return out
}

func checkOffLine(t *testing.T, logs, iface string) {
	t.Helper()
	lines := offLines(logs)
	if len(lines) != 1 {
		t.Fatalf("want one line saying discovery is off, got %d:\n%s", len(lines), logs)
	}
	for _, want := range []string{"level=WARN", "iface=" + iface, "--peer", "cannot bind UDP port 5353"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the line lacks %q: %s", want, lines[0])
		}
	}
}

// With UDP 5353 held by a program that does not share it, the node says
// once that LAN discovery is off on the interface and what to do, and
// keeps running: a static peer still syncs with it.
func TestDiscoveryOffWhenPortHeld(t *testing.T) {
	if netnstest.Rerun(t) {
		return
	}
	holdMDNSPort(t)
	lo := loopbackInterface(t)
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	a.start(t, lib, nil)
	logs := &logbuf.Buffer{}
	b.start(t, lib, a.node.Addrs(), func(c *Config) {
		c.MDNS, c.MDNSInterfaces = true, []net.Interface{lo}
		c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, &testLogWriter{t: t}), nil))
	})
	poll.Until(t, "B to reach its static peer A", 5*time.Second, func() bool {
		return connectedTo(b.node, a.id) && connectedTo(a.node, b.id)
	})
	checkOffLine(t, logs.String(), lo.Name)
	// Nothing is left to query: whoever waits for the first round of
	// discovery learns at once that there is none.
	if left := b.node.disc.ifaces; len(left) != 0 {
		t.Errorf("still querying on %v", left)
	}
}

// A query that cannot bind turns discovery off on its interface too, once:
// the next round does not query there again, so the log does not fill up
// with the same failure every backoff period.
func TestQueryOffWhenPortHeld(t *testing.T) {
	if netnstest.Rerun(t) {
		return
	}
	holdMDNSPort(t)
	lo := loopbackInterface(t)
	logs := &logbuf.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := &discovery{
		n:       &Node{ctx: ctx, log: logger},
		ifaces:  []net.Interface{lo},
		entries: make(chan *mdns.ServiceEntry, 64),
		off:     make(map[string]bool),
		query:   mdns.QueryContext,
		logger:  log.New(io.Discard, "", 0),
	}
	d.queryOnce()
	d.queryOnce()
	if !d.isOff(lo.Name) {
		t.Fatalf("discovery still on after a query could not bind:\n%s", logs)
	}
	checkOffLine(t, logs.String(), lo.Name)
}

// Issue 49: where one family's query sockets cannot be bound (IPv4
// multicast without a route in a fresh network namespace) and the other's
// can, discovery works, so nothing is turned off and no WARN line says it
// is; only the failing family stops being queried.
func TestOneFamilyFailingIsNoWarning(t *testing.T) {
	for _, failV6 := range []bool{false, true} {
		logs := &logbuf.Buffer{}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var mu sync.Mutex
		queried := map[bool]int{}
		d := &discovery{
			n:       &Node{ctx: ctx, log: slog.New(slog.NewTextHandler(logs, nil))},
			ifaces:  []net.Interface{{Index: 7, Name: "veth0"}},
			entries: make(chan *mdns.ServiceEntry, 64),
			off:     make(map[string]bool),
			logger:  log.New(io.Discard, "", 0),
			query: func(_ context.Context, p *mdns.QueryParam) error {
				v6 := p.DisableIPv4
				mu.Lock()
				queried[v6]++
				mu.Unlock()
				if v6 == failV6 {
					return errors.New("failed to bind to any multicast udp port")
				}
				return nil
			},
		}
		d.queryOnce()
		d.queryOnce()
		if d.isOff("veth0") || len(offLines(logs.String())) > 0 {
			t.Fatalf("failing ipv6=%v: discovery turned off although the other family works:\n%s", failV6, logs)
		}
		if queried[failV6] != 1 || queried[!failV6] != 2 {
			t.Errorf("failing ipv6=%v: queried %v, want the failing family once and the other every round", failV6, queried)
		}
	}
}
