package kosync

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/logbuf"
)

// clock is a settable clock for the guess limits.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// signinServer serves the protocol as the daemon does (NewServer), with a
// settable clock, a counter of slow verifications and
// a log to read.
type signinServer struct {
	lib          *memLibrary
	url          string
	clock        *clock
	verifies     atomic.Int64
	cacheLookups atomic.Int64
	logs         logbuf.Buffer
}

func startSigninServer(t testing.TB) *signinServer {
	t.Helper()
	s := &signinServer{lib: newMemLibrary(), clock: &clock{now: t0}}
	lim := defaultLimits
	h, err := New(Config{Library: s.lib, Logger: slog.New(slog.NewTextHandler(&s.logs, nil)), now: s.clock.Now, limits: &lim,
		onVerify: func() { s.verifies.Add(1) }, onCacheLookup: func() { s.cacheLookups.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	s.url = serveOnLoopback(t, h)
	return s
}

// clientFrom returns a client whose connections come from the loopback
// address 127.0.0.n, a new connection for every request, or skips the test
// where the system serves only 127.0.0.1.
func clientFrom(t testing.TB, n int) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(n))}}
	if c, err := d.Dial("tcp", strings.TrimPrefix(startedURL(t), "http://")); err != nil {
		t.Skipf("no loopback address 127.0.0.%d here: %v", n, err)
	} else {
		c.Close()
	}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

var probeOnce struct {
	sync.Once
	url string
}

// startedURL is a listener to probe source addresses against.
func startedURL(t testing.TB) string {
	probeOnce.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		probeOnce.url = "http://" + ln.Addr().String()
	})
	return probeOnce.url
}

// authRequest is KOReader's sign-in check: GET /users/auth with its two
// headers, written in the lower case KOReader sends.
func authRequest(url, user, key string) *http.Request {
	req, _ := http.NewRequest("GET", url+"/users/auth", nil)
	req.Header["x-auth-user"] = []string{user}
	req.Header["x-auth-key"] = []string{key}
	return req
}

func authAs(t testing.TB, hc *http.Client, url, user, key string) int {
	t.Helper()
	resp, err := hc.Do(authRequest(url, user, key))
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// 50 wrong guesses at one account, from 10 addresses over 50 connections at
// once, get at most the free guesses through to the verifier, the rest a
// 429; then even the right key from a new address waits out the lock
// without a verification, and passes after it. An unknown account is
// limited the same way, and a device that signed in before the attack
// keeps syncing through it from its own address.
func TestSigninGuessesLimited(t *testing.T) {
	s := startSigninServer(t)
	s.lib.addUser(t, "alice", aliceKey)
	s.lib.addUser(t, "carol", bobKey)
	clients := make([]*http.Client, 10)
	for i := range clients {
		clients[i] = clientFrom(t, 2+i)
	}
	carol := clientFrom(t, 60)
	// carol's device signs in before the attack.
	if st := authAs(t, carol, s.url, "carol", bobKey); st != http.StatusOK {
		t.Fatalf("carol's first sign-in: %d", st)
	}

	for _, tc := range []struct{ name, user string }{{"known account", "alice"}, {"unknown account", "nobody"}} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.verifies.Load()
			var wg sync.WaitGroup
			var passed atomic.Int64
			for i := range 50 {
				wg.Go(func() {
					if st := authAs(t, clients[i%len(clients)], s.url, tc.user, fmt.Sprintf("%032x", i)); st != http.StatusUnauthorized && st != http.StatusTooManyRequests {
						passed.Add(1)
					}
				})
			}
			wg.Wait()
			verified := s.verifies.Load() - before
			if verified > int64(defaultLimits.free) || passed.Load() != 0 {
				t.Fatalf("50 guesses: %d verified (budget %d), %d neither 401 nor 429", verified, defaultLimits.free, passed.Load())
			}
			// Locked: even the right key from a new address is refused
			// without a verification.
			before = s.verifies.Load()
			if st := authAs(t, clientFrom(t, 100), s.url, tc.user, aliceKey); st != http.StatusTooManyRequests {
				t.Errorf("the right key during the lock: %d, want 429", st)
			}
			if n := s.verifies.Load() - before; n != 0 {
				t.Errorf("a guess during the lock was verified (%d)", n)
			}
			// carol, signed in before, is not held up by the attack.
			if st := authAs(t, carol, s.url, "carol", bobKey); st != http.StatusOK {
				t.Errorf("carol during the attack: %d", st)
			}
			s.clock.advance(defaultLimits.maxLock + time.Second)
		})
	}
	// After the lock the right key passes, once slowly and then from the
	// cache.
	before := s.verifies.Load()
	for range 3 {
		if st := authAs(t, clientFrom(t, 101), s.url, "alice", aliceKey); st != http.StatusOK {
			t.Fatalf("alice after the lock: %d", st)
		}
	}
	if n := s.verifies.Load() - before; n != 1 {
		t.Errorf("3 sign-ins after the lock took %d verifications, want 1", n)
	}
	logText := s.logs.String()
	// Each (address, account) failure is logged once of each kind, with
	// the address.
	pair := `msg="kosync sign-in failed" remote=127.0.0.2 user=alice why=`
	verified, refused := strings.Count(logText, pair+`"wrong`), strings.Count(logText, pair+`"refused`)
	if verified > 1 || refused > 1 || verified+refused == 0 {
		t.Errorf("failures from 127.0.0.2 at alice logged %d times verified, %d refused; want at most 1 of each, and one:\n%s", verified, refused, logText)
	}
	if !strings.Contains(logText, "user=nobody") {
		t.Errorf("failures at an unknown account not logged:\n%s", logText)
	}
}

