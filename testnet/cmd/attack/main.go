// Command attack holds many slow connections open against danyue's HTTP
// listeners (the TCP API, kosync) and meanwhile times legitimate requests
// on another endpoint, to show whether the listeners' limits keep the
// daemon serving. Hostile connections come in three kinds, mixed evenly:
//
//   - trickle: request headers, one byte every few seconds, never finished;
//   - body: complete headers with Content-Length: 200000, one body byte,
//     then nothing;
//   - idle: a keep-alive connection sending one request every 50 s.
//
// A connection the server closes is opened again after -reconnect, so the
// attack keeps trying to hold N. Run it on loopback only; raise `ulimit -n`
// above the total N first, or split N over several processes where the
// hard limit is lower (the measuring one with -legit-* flags).
//
//	go run ./testnet/cmd/attack -attack 127.0.0.1:7298=20000 -attack 127.0.0.1:7299=300 \
//	    -legit-unix /tmp/x/api.sock -legit-url http://127.0.0.1:7299/users/auth \
//	    -legit-header 'x-auth-user: alice' -legit-header "x-auth-key: $(printf pw | md5sum | cut -c1-32)"
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type attackFlag []target

type target struct {
	addr string
	n    int
}

func (a *attackFlag) String() string { return fmt.Sprint(*a) }

func (a *attackFlag) Set(s string) error {
	addr, n, ok := strings.Cut(s, "=")
	v, err := strconv.Atoi(n)
	if !ok || err != nil || v < 0 {
		return fmt.Errorf("want host:port=N, not %q", s)
	}
	*a = append(*a, target{addr, v})
	return nil
}

func main() {
	var attacks attackFlag
	flag.Var(&attacks, "attack", "host:port=N: hold N hostile connections on that TCP listener (repeatable)")
	kinds := flag.String("kinds", "trickle,body,idle", "kinds of hostile connection, mixed evenly")
	bodyPath := flag.String("body-path", "/syncs/progress", "path of the body and idle requests")
	reconnect := flag.Duration("reconnect", time.Second, "wait before reopening a connection the server closed")
	ramp := flag.Int("ramp", 4000, "hostile connections opened per second at most")
	legitUnix := flag.String("legit-unix", "", "unix socket of the API to time legitimate requests on, a new connection each")
	legitUnixPath := flag.String("legit-unix-path", "/v1/status", "path requested on -legit-unix")
	legitURL := flag.String("legit-url", "", "URL to time legitimate requests on, a new connection each (as KOReader does)")
	legitFrom := flag.String("legit-from", "", "local IP the -legit-url requests come from (another loopback address stands for another LAN device)")
	var legitHeaders headerFlag
	flag.Var(&legitHeaders, "legit-header", "Name: value sent with -legit-url requests (repeatable; x-auth-user and x-auth-key for kosync)")
	every := flag.Duration("every", 50*time.Millisecond, "interval between legitimate requests on each endpoint")
	timeout := flag.Duration("timeout", 5*time.Second, "a legitimate request slower than this is lost")
	warmup := flag.Duration("warmup", 10*time.Second, "time to open the hostile connections before timing")
	duration := flag.Duration("duration", 60*time.Second, "time legitimate requests are timed for")
	flag.Parse()
	if len(attacks) == 0 && *legitUnix == "" && *legitURL == "" {
		flag.Usage()
		os.Exit(2)
	}
	ks := strings.Split(*kinds, ",")
	for _, k := range ks {
		if k != "trickle" && k != "body" && k != "idle" {
			fmt.Fprintf(os.Stderr, "unknown kind %q\n", k)
			os.Exit(2)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	stats := make([]*hostileStats, len(attacks))
	pace := time.NewTicker(time.Second / time.Duration(max(*ramp, 1)))
	defer pace.Stop()
	for i, a := range attacks {
		stats[i] = &hostileStats{}
		for j := range a.n {
			h := hostile{addr: a.addr, kind: ks[j%len(ks)], path: *bodyPath, reconnect: *reconnect, st: stats[i], pace: pace.C}
			wg.Go(func() { h.run(ctx) })
		}
	}
	report := func(label string) {
		for i, a := range attacks {
			s := stats[i]
			fmt.Printf("%s hostile %s: want %d, open %d (peak %d), opened %d, closed by server %d, dial errors %d\n",
				label, a.addr, a.n, s.open.Load(), s.peak.Load(), s.opened.Load(), s.closed.Load(), s.dialErr.Load())
		}
	}
	fmt.Printf("warming up %s\n", *warmup)
	time.Sleep(*warmup)
	report("after warmup:")

	legit := probers(*legitUnix, *legitUnixPath, *legitURL, *legitFrom, legitHeaders, *timeout)
	end := time.Now().Add(*duration)
	var pwg sync.WaitGroup
	for _, p := range legit {
		pwg.Go(func() { p.run(end, *every) })
	}
	pwg.Wait()
	if len(legit) == 0 {
		time.Sleep(time.Until(end))
	}
	report("at end:")
	for _, p := range legit {
		p.report()
	}
	cancel()
	wg.Wait()
}

// probers returns the legitimate clients to time: one on the API's unix
// socket unixSock (path unixPath), one on url from the local address
// from; each makes a new connection per request.
func probers(unixSock, unixPath, url, from string, header headerFlag, timeout time.Duration) []*prober {
	var legit []*prober
	if unixSock != "" {
		sock := unixSock
		// A new connection each, as every danyue command makes one.
		tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}
		legit = append(legit, &prober{name: "unix " + sock + unixPath, url: "http://danyue" + unixPath, client: &http.Client{Transport: tr, Timeout: timeout}})
	}
	if url != "" {
		d := &net.Dialer{}
		if from != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
		}
		tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}
		legit = append(legit, &prober{name: url, url: url, header: header, client: &http.Client{Transport: tr, Timeout: timeout}})
	}
	return legit
}

