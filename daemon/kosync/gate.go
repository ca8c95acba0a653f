package kosync

import (
	"container/list"
	"sync"
	"time"
)

// gate decides, before anything about a key is looked at, whether a
// sign-in attempt may learn anything about its key. It holds the two guess
// limiters, per remote address and per account, and the hosts each account
// signed in from since the daemon started.
//
// The rules, and why:
//
//   - An address over its limit is refused, whatever account and key it
//     sends: a key that passed before is not looked up either, so a locked
//     address cannot tell a right key from a wrong one, by the answer or by
//     its time.
//   - An account over its limit refuses hosts that never signed in to it:
//     guesses spread over many addresses still meet one limit. A host that
//     did sign in to it is held to its own address's limit only, so
//     guesses from elsewhere do not lock the owner's devices out. (A host
//     is known per account: signing in to an account of one's own proves
//     nothing about another.)
//   - Past both, a pair that passed before (the cache) is a success and
//     costs nothing. Any other attempt is a guess, charged to the address
//     and, from a host the account does not know, to the account, before
//     its key is verified: so a cache lookup is never free to a guesser,
//     and concurrent guesses cannot all pass before the first is counted.
//
// What remains: hosts that share an address key (every process on this
// machine on loopback, a network behind one NAT address, an IPv6 /64) share
// its limit, so a guesser among them can lock the others out of it for a
// while; and after a restart no host is known, so a device that has not
// signed in since waits out a lock on its account like anyone.
type gate struct {
	accounts, addrs *guessLimiter
	known           *knownHosts
}

func newGate(l limits) *gate {
	return &gate{accounts: newGuessLimiter(l), addrs: newGuessLimiter(l), known: newKnownHosts(knownHostsMax)}
}

// knownHostsMax bounds the (host, account) pairs remembered: a household's
// devices and accounts, with room to spare. Only a success adds one.
const knownHostsMax = 1024

// lockKind says which limit refused an attempt.
type lockKind int

const (
	notLocked lockKind = iota
	addressLocked
	accountLocked
)

// admission is the gate's decision on one attempt.
type admission struct {
	wait time.Duration // > 0: refused for this long, nothing charged
	lock lockKind
	// cached: the cache holds the pair, nothing was charged; the caller
	// checks it against the account's verifier.
	cached bool
	// known: the host signed in to the account before; its account was
	// not charged.
	known bool
	// The charges to refund if the key passes.
	addr, account ticket
}

// addressWait returns how long addr must wait, 0 if it may try.
func (g *gate) addressWait(now time.Time, addr string) time.Duration {
	g.addrs.mu.Lock()
	defer g.addrs.mu.Unlock()
	return g.addrs.wait(now, addr)
}

// admit decides on an attempt at the account user from host, whose address
// key is addr (connlimit.MachineKey). cached reports whether the cache holds
// the attempt's pair; it is called only once the attempt passed both
// limits, under their locks, so that the lookup and the charge of a miss are
// one step.
func (g *gate) admit(now time.Time, addr, host, user string, cached func() bool) admission {
	g.accounts.mu.Lock()
	defer g.accounts.mu.Unlock()
	g.addrs.mu.Lock()
	defer g.addrs.mu.Unlock()
	if w := g.addrs.wait(now, addr); w > 0 {
		return admission{wait: w, lock: addressLocked}
	}
	a := admission{known: g.known.has(host, user)}
	if !a.known {
		if w := g.accounts.wait(now, user); w > 0 {
			return admission{wait: w, lock: accountLocked}
		}
	}
	if cached() {
		a.cached = true
		return a
	}
	a.addr = g.addrs.charge(now, addr)
	if !a.known {
		a.account = g.accounts.charge(now, user)
	}
	return a
}

// passed records that the attempt a, at user from host, proved its key:
// the account is forgiven, the address refunded, and the host known to the
// account.
func (g *gate) passed(a admission, host, user string) {
	g.accounts.forgive(user)
	g.addrs.refund(a.addr)
	g.known.add(host, user)
}

// knownHosts is a bounded set of (host, account) pairs, least recently
// added or confirmed dropped first.
type knownHosts struct {
	max   int
	mu    sync.Mutex
	ll    *list.List // of knownKey, most recent first
	pairs map[knownKey]*list.Element
}

type knownKey struct{ host, user string }

func newKnownHosts(max int) *knownHosts {
	return &knownHosts{max: max, ll: list.New(), pairs: map[knownKey]*list.Element{}}
}

func (k *knownHosts) has(host, user string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.pairs[knownKey{host, user}]
	return ok
}

func (k *knownHosts) add(host, user string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := knownKey{host, user}
	if el, ok := k.pairs[key]; ok {
		k.ll.MoveToFront(el)
		return
	}
	k.pairs[key] = k.ll.PushFront(key)
	for k.ll.Len() > k.max {
		old := k.ll.Back()
		k.ll.Remove(old)
		delete(k.pairs, old.Value.(knownKey))
	}
}

func (k *knownHosts) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ll.Len()
}