// The failure log is bounded: a flood costs failLogLines lines of each kind
// and a count a minute.
func TestFailLogBounded(t *testing.T) {
	var buf bytes.Buffer
	f := &failLog{log: slog.New(slog.NewTextHandler(&buf, nil)), seen: map[failKey]struct{}{}}
	now := t0
	for m := range 3 {
		for i := range 1000 {
			f.note(now.Add(time.Duration(i)*time.Millisecond), fmt.Sprint("10.0.", i%300), "alice", i%2 == 0)
		}
		now = now.Add(time.Duration(m+1) * time.Minute)
	}
	f.note(now, "10.0.0.1", "alice", true)
	lines := strings.Count(buf.String(), "\n")
	if want := 3*(2*failLogLines+1) + 1; lines != want {
		t.Errorf("3 minutes of 1000 failures logged %d lines, want %d", lines, want)
	}
	if !strings.Contains(buf.String(), fmt.Sprintf("count=%d verified=%d refused=%d", 1000-2*failLogLines, 500-failLogLines, 500-failLogLines)) {
		t.Errorf("no summary count:\n%s", buf.String())
	}
}

// A verifier of the old form passes and is replaced by an argon2id one; a
// verifier changed in the library (another device, a new key) drops the
// cached pair at once.
func TestSigninUpgradeAndInvalidation(t *testing.T) {
	s := startSigninServer(t)
	old := legacyHash(t, aliceKey)
	if err := s.lib.CreateUser(context.Background(), "alice", old); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{}
	if st := authAs(t, hc, s.url, "alice", aliceKey); st != http.StatusOK {
		t.Fatalf("sign-in with a v1 verifier: %d", st)
	}
	now, _, _ := s.lib.UserAuth(context.Background(), "alice")
	if !strings.HasPrefix(now, argonPrefix+":") {
		t.Fatalf("after sign-in the verifier is %q, want argon2id", now)
	}
	if ok, stale := CheckKey(now, aliceKey); !ok || stale {
		t.Fatalf("the upgraded verifier: ok %v stale %v", ok, stale)
	}
	before := s.verifies.Load()
	if st := authAs(t, hc, s.url, "alice", aliceKey); st != http.StatusOK || s.verifies.Load() != before {
		t.Fatalf("second sign-in: %d, %d verifications; want 200 from the cache", st, s.verifies.Load()-before)
	}
	// Another device sets a new key: the old one stops working at once.
	nv, _ := HashKey(bobKey)
	if ok, _ := s.lib.ReplaceAuth(context.Background(), "alice", now, nv); !ok {
		t.Fatal("ReplaceAuth did not replace")
	}
	if st := authAs(t, hc, s.url, "alice", aliceKey); st != http.StatusUnauthorized {
		t.Errorf("the old key after a change: %d, want 401", st)
	}
	if st := authAs(t, hc, s.url, "alice", bobKey); st != http.StatusOK {
		t.Errorf("the new key: %d", st)
	}
	// A stale ReplaceAuth (the record moved on) changes nothing.
	if ok, _ := s.lib.ReplaceAuth(context.Background(), "alice", old, "x"); ok {
		t.Error("ReplaceAuth replaced a verifier that was no longer the old one")
	}
}

// BenchmarkSigninKnownVsUnknown times wrong keys at a known and at an
// unknown account, interleaved, over loopback HTTP, with the guess limits
// out of the way so that every request is verified: the medians are what
// a guesser could tell the two apart by. Run it with -benchtime=5000x for
// 5,000 samples of each.
func BenchmarkSigninKnownVsUnknown(b *testing.B) {
	s := startServer(b, Config{limits: &noLimits})
	s.lib.addUser(b, "alice", aliceKey)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	var known, unknown []time.Duration
	i := 0
	for b.Loop() {
		for _, user := range []string{"alice", "nobody"} {
			key := fmt.Sprintf("%032x", i)
			i++
			start := time.Now()
			if st := authAs(b, hc, s.url, user, key); st != http.StatusUnauthorized {
				b.Fatalf("a wrong key at %s: %d", user, st)
			}
			if user == "alice" {
				known = append(known, time.Since(start))
			} else {
				unknown = append(unknown, time.Since(start))
			}
		}
	}
	slices.Sort(known)
	slices.Sort(unknown)
	b.ReportMetric(float64(known[len(known)/2].Microseconds()), "known-p50-us")
	b.ReportMetric(float64(unknown[len(unknown)/2].Microseconds()), "unknown-p50-us")
}