type headerFlag []string

func (h *headerFlag) String() string { return strings.Join(*h, ", ") }

func (h *headerFlag) Set(s string) error {
	if !strings.Contains(s, ":") {
		return fmt.Errorf("want Name: value, not %q", s)
	}
	*h = append(*h, s)
	return nil
}

type hostileStats struct {
	open, peak, opened, closed, dialErr atomic.Int64
}

func (s *hostileStats) up() {
	n := s.open.Add(1)
	s.opened.Add(1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// hostile is one slot of the attack: it keeps one connection of its kind
// open, reopening it when the server closes it.
type hostile struct {
	addr, kind, path string
	reconnect        time.Duration
	st               *hostileStats
	pace             <-chan time.Time
}

func (h hostile) run(ctx context.Context) {
	for ctx.Err() == nil {
		select {
		case <-h.pace:
		case <-ctx.Done():
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", h.addr)
		if err != nil {
			h.st.dialErr.Add(1)
		} else {
			h.st.up()
			h.hold(ctx, c)
			c.Close()
			h.st.open.Add(-1)
			if ctx.Err() == nil {
				h.st.closed.Add(1)
			}
		}
		select {
		case <-time.After(h.reconnect):
		case <-ctx.Done():
			return
		}
	}
}

// hold plays the connection's kind until the server closes it.
func (h hostile) hold(ctx context.Context, c net.Conn) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	host := "Host: 127.0.0.1\r\n"
	switch h.kind {
	case "trickle":
		if _, err := io.WriteString(c, "GET /v1/status HTTP/1.1\r\n"+host+"X-Slow: "); err != nil {
			return
		}
		for {
			if serverClosed(c, 5*time.Second) {
				return
			}
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
		}
	case "body":
		req := "PUT " + h.path + " HTTP/1.1\r\n" + host + "Content-Type: application/json\r\nContent-Length: 200000\r\n\r\n{"
		if _, err := io.WriteString(c, req); err != nil {
			return
		}
		for !serverClosed(c, time.Minute) {
		}
	case "idle":
		br := bufio.NewReader(c)
		for {
			if _, err := io.WriteString(c, "GET "+h.path+" HTTP/1.1\r\n"+host+"\r\n"); err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.Close {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(50 * time.Second))
			if _, err := br.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
				return // closed by the server (or it sent something unasked)
			}
		}
	}
}

// serverClosed waits up to d for the server to close c (or answer, which
// it only does to end the request); false if d passed first.
func serverClosed(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	var b [512]byte
	for {
		_, err := c.Read(b[:])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false
		}
		if err != nil {
			return true
		}
		// An answer (408, 401): read on until the close.
	}
}

// prober times legitimate requests on one endpoint.
type prober struct {
	name, url string
	header    []string
	client    *http.Client
	lat       []time.Duration
	lost      []string
}

func (p *prober) run(end time.Time, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for time.Now().Before(end) {
		<-t.C
		start := time.Now()
		err := p.once()
		if err != nil {
			p.lost = append(p.lost, err.Error())
			continue
		}
		p.lat = append(p.lat, time.Since(start))
	}
}

func (p *prober) once() error {
	req, err := http.NewRequest("GET", p.url, nil)
	if err != nil {
		return err
	}
	for _, h := range p.header {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func (p *prober) report() {
	slices.Sort(p.lat)
	q := func(f float64) time.Duration {
		if len(p.lat) == 0 {
			return 0
		}
		return p.lat[min(len(p.lat)-1, int(f*float64(len(p.lat))))]
	}
	total := len(p.lat) + len(p.lost)
	fmt.Printf("legit %s: %d requests, %d lost, p50 %s, p99 %s, max %s\n",
		p.name, total, len(p.lost), q(0.50).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), q(1).Round(10*time.Microsecond))
	if len(p.lost) > 0 {
		fmt.Printf("  first lost: %s\n", p.lost[0])
	}
}
