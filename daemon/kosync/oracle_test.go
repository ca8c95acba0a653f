package kosync

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockAnswer is everything a client sees of an answer but the connection.
type lockAnswer struct {
	status     int
	retryAfter string
	body       string
}

func signInFrom(t testing.TB, hc *http.Client, url, user, key string) lockAnswer {
	t.Helper()
	resp, err := hc.Do(authRequest(url, user, key))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return lockAnswer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b)}
}

// counts is what a request may have looked at: the library's verifiers, the
// cache of keys that passed, the slow verifier.
type counts struct{ reads, lookups, verifies int64 }

func (s *signinServer) counts() counts {
	return counts{s.lib.authReads.Load(), s.cacheLookups.Load(), s.verifies.Load()}
}

// checkLock checks that an answer is the lock: 429, Retry-After, and a
// kosync error body whose message says so.
func checkLock(t *testing.T, what string, a lockAnswer) {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != http.StatusTooManyRequests ||
		e.Code != codeLocked || !strings.Contains(e.Message, "Too many failed sign-ins") || a.retryAfter == "" {
		t.Errorf("%s: %d Retry-After %q %s; want 429 with Retry-After and the lock's message", what, a.status, a.retryAfter, a.body)
	}
}

// Issue 47: an account that signed in since the daemon started was an
// oracle. Its pair sat in the cache, which was read before the limits, so
// during a lock a wrong key got 401 and the right one 200, at once, from
// any address. Now a locked address, and an account locked to hosts it
// does not know, get one answer whatever the key (a 429 that says it is a
// lock), and by construction in the same time: that path reads neither the
// library nor the cache, and verifies nothing. The owner's device keeps
// syncing from its own address throughout, and a second account's right
// key from the locked address is told of the lock, not that it is wrong.
func TestLockedIsNoOracle(t *testing.T) {
	s := startSigninServer(t)
	s.lib.addUser(t, "alice", aliceKey)
	s.lib.addUser(t, "bob", bobKey)
	aliceDevice, bobDevice := clientFrom(t, 2), clientFrom(t, 4)
	guesser, stranger := clientFrom(t, 3), clientFrom(t, 5)
	for _, c := range []struct {
		hc        *http.Client
		user, key string
	}{{aliceDevice, "alice", aliceKey}, {bobDevice, "bob", bobKey}} {
		if a := signInFrom(t, c.hc, s.url, c.user, c.key); a.status != http.StatusOK {
			t.Fatalf("%s's device signs in: %+v", c.user, a)
		}
	}
	for i := range defaultLimits.free {
		if a := signInFrom(t, guesser, s.url, "alice", fmt.Sprintf("%032x", i)); a.status != http.StatusUnauthorized {
			t.Fatalf("wrong key %d before the lock: %+v", i, a)
		}
	}

	// The guesser's address is locked: wrong keys, alice's right key and
	// bob's right key all get the same bytes.
	before := s.counts()
	var first lockAnswer
	for i := range 40 {
		user, key := "alice", fmt.Sprintf("%032x", 100+i)
		switch i % 4 {
		case 1:
			key = aliceKey
		case 3:
			user, key = "bob", bobKey
		}
		a := signInFrom(t, guesser, s.url, user, key)
		if i == 0 {
			first = a
			checkLock(t, "a wrong key from the locked address", a)
		} else if a != first {
			t.Fatalf("from the locked address, %s's key %d got %+v; a wrong key got %+v", user, i, a, first)
		}
	}
	if got := s.counts(); got != before {
		t.Errorf("answers to a locked address looked at the library, the cache or the verifier: %+v, then %+v", before, got)
	}

	// alice's account is locked too, for hosts it does not know: a new
	// address gets one answer for her right and wrong keys, again without
	// a look at anything.
	a1, a2 := signInFrom(t, stranger, s.url, "alice", aliceKey), signInFrom(t, stranger, s.url, "alice", bobKey)
	checkLock(t, "alice's right key from a new address", a1)
	if a1 != a2 {
		t.Errorf("from a new address, alice's right key got %+v and a wrong one %+v", a1, a2)
	}
	if got := s.counts(); got != before {
		t.Errorf("answers of the locked account looked at something: %+v, then %+v", before, got)
	}

	// The owners' devices are not held up: each from its own address,
	// from the cache, without a verification.
	for _, c := range []struct {
		hc        *http.Client
		user, key string
	}{{aliceDevice, "alice", aliceKey}, {bobDevice, "bob", bobKey}, {stranger, "bob", bobKey}} {
		if a := signInFrom(t, c.hc, s.url, c.user, c.key); a.status != http.StatusOK {
			t.Errorf("%s during the locks: %+v", c.user, a)
		}
	}
	if got := s.counts(); got.verifies != before.verifies {
		t.Errorf("the owners' devices were verified slowly (%d)", got.verifies-before.verifies)
	}

	// When the locks are over, alice's right key passes from anywhere.
	s.clock.advance(defaultLimits.maxLock)
	for _, hc := range []*http.Client{guesser, stranger} {
		if a := signInFrom(t, hc, s.url, "alice", aliceKey); a.status != http.StatusOK {
			t.Errorf("alice's right key after the locks: %+v", a)
		}
	}
}

// Concurrent guesses from one address, the right key among them, learn
// about no more keys than the address may guess: the cache is looked at
// only by the attempts the gate let through, and each that misses is
// charged before the next is let through.
func TestConcurrentGuessesMeetTheLimit(t *testing.T) {
	s := startSigninServer(t)
	s.lib.addUser(t, "alice", aliceKey)
	if a := signInFrom(t, clientFrom(t, 2), s.url, "alice", aliceKey); a.status != http.StatusOK {
		t.Fatalf("alice's device signs in: %+v", a)
	}
	before := s.counts()
	guesser := clientFrom(t, 3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	status := map[int]int{}
	for i := range 60 {
		wg.Go(func() {
			key := fmt.Sprintf("%032x", i)
			if i == 30 {
				key = aliceKey
			}
			a := signInFrom(t, guesser, s.url, "alice", key)
			mu.Lock()
			status[a.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	got := s.counts()
	if n := got.lookups - before.lookups; n > int64(defaultLimits.free)+1 {
		t.Errorf("60 concurrent attempts looked at the cache %d times; the address may guess %d", n, defaultLimits.free)
	}
	if status[http.StatusOK] > 1 || status[http.StatusTooManyRequests] < 60-defaultLimits.free-1 {
		t.Errorf("answers %v", status)
	}
}

// A lock's wait is written for a person, rounded up like Retry-After.
func TestWaitText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second: "1 s", 9500 * time.Millisecond: "10 s", time.Minute: "60 s",
		time.Minute + time.Second: "2 min", 15 * time.Minute: "15 min",
	} {
		if got := waitText(d); got != want {
			t.Errorf("waitText(%v) = %q, want %q", d, got, want)
		}
	}
}
