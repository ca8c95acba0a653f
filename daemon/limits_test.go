package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/connlimit"
	"github.com/danyue/danyue/internal/poll"
)

// testLimits caps every listener at capN connections, with a body timeout
// of body and header and idle timeouts long enough that no connection of a
// test ends by itself.
// clientTimeout bounds a test client's request to a full listener: well
// under testLimits' idle and header timeouts, so that a client left to
// wait for a connection to time out fails, and long enough for a kosync
// key to be verified (argon2id) under -race on a loaded machine.
const clientTimeout = 20 * time.Second

func testLimits(capN int, body time.Duration) *limits {
	l := listenerLimits{
		conns:      connlimit.Limits{Max: capN, PerAddr: capN, WriteStall: 5 * time.Second},
		readHeader: time.Minute,
		body:       body,
		idle:       time.Minute,
	}
	return &limits{local: l, tcp: l, kosync: l}
}

// slowConns opens n connections to addr, each sending what its kind sends
// and then nothing, and closes them when the test ends.
func slowConns(t *testing.T, addr string, n int, send string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, send); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	return conns
}

// closedWithin reports whether the server closes c within d, reading (and
// dropping) whatever it answers first.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// A full TCP listener makes room for a new client: connections that have
// not finished their headers go first. The local endpoint has slots of its
// own.
func TestFullTCPListenerStillServes(t *testing.T) {
	const capN, extra = 4, 4
	d := startDaemon(t, func(c *Config) {
		c.HTTP = "127.0.0.1:0"
		c.limits = testLimits(capN, time.Minute)
	})
	hostile := slowConns(t, d.HTTPAddr(), capN+extra, "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")

	if _, err := d.client.Status(ctxT(t)); err != nil {
		t.Fatalf("unix socket while TCP is full: %v", err)
	}
	client := &http.Client{Timeout: clientTimeout}
	req, _ := http.NewRequest("GET", "http://"+d.HTTPAddr()+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("TCP while full of slow connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("TCP while full: status %d", resp.StatusCode)
	}
	// The cap held: at least extra+1 of the slow ones were closed.
	closed := 0
	for _, c := range hostile {
		if closedWithin(c, 100*time.Millisecond) {
			closed++
		}
	}
	if closed < extra+1 {
		t.Fatalf("%d of %d slow connections closed, want at least %d (cap %d)", closed, len(hostile), extra+1, capN)
	}
}

// The local endpoint has a cap of its own: flooding it does not take the
// daemon's descriptors, and a new client still gets in.
func TestFullLocalEndpointStillServes(t *testing.T) {
	const capN = 4
	d := startDaemon(t, func(c *Config) { c.limits = testLimits(capN, time.Minute) })
	var hostile []net.Conn
	for range capN + 4 {
		c, err := dialLocal(d.Socket())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: danyue\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
		hostile = append(hostile, c)
	}
	if _, err := d.client.Status(ctxT(t)); err != nil {
		t.Fatalf("unix socket full of slow connections: %v", err)
	}
	closed := 0
	for _, c := range hostile {
		if closedWithin(c, 100*time.Millisecond) {
			closed++
		}
	}
	if closed < 5 {
		t.Fatalf("%d of %d slow connections closed, want at least 5 (cap %d)", closed, len(hostile), capN)
	}
}

// A body that does not arrive within the body timeout ends the request and
// its connection.
func TestTricklingBodyIsCut(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.limits = testLimits(16, 200*time.Millisecond) })
	c, err := dialLocal(d.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "PUT /v1/books/" + strings.Repeat("a", 16) + "/position HTTP/1.1\r\nHost: danyue\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("a stalled body held its connection past the body timeout")
	}
}

// The TCP API checks the token, and kosync the account, before reading a
// body: a request without them is answered at once and its connection
// closed, whatever its Content-Length promises.
func TestBadAuthIsAnsweredBeforeTheBody(t *testing.T) {
	d := startDaemon(t, func(c *Config) {
		c.HTTP = "127.0.0.1:0"
		c.Kosync = "127.0.0.1:0"
		c.limits = testLimits(16, time.Minute) // not what ends it
	})
	tests := []struct {
		name, addr, head string
	}{
		{"api", d.HTTPAddr(), "PUT /v1/books/" + strings.Repeat("a", 16) + "/position HTTP/1.1\r\nAuthorization: Bearer nope\r\n"},
		{"kosync", d.KosyncAddr(), "PUT /syncs/progress HTTP/1.1\r\nx-auth-user: alice\r\nx-auth-key: " + aliceKey + "\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := tt.head + "Host: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{"
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer while the body is pending: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
				t.Fatalf("status %d, close %v; want 401 and the connection closed", resp.StatusCode, resp.Close)
			}
			if !closedWithin(c, 10*time.Second) {
				t.Fatal("the connection stayed open after the 401")
			}
		})
	}
}

