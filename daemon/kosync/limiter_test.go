package kosync

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// The cache hits only for the pair that was added, only while the account's
// verifier is the one it passed against, and holds at most its bound.
func TestAuthCache(t *testing.T) {
	c, err := newAuthCache(4)
	if err != nil {
		t.Fatal(err)
	}
	alice := c.id("alice", aliceKey)
	c.add(alice, "verifier-1")
	if !c.has(alice) || c.has(c.id("alice", bobKey)) {
		t.Error("has: the added pair is missing, or another is there")
	}
	for _, tc := range []struct {
		name, user, key, verifier string
		hit                       bool
	}{
		{"the pair", "alice", aliceKey, "verifier-1", true},
		{"another key", "alice", bobKey, "verifier-1", false},
		{"another account", "bob", aliceKey, "verifier-1", false},
		{"name and key run together", "alice" + aliceKey[:1], aliceKey[1:], "verifier-1", false},
		{"the account's verifier changed", "alice", aliceKey, "verifier-2", false},
		// The changed verifier dropped the entry: back to the first is a miss.
		{"and back", "alice", aliceKey, "verifier-1", false},
	} {
		if got := c.hit(c.id(tc.user, tc.key), tc.verifier); got != tc.hit {
			t.Errorf("%s: hit = %v, want %v", tc.name, got, tc.hit)
		}
	}
	if c.id("alice", aliceKey) == c.id("alice", bobKey) {
		t.Error("two keys share an id")
	}
	other, _ := newAuthCache(4)
	if other.id("alice", aliceKey) == alice {
		t.Error("two processes' caches share ids: the HMAC key is not random")
	}

	// The bound: the least recently used goes first.
	for i := range 10 {
		c.add(c.id(fmt.Sprint("user", i), aliceKey), "v")
		if i == 6 {
			c.hit(c.id("user3", aliceKey), "v") // keep user3 fresh
		}
	}
	if c.len() != 4 {
		t.Errorf("cache holds %d entries, bound 4", c.len())
	}
	for user, want := range map[string]bool{"user9": true, "user8": true, "user3": true, "user0": false, "user5": false} {
		if got := c.hit(c.id(user, aliceKey), "v"); got != want {
			t.Errorf("after 10 adds, %s hit = %v, want %v", user, got, want)
		}
	}
}

var testLimits = limits{free: 3, base: 10 * time.Second, maxLock: 80 * time.Second, forgetAfter: time.Hour, maxKeys: 8}

// After free guesses a key waits, twice as long after each further guess,
// up to the cap; it recovers when the lock runs out, is forgotten after a
// quiet hour, and keys are independent.
func TestGuessLimiter(t *testing.T) {
	g := newGuessLimiter(testLimits)
	charge := func(now time.Time, key string) time.Duration {
		g.mu.Lock()
		defer g.mu.Unlock()
		w := g.wait(now, key)
		if w == 0 {
			g.charge(now, key)
		}
		return w
	}
	now := t0
	steps := []struct {
		advance time.Duration
		key     string
		wait    time.Duration
	}{
		{0, "a", 0}, {0, "a", 0}, {0, "a", 0}, // the free guesses; the last locks for 10 s
		{0, "a", 10 * time.Second}, // refused, and costs nothing
		{0, "b", 0},                // another key is not held up
		{9 * time.Second, "a", time.Second},
		{time.Second, "a", 0}, // recovered; locks for 20 s
		{19 * time.Second, "a", time.Second},
		{time.Second, "a", 0},      // 40 s
		{40 * time.Second, "a", 0}, // 80 s
		{80 * time.Second, "a", 0}, // capped at 80 s
		{79 * time.Second, "a", time.Second},
		{time.Second + 2*time.Hour, "a", 0}, // forgotten: free again
		{0, "a", 0}, {0, "a", 0},
		{0, "a", 10 * time.Second},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := charge(now, s.key); got != s.wait {
			t.Fatalf("step %d (+%v, %s): wait %v, want %v", i, s.advance, s.key, got, s.wait)
		}
	}
	g.forgive("a")
	if got := charge(now, "a"); got != 0 {
		t.Errorf("after forgive: wait %v", got)
	}

	// A refund takes back one guess: the last free one charged and
	// refunded leaves the key unlocked; refunds never go below nothing.
	g.forgive("c")
	var last ticket
	for range testLimits.free {
		last = chargeT(g, now, "c")
	}
	if charge(now, "c") == 0 {
		t.Fatal("c not locked after its free guesses")
	}
	g.refund(last)
	if got := charge(now, "c"); got != 0 {
		t.Errorf("after a refund: wait %v", got)
	}
	g.refund(ticket{key: "d", seq: 1})
	g.refund(ticket{})
	for range testLimits.free {
		if got := charge(now, "d"); got != 0 {
			t.Fatalf("refunds of an unknown key blamed it: wait %v", got)
		}
	}
	if charge(now, "d") == 0 {
		t.Error("refunds of an unknown key gave it credit")
	}

	// Memory is bounded: the keys charged longest ago go.
	for i := range 100 {
		charge(now, fmt.Sprint("flood", i))
	}
	if g.len() != testLimits.maxKeys {
		t.Errorf("limiter tracks %d keys, bound %d", g.len(), testLimits.maxKeys)
	}
}

// chargeT charges a guess to key and returns its ticket.
func chargeT(g *guessLimiter, now time.Time, key string) ticket {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.charge(now, key)
}

