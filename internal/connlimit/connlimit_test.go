package connlimit

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
)

// serve runs an http.Server on a Listener with lim; its handler reads the
// whole body and answers 200, except on /block, where it waits until the
// test ends.
func serve(t *testing.T, lim Limits) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, lim)
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/block" {
			<-release
		}
	})
	srv := &http.Server{Handler: l.Handler(h, time.Minute), ConnState: l.ConnState, ConnContext: ConnContext}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { close(release); srv.Close(); <-done })
	return l
}

// phases returns how many connections are in each phase.
func (l *Listener) phases() map[phase]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[phase]int{}
	for p := range l.lists {
		for c := l.lists[p].head; c != nil; c = c.next {
			out[phase(p)]++
		}
	}
	return out
}

func dial(t *testing.T, l *Listener, from string, send string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, send); err != nil {
		t.Fatal(err)
	}
	return c
}

func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

const (
	partialHeader = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "
	fullRequest   = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	blocking      = "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"
	partialBody   = "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"
)

// When full, the listener closes an idle connection first, then one that
// has not sent its headers, then one stalled in its body: oldest first.
func TestEvictionOrder(t *testing.T) {
	l := serve(t, Limits{Max: 3})
	idle := dial(t, l, "127.0.0.1", fullRequest)
	fresh := dial(t, l, "127.0.0.1", partialHeader)
	body := dial(t, l, "127.0.0.1", partialBody)
	poll.Until(t, "one connection in each phase", 10*time.Second, func() bool {
		p := l.phases()
		return p[phaseIdle] == 1 && p[phaseFresh] == 1 && p[phaseBody] == 1
	})
	// The new connections' handlers run on, so they are not evicted.
	for i, victim := range []net.Conn{idle, fresh, body} {
		dial(t, l, "127.0.0.1", blocking)
		if !closed(victim) {
			t.Fatalf("new connection %d: the connection expected to make room is open", i+1)
		}
		poll.Until(t, "the new connection's handler to run", 10*time.Second, func() bool {
			p := l.phases()
			return p[phaseIdle]+p[phaseFresh]+p[phaseBody] == 2-i
		})
	}
	if s := l.Stats(); s.Open != 3 || s.Evicted != 3 || s.Refused != 0 {
		t.Fatalf("stats %+v, want 3 open, 3 evicted", s)
	}
}

// One address cannot take another's slots: its connections beyond
// PerAddr make room among its own.
func TestPerAddressCap(t *testing.T) {
	l := serve(t, Limits{Max: 10, PerAddr: 2})
	other := dial(t, l, "127.0.0.2", partialHeader)
	var mine []net.Conn
	for range 4 {
		mine = append(mine, dial(t, l, "127.0.0.1", partialHeader))
	}
	poll.Until(t, "two evictions", 10*time.Second, func() bool { return l.Stats().Evicted == 2 })
	if closed(other) {
		t.Fatal("another address's connection was closed")
	}
	if !closed(mine[0]) || !closed(mine[1]) || closed(mine[3]) {
		t.Fatal("not the oldest connections of the address were closed")
	}
	if s := l.Stats(); s.Open != 3 {
		t.Fatalf("stats %+v, want 3 open", s)
	}
}

// A listener full of connections whose handlers run refuses new ones
// instead of cutting a request being answered.
func TestBusyConnectionsAreNotEvicted(t *testing.T) {
	l := serve(t, Limits{Max: 2})
	busy := []net.Conn{dial(t, l, "127.0.0.1", blocking), dial(t, l, "127.0.0.1", blocking)}
	poll.Until(t, "two busy connections", 10*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.open == 2 && l.lists[phaseIdle].head == nil && l.lists[phaseFresh].head == nil
	})
	refused := dial(t, l, "127.0.0.1", fullRequest)
	if !closed(refused) {
		t.Fatal("a new connection was held while every slot was busy")
	}
	for _, c := range busy {
		if closed(c) {
			t.Fatal("a busy connection was closed to make room")
		}
	}
	if s := l.Stats(); s.Refused != 1 || s.Evicted != 0 {
		t.Fatalf("stats %+v, want 1 refused, none evicted", s)
	}
}

func TestMachineKey(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"192.168.1.7:51000", "192.168.1.7"},
		{"[::ffff:192.168.1.7]:51000", "192.168.1.7"},
		{"[2001:db8:1:2:aaaa::1]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:443", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:7200", "fe80::1"},
		{"[::1]:7200", "::1"},
		{"not an address", "not an address"},
	} {
		if got := MachineKey(tc.remote); got != tc.want {
			t.Errorf("MachineKey(%q) = %q, want %q", tc.remote, got, tc.want)
		}
	}
}
