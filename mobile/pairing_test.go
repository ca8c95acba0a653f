package mobile

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/pair"
)

// loopbackAddr returns the pairing's address on 127.0.0.1.
func loopbackAddr(t *testing.T, p *Pairing) string {
	t.Helper()
	for a := range strings.SplitSeq(p.Addresses, ",") {
		if strings.HasPrefix(a, "127.0.0.1:") {
			return a
		}
	}
	t.Fatalf("the pairing waits on %q, not on 127.0.0.1", p.Addresses)
	return ""
}

// wrongCode returns a code on code's channel with other words.
func wrongCode(t *testing.T, code string) string {
	t.Helper()
	right, err := pair.ParseCode(code)
	if err != nil {
		t.Fatal(err)
	}
	for {
		c, err := pair.NewCode()
		if err != nil {
			t.Fatal(err)
		}
		if c.Words != right.Words {
			c.Channel = right.Channel
			return c.String()
		}
	}
}

// TestShortCodePairing pairs two nodes with a short code through the
// facade: the inviter opens a pairing and follows it to "paired", the
// joiner joins with the code, both end in one library.
func TestShortCodePairing(t *testing.T) {
	laptop, phone := startNode(t, "laptop"), startNode(t, "phone")
	p, err := laptop.OpenPairing()
	if err != nil {
		t.Fatalf("open pairing: %v", err)
	}
	if p.State != "open" || p.Ended() || p.ID == "" || strings.Count(p.Code, "-") != 2 || p.Expires == "" {
		t.Fatalf("opened pairing = %+v", p)
	}
	if now, err := laptop.Pairing(p.ID); err != nil || *now != *p {
		t.Fatalf("Pairing(%s) = %+v, %v; want %+v", p.ID, now, err, p)
	}
	// Not ended yet: a short wait runs out with the pairing still open.
	if w, err := laptop.WaitPairing(p.ID, 1); err != nil || w.State != "open" {
		t.Fatalf("WaitPairing with 1 ms = %+v, %v; want open", w, err)
	}
	lib, err := phone.JoinAt(p.Code, loopbackAddr(t, p))
	if err != nil {
		t.Fatalf("join with the short code: %v", err)
	}
	got, err := laptop.WaitPairing(p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "paired" || !got.Ended() || got.DeviceName != "phone" || got.Device != phone.Device() || got.Detail == "" {
		t.Fatalf("pairing after the join = %+v", got)
	}
	if st, err := laptop.c.Status(laptop.ctx); err != nil || st.Library.ID != lib {
		t.Fatalf("joined library %s, the laptop's is %+v (%v)", lib, st.Library, err)
	}
	// The code worked once.
	other := startNode(t, "tablet")
	if _, err := other.JoinAt(p.Code, loopbackAddr(t, p)); err == nil {
		t.Fatal("a second join with the spent code succeeded")
	}
}

// TestPairingRefusals checks the ends of a pairing other than "paired":
// a wrong code spends the invitation, cancelling ends it and its wait, an
// unknown id is an error; and a Join cancelled while it waits for an
// inviter that never answers.
func TestPairingRefusals(t *testing.T) {
	laptop, phone := startNode(t, "laptop"), startNode(t, "phone")

	p, err := laptop.OpenPairing()
	if err != nil {
		t.Fatal(err)
	}
	_, err = phone.JoinAt(wrongCode(t, p.Code), loopbackAddr(t, p))
	if code := ErrorCode(err); code != "wrong_code" {
		t.Fatalf("join with a wrong code = %v (code %q), want wrong_code", err, code)
	}
	if got, err := laptop.WaitPairing(p.ID, 0); err != nil || got.State != "wrong_code" || got.TriedBy != "127.0.0.1" || got.Burns < 1 {
		t.Fatalf("pairing after a wrong code = %+v, %v", got, err)
	}

	p, err = laptop.OpenPairing()
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan *Pairing, 1)
	go func() {
		w, _ := laptop.WaitPairing(p.ID, 0)
		waited <- w
	}()
	if c, err := laptop.CancelPairing(p.ID); err != nil || c.State != "cancelled" {
		t.Fatalf("cancel = %+v, %v", c, err)
	}
	select {
	case w := <-waited:
		if w == nil || w.State != "cancelled" {
			t.Fatalf("the wait ended with %+v, want cancelled", w)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("CancelPairing did not end WaitPairing")
	}
	if _, err := laptop.CancelPairing("nope"); err == nil {
		t.Fatal("cancelling an unknown invitation succeeded")
	}
	if _, err := laptop.WaitPairing("nope", 1); err == nil {
		t.Fatal("waiting for an unknown invitation succeeded")
	}

	// An "inviter" that accepts and never answers: the join waits until
	// it is cancelled.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var held sync.WaitGroup
	held.Add(1)
	go func() {
		defer held.Done()
		c, err := silent.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c) // until the joiner goes
		}
	}()
	joined := make(chan error, 1)
	go func() {
		_, err := phone.JoinAt("7-crossover-clockwork", silent.Addr().String())
		joined <- err
	}()
	// Cancel until the join has begun and ends.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case err := <-joined:
			if ErrorCode(err) != "cancelled" {
				t.Fatalf("cancelled join = %v (code %q), want cancelled", err, ErrorCode(err))
			}
			done = true
		case <-tick.C:
			phone.CancelJoin()
		case <-deadline:
			t.Fatal("CancelJoin did not end the join")
		}
	}
	silent.Close()
	held.Wait()
}

