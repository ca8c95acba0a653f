package kosync

import (
	"container/list"
	"sync"
	"time"
)

// guessLimiter bounds the slow verifications one key (an account name, or a
// remote address) may cause: the first free guesses go through at once, the
// last of them locks the key for base, and each one after a lock locks it
// for twice as long as the one before (up to maxLock). A key quiet for
// forgetAfter past its lock starts afresh, and a successful sign-in
// forgives its account and is refunded to its address.
//
// A guess is charged before it is verified, not after it fails: a burst of
// concurrent guesses cannot all pass the check before the first failure is
// recorded. With the defaults an account sees at most 7 verifications in
// its first minute under attack (at 0 s five, then at 10 s and 30 s) and
// fewer every minute after.
//
// Memory is bounded: at most max keys are tracked, and past that the key
// touched longest ago is forgotten.
type guessLimiter struct {
	free        int
	base        time.Duration
	maxLock     time.Duration
	forgetAfter time.Duration
	max         int

	mu   sync.Mutex
	ll   *list.List // of *guessState, most recently charged first
	keys map[string]*list.Element
	seq  uint64 // charges ever made, numbering them for refund
}

type guessState struct {
	key    string
	n      int       // guesses charged
	last   time.Time // when the last was
	locked time.Time // no guess before this
	seq    uint64    // the number of the last charge
	first  uint64    // the number of the charge that made this state
}

// ticket is what refund needs to take back one charge: its number, and
// the key's last guess and lock from before it.
type ticket struct {
	key          string
	seq          uint64 // 0: nothing was charged
	last, locked time.Time
}

// limits are the guess limits the handler applies to both accounts and
// addresses.
type limits struct {
	free        int
	base        time.Duration
	maxLock     time.Duration
	forgetAfter time.Duration
	maxKeys     int
}

var defaultLimits = limits{free: 5, base: 10 * time.Second, maxLock: 15 * time.Minute, forgetAfter: time.Hour, maxKeys: 4096}

func newGuessLimiter(l limits) *guessLimiter {
	return &guessLimiter{free: l.free, base: l.base, maxLock: l.maxLock, forgetAfter: l.forgetAfter, max: l.maxKeys,
		ll: list.New(), keys: map[string]*list.Element{}}
}

// wait returns how long key must wait before its next guess, 0 if none.
// The caller holds mu.
func (g *guessLimiter) wait(now time.Time, key string) time.Duration {
	el, ok := g.keys[key]
	if !ok {
		return 0
	}
	s := el.Value.(*guessState)
	if now.Sub(s.locked) > g.forgetAfter && now.Sub(s.last) > g.forgetAfter {
		g.ll.Remove(el)
		delete(g.keys, key)
		return 0
	}
	return max(s.locked.Sub(now), 0)
}

// charge counts a guess for key, sets its next lock and returns the ticket
// that refunds it. The caller holds mu.
func (g *guessLimiter) charge(now time.Time, key string) ticket {
	el, ok := g.keys[key]
	if !ok {
		el = g.ll.PushFront(&guessState{key: key, first: g.seq + 1})
		g.keys[key] = el
		for g.ll.Len() > g.max {
			old := g.ll.Back()
			g.ll.Remove(old)
			delete(g.keys, old.Value.(*guessState).key)
		}
	}
	g.ll.MoveToFront(el)
	s := el.Value.(*guessState)
	t := ticket{key: key, last: s.last, locked: s.locked}
	g.seq++
	s.seq, t.seq = g.seq, g.seq
	s.n++
	s.last = now
	if over := s.n - g.free; over >= 0 {
		lock := g.maxLock
		if over <= 30 && g.base<<over < g.maxLock {
			lock = g.base << over
		}
		s.locked = now.Add(lock)
	}
	return t
}

// forgive forgets key, after it proved itself.
func (g *guessLimiter) forgive(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if el, ok := g.keys[key]; ok {
		g.ll.Remove(el)
		delete(g.keys, key)
	}
}

// refund takes back the guess charged with t, after it turned out not to
// be one (a sign-in that succeeded): one guess fewer and, if no guess was
// charged to the key since, its lock and last guess as they were before;
// a key back under its free guesses is unlocked. An address from which a
// household's devices sign in is then not locked by their successes, and a
// success right after a lock does not leave behind the longer lock its own
// charge set. A key forgotten meanwhile stays forgotten.
func (g *guessLimiter) refund(t ticket) {
	g.mu.Lock()
	defer g.mu.Unlock()
	el, ok := g.keys[t.key]
	if !ok || t.seq == 0 || el.Value.(*guessState).first > t.seq {
		return
	}
	s := el.Value.(*guessState)
	if s.n > 0 {
		s.n--
	}
	if s.seq == t.seq {
		s.last, s.locked = t.last, t.locked
	}
	if s.n < g.free {
		s.locked = time.Time{}
	}
}

func (g *guessLimiter) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ll.Len()
}