// Idle keep-alive connections filling kosync's cap are closed to make room
// for a new client, instead of locking it out.
func TestKosyncIdleConnectionsDoNotLockOut(t *testing.T) {
	const capN = 4
	d := startDaemon(t, func(c *Config) {
		c.Kosync = "127.0.0.1:0"
		c.limits = testLimits(capN, time.Minute)
	})
	if _, err := d.client.KosyncAddUser(ctxT(t), "alice", aliceKey); err != nil {
		t.Fatal(err)
	}
	auth := func(client *http.Client) (int, error) {
		req, _ := http.NewRequest("GET", "http://"+d.KosyncAddr()+"/users/auth", nil)
		req.Header.Set("x-auth-user", "alice")
		req.Header.Set("x-auth-key", aliceKey)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Each keep-alive client holds one idle connection after its request.
	for i := range capN + 2 {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		if code, err := auth(&http.Client{Transport: tr, Timeout: clientTimeout}); err != nil || code != 200 {
			t.Fatalf("keep-alive client %d: %d, %v", i, code, err)
		}
	}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: clientTimeout}
	if code, err := auth(fresh); err != nil || code != 200 {
		t.Fatalf("new client with the listener full of idle connections: %d, %v", code, err)
	}
}

// The event stream is not cut by any of the timeouts: it has no write
// timeout, only a stall limit on each write, and no body. The stall limit
// is the longest here: a write to a Windows pipe under wine waits for the
// reader, which a loaded machine may not run for tens of milliseconds, and
// the idle wait below still passes it.
func TestEventStreamOutlivesTimeouts(t *testing.T) {
	lim := testLimits(16, 50*time.Millisecond)
	lim.local.idle = 50 * time.Millisecond
	lim.local.conns.WriteStall = 400 * time.Millisecond
	d := startDaemon(t, func(c *Config) { c.limits = lim })
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	got := make(chan string, 1)
	ended := make(chan error, 1)
	go func() {
		ended <- d.client.Events(ctx, func(e client.Event) error {
			got <- e.Type
			return nil
		})
	}()
	poll.Until(t, "the stream to subscribe", 5*time.Second, func() bool { return d.hub.count() == 1 })
	// Several times every timeout pass: waiting for time itself, not for
	// something to happen.
	time.Sleep(time.Second)
	d.hub.publish(Event{Type: "ping", Data: struct{}{}})
	select {
	case typ := <-got:
		if typ != "ping" {
			t.Fatalf("event %q, want ping", typ)
		}
	case err := <-ended:
		t.Fatalf("the event stream ended while idle: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event on the stream")
	}
	cancel()
	<-ended
}

// The TCP listeners together never take more than a quarter of the open
// files limit (down to a floor of a few connections each), and the local
// endpoint keeps a cap of its own.
func TestBudget(t *testing.T) {
	tests := []struct {
		nofile                   uint64
		wantTCP, wantK, wantLocl int
	}{
		{0, 1024, 256, 512}, // unknown (Windows): 8192
		{1024, 128, 128, 64},
		{20000, 1024, 256, 512},
		{1 << 40, 1024, 256, 512},
		{64, 16, 16, 16}, // the floor
	}
	for _, tt := range tests {
		b := budget(tt.nofile)
		if b.tcp.conns.Max != tt.wantTCP || b.kosync.conns.Max != tt.wantK || b.local.conns.Max != tt.wantLocl {
			t.Errorf("budget(%d): tcp %d kosync %d local %d, want %d %d %d", tt.nofile,
				b.tcp.conns.Max, b.kosync.conns.Max, b.local.conns.Max, tt.wantTCP, tt.wantK, tt.wantLocl)
		}
		if n := tt.nofile; n >= 128 && uint64(b.tcp.conns.Max+b.kosync.conns.Max) > n/4 {
			t.Errorf("budget(%d): TCP listeners take %d, more than a quarter", n, b.tcp.conns.Max+b.kosync.conns.Max)
		}
		for _, l := range []listenerLimits{b.local, b.tcp, b.kosync} {
			if l.readHeader <= 0 || l.body <= 0 || l.idle <= 0 || l.conns.WriteStall <= 0 {
				t.Errorf("budget(%d): a timeout is missing: %+v", tt.nofile, l)
			}
		}
		if b.kosync.conns.PerAddr <= 0 || b.kosync.conns.PerAddr > b.kosync.conns.Max || b.tcp.conns.PerAddr <= 0 {
			t.Errorf("budget(%d): per-address caps %d, %d", tt.nofile, b.tcp.conns.PerAddr, b.kosync.conns.PerAddr)
		}
	}
}