// TestAdminIsInProcess checks that the HTTP token an app may hand to a web
// view reads and writes books but cannot invite or pair, while the app's
// own calls can.
func TestAdminIsInProcess(t *testing.T) {
	cfg := NewConfig(t.TempDir())
	cfg.Listen, cfg.NoMDNS, cfg.LogLevel, cfg.HTTP, cfg.PairListen = "/ip4/127.0.0.1/tcp/0", true, "off", "127.0.0.1:0", "127.0.0.1:0"
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	for _, path := range []string{"/v1/invite", "/v1/pairing"} {
		req, _ := http.NewRequest("POST", "http://"+n.APIAddress()+path, nil)
		req.Header.Set("Authorization", "Bearer "+n.APIToken())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s with the HTTP token: %d, want 403", path, resp.StatusCode)
		}
	}
	if code, err := n.Invite(); err != nil || !strings.HasPrefix(code, "danyue1-") {
		t.Errorf("Invite in process = %q, %v", code, err)
	}
	if p, err := n.OpenPairing(); err != nil || p.State != "open" {
		t.Errorf("OpenPairing in process = %+v, %v", p, err)
	}
}

// sinkRecorder is a LogSink that keeps what it was given.
type sinkRecorder struct {
	mu    sync.Mutex
	lines map[int][]string
	busy  sync.Mutex // held during a call: TryLock fails on overlap
	overl bool
}

func (s *sinkRecorder) Log(level int, line string) {
	if !s.busy.TryLock() {
		s.mu.Lock()
		s.overl = true
		s.mu.Unlock()
		return
	}
	defer s.busy.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines[level] = append(s.lines[level], line)
}

// TestLogSink checks that a node logs to the app's sink, at the level set,
// one line a call, and nothing to the sink after Stop.
func TestLogSink(t *testing.T) {
	tests := []struct {
		level     string
		wantDebug bool
	}{
		{"debug", true},
		{"warn", false},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			sink := &sinkRecorder{lines: map[int][]string{}}
			cfg := NewConfig(t.TempDir())
			cfg.Listen, cfg.NoMDNS, cfg.LogLevel, cfg.LogSink = "/ip4/127.0.0.1/tcp/0", true, tt.level, sink
			n, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := n.SetPosition(keyA, 1, 0.1, ""); err != nil {
				t.Fatal(err)
			}
			if err := n.Stop(); err != nil {
				t.Fatal(err)
			}
			sink.mu.Lock()
			defer sink.mu.Unlock()
			if sink.overl {
				t.Error("Log was called concurrently")
			}
			if got := len(sink.lines[-4]) > 0; got != tt.wantDebug {
				t.Errorf("debug lines at level %s: %d", tt.level, len(sink.lines[-4]))
			}
			if len(sink.lines[0]) > 0 && tt.level == "warn" {
				t.Errorf("info lines at level warn: %q", sink.lines[0])
			}
			for level, lines := range sink.lines {
				for _, l := range lines {
					if strings.Contains(l, "\n") || !strings.Contains(l, "level=") || !strings.Contains(l, "msg=") {
						t.Errorf("level %d line %q is not one logfmt line", level, l)
					}
				}
			}
		})
	}
}