// A success refunded after a lock leaves the key as it was before its
// charge: not locked for the longer time its own charge set. Refunded
// after another charge, it takes back one guess only; a ticket of a key
// forgotten and charged anew refunds nothing.
func TestRefundUndoesItsCharge(t *testing.T) {
	g := newGuessLimiter(testLimits)
	wait := func(now time.Time, key string) time.Duration {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.wait(now, key)
	}
	now := t0
	for range testLimits.free {
		chargeT(g, now, "a")
	}
	now = now.Add(testLimits.base) // the lock is over
	tk := chargeT(g, now, "a")     // a sign-in that will pass
	if wait(now, "a") != 2*testLimits.base {
		t.Fatalf("the charge did not double the lock: %v", wait(now, "a"))
	}
	g.refund(tk)
	if w := wait(now, "a"); w != 0 {
		t.Errorf("after the success's refund the key waits %v, want 0", w)
	}
	// Charged again since: the refund takes back a guess, the newer lock
	// stands.
	tk = chargeT(g, now, "a")
	chargeT(g, now, "a")
	g.refund(tk)
	if w := wait(now, "a"); w == 0 {
		t.Error("a refund undid a later charge's lock")
	}
	// Forgotten, then charged anew: an old ticket is not this key's.
	g.forgive("a")
	chargeT(g, now, "a")
	for range testLimits.free - 2 {
		chargeT(g, now, "a")
	}
	g.refund(tk)
	chargeT(g, now, "a") // the last free guess
	if wait(now, "a") == 0 {
		t.Error("an old ticket gave a new key credit")
	}
}

// An address over its limit is refused for every account, an account over
// its limit from every host it does not know, and a refused attempt charges
// neither and looks at no cache. A host that signed in to an account is
// held to its address's limit only; a pair in the cache costs nothing.
func TestGateAccountsAddressesAndKnownHosts(t *testing.T) {
	g := newGate(testLimits)
	miss := func() bool { return false }
	hit := func() bool { return true }
	// What an attempt a limit refuses must never call.
	never := func() bool { t.Error("a refused attempt looked at the cache"); return true }
	admit := func(addr, user string, cached func() bool) admission {
		return g.admit(t0, addr, addr, user, cached)
	}
	for i := range testLimits.free {
		if a := admit("10.0.0.1", fmt.Sprint("spray", i), miss); a.wait != 0 {
			t.Fatalf("guess %d from one address refused early", i)
		}
	}
	for i := range 3 {
		if a := admit("10.0.0.1", fmt.Sprint("other", i), never); a.wait == 0 || a.lock != addressLocked {
			t.Errorf("the locked address guessed at another account: %+v", a)
		}
	}
	if g.addressWait(t0, "10.0.0.1") == 0 {
		t.Error("addressWait: the locked address may try")
	}
	// alice's device signed in from 10.0.9.9.
	a := admit("10.0.9.9", "alice", miss)
	g.passed(a, "10.0.9.9", "alice")
	for i := range testLimits.free {
		if a := admit(fmt.Sprint("10.0.1.", i), "alice", miss); a.wait != 0 {
			t.Fatalf("guess %d at alice refused early", i)
		}
	}
	for i := range 3 {
		if a := admit(fmt.Sprint("10.0.2.", i), "alice", never); a.wait == 0 || a.lock != accountLocked {
			t.Errorf("a new address guessed at the locked account: %+v", a)
		}
	}
	// Those refusals charged nothing: a fresh address still has its free
	// guesses at a fresh account.
	if a := admit("10.0.2.0", "bob", miss); a.wait != 0 {
		t.Error("a refused guess charged its address")
	}
	// alice's device is not held up by her account's lock, a pair in
	// the cache is charged nothing, and a miss only to the address.
	for range 2 * testLimits.free {
		if a := admit("10.0.9.9", "alice", hit); a.wait != 0 || !a.cached || !a.known || a.addr.seq != 0 {
			t.Fatalf("alice's device with a cached key: %+v", a)
		}
	}
	if a := admit("10.0.9.9", "alice", miss); a.wait != 0 || a.cached || a.account.seq != 0 || a.addr.seq == 0 {
		t.Errorf("alice's device with another key: %+v", a)
	}
	// Known per account: 10.0.9.9 is a stranger to carol.
	for i := range testLimits.free {
		admit(fmt.Sprint("10.0.3.", i), "carol", miss)
	}
	if a := admit("10.0.9.9", "carol", never); a.lock != accountLocked {
		t.Errorf("a host known to alice passed carol's lock: %+v", a)
	}
}

// The known hosts are bounded: the least recently confirmed go first.
func TestKnownHostsBounded(t *testing.T) {
	k := newKnownHosts(4)
	for i := range 10 {
		k.add(fmt.Sprint("10.0.0.", i), "alice")
		if i == 6 {
			k.add("10.0.0.3", "alice")
		}
	}
	if k.len() != 4 {
		t.Errorf("%d pairs kept, bound 4", k.len())
	}
	for host, want := range map[string]bool{"10.0.0.9": true, "10.0.0.3": true, "10.0.0.0": false, "10.0.0.5": false} {
		if k.has(host, "alice") != want {
			t.Errorf("%s: has = %v, want %v", host, !want, want)
		}
	}
	if k.has("10.0.0.9", "bob") {
		t.Error("a host known to alice is known to bob")
	}
}
