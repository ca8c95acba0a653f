package kosync

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/danyue/danyue/internal/connlimit"
)

// Signing in, on every request that carries x-auth-user and x-auth-key:
//
//  1. An address over its limit is refused at once (429, with Retry-After),
//     before its headers are read: nothing about its key is looked at, the
//     cache included, so a right and a wrong key get the same answer in the
//     same time.
//  2. The gate (gate.go) then refuses an account over its limit to hosts
//     that never signed in to it, the same way. Past both, a pair that
//     passed before, against the account's verifier as it is now, is a
//     success from the cache: KOReader's requests stay cheap.
//  3. Anything else is a guess, charged to the address (and to the account,
//     from a host it does not know) before the key is checked against the
//     account's verifier, or, for an unknown account, a decoy with the same
//     parameters: both take one argon2id evaluation, and only
//     maxSlowVerifies run at once.
//  4. A failure is 401 and is logged (once per address and account a
//     minute, then as a count); a success forgives the account, refunds the
//     address, makes the host known to the account, replaces an old
//     verifier with an argon2id one, and fills the cache.
//
// A refusal by a limit is 429, not 401: it says that the device must wait,
// not that its password is wrong. KOReader's client expects 200 or 401 from
// these routes, so it takes a 429 as a failed request (a login attempt
// fails without blaming the password; a sync fails with "try again later")
// and keeps the key it has.

const (
	// maxSlowVerifies bounds the argon2id evaluations running at once:
	// each takes defaultParams' memory, and a flood of guesses must not
	// take more of the phone than that.
	maxSlowVerifies = 2
	// authCacheEntries bounds the cache: a household's devices and
	// accounts, with room to spare.
	authCacheEntries = 256
	// failLogWindow and failLogLines bound the failure log: the first
	// failure of each (address, account) pair in a window, at most
	// failLogLines of them, then one line counting the rest.
	failLogWindow = time.Minute
	failLogLines  = 32
)

// signin is the handler's authentication state.
type signin struct {
	lib   Library
	log   *slog.Logger
	now   func() time.Time
	cache *authCache
	gate  *gate
	decoy verifier
	slow  chan struct{}
	fails *failLog
	// For tests: called at each slow verification and at each cache
	// lookup.
	onVerify, onCacheLookup func()
}

func newSignin(cfg Config, log *slog.Logger) (*signin, error) {
	cache, err := newAuthCache(authCacheEntries)
	if err != nil {
		return nil, err
	}
	decoy, err := newDecoy()
	if err != nil {
		return nil, err
	}
	now, lim := cfg.now, defaultLimits
	if now == nil {
		now = time.Now
	}
	if cfg.limits != nil {
		lim = *cfg.limits
	}
	return &signin{
		lib: cfg.Library, log: log, now: now, cache: cache, gate: newGate(lim), decoy: decoy,
		slow: make(chan struct{}, maxSlowVerifies), fails: &failLog{log: log, seen: map[failKey]struct{}{}},
		onVerify: cfg.onVerify, onCacheLookup: cfg.onCacheLookup,
	}, nil
}

// authenticate returns the account the request's x-auth-user and x-auth-key
// headers (any case) prove, or a requestError. It does not say why a pair
// was refused: an unknown account and a wrong key look the same.
func (s *signin) authenticate(ctx context.Context, r *http.Request) (string, error) {
	host := remoteHost(r.RemoteAddr)
	addr := connlimit.MachineKey(r.RemoteAddr)
	now := s.now()
	if wait := s.gate.addressWait(now, addr); wait > 0 {
		// The name only for the log, if it is one.
		user := r.Header.Get("X-Auth-User")
		if ValidUserName(user) != nil {
			user = ""
		}
		return "", s.locked(now, host, user, admission{wait: wait, lock: addressLocked})
	}
	users, keys := r.Header.Values("X-Auth-User"), r.Header.Values("X-Auth-Key")
	if len(users) != 1 || len(keys) != 1 || ValidUserName(users[0]) != nil || ValidKey(keys[0]) != nil {
		return "", errUnauthorized
	}
	user, key := users[0], keys[0]
	// The gate calls inCache only for an attempt it lets through: a
	// refused one computes nothing from its key.
	var id cacheID
	inCache := func() bool {
		if s.onCacheLookup != nil {
			s.onCacheLookup()
		}
		id = s.cache.id(user, key)
		return s.cache.has(id)
	}
	a := s.gate.admit(now, addr, host, user, inCache)
	if a.wait > 0 {
		return "", s.locked(now, host, user, a)
	}
	if a.cached {
		stored, known, err := s.lib.UserAuth(ctx, user)
		if err != nil {
			return "", err
		}
		if known && s.cache.hit(id, stored) {
			s.gate.known.add(host, user)
			return user, nil
		}
		// The account's verifier changed since the pair passed, and
		// hit dropped its entry: the attempt is a guess like any other.
		a = s.gate.admit(now, addr, host, user, func() bool { return false })
		if a.wait > 0 {
			return "", s.locked(now, host, user, a)
		}
	}
	stored, known, err := s.lib.UserAuth(ctx, user)
	if err != nil {
		return "", err
	}
	ok, stale := s.verify(ctx, stored, known, key)
	if !ok {
		s.fails.note(now, host, user, true)
		return "", errUnauthorized
	}
	s.gate.passed(a, host, user)
	if stale {
		stored = s.upgrade(ctx, user, stored, key)
	}
	s.cache.add(id, stored)
	return user, nil
}

// locked is the answer to an attempt a limit refused: the same for every
// key, account name and request, but for how long it must wait.
func (s *signin) locked(now time.Time, host, user string, a admission) error {
	s.fails.note(now, host, user, false)
	msg := "Too many failed sign-ins from this address"
	if a.lock == accountLocked {
		msg = "Too many failed sign-ins at this account from devices it does not know"
	}
	return &requestError{status: http.StatusTooManyRequests, code: codeLocked, retryAfter: a.wait,
		message: fmt.Sprintf("%s: try again in %s. A correct password is refused too until then.", msg, waitText(a.wait))}
}

// waitText writes a lock's length for a person, rounded up: "10 s", "4 min".
func waitText(d time.Duration) string {
	if d <= time.Minute {
		return fmt.Sprintf("%d s", int((d+time.Second-1)/time.Second))
	}
	return fmt.Sprintf("%d min", int((d+time.Minute-1)/time.Minute))
}

// verify checks key against the stored verifier, or the decoy for an
// unknown account or an unreadable verifier, and reports whether it passed
// and whether the verifier should be replaced. A request gone while it
// waits for its turn fails.
func (s *signin) verify(ctx context.Context, stored string, known bool, key string) (ok, stale bool) {
	select {
	case s.slow <- struct{}{}:
	case <-ctx.Done():
		return false, false
	}
	defer func() { <-s.slow }()
	if s.onVerify != nil {
		s.onVerify()
	}
	v := s.decoy
	if known {
		pv, err := parseVerifier(stored)
		if err != nil {
			s.log.Warn("kosync account's key verifier is unreadable; it cannot sign in", "err", err)
			known = false
		} else {
			v = pv
		}
	}
	if v.legacy {
		// The old form is fast: pay argon2id's price anyway, so that an
		// account not yet upgraded does not answer sooner than others.
		s.decoy.check(key)
	}
	ok = v.check(key) && known
	return ok, ok && v.stale()
}

// upgrade replaces the account's verifier old, which key just passed, with
// HashKey's, unless the account changed meanwhile, and returns the verifier
// now stored. Failing, it keeps old: the account still signs in.
func (s *signin) upgrade(ctx context.Context, user, old, key string) string {
	nv, err := s.hashKey(ctx, key)
	if err != nil {
		s.log.Warn("kosync key verifier not upgraded", "user", user, "err", err)
		return old
	}
	replaced, err := s.lib.ReplaceAuth(ctx, user, old, nv)
	switch {
	case err != nil:
		s.log.Warn("kosync key verifier not upgraded", "user", user, "err", err)
		return old
	case !replaced:
		return old
	}
	s.log.Info("kosync key verifier upgraded to argon2id", "user", user)
	return nv
}

// hashKey is HashKey, in turn with the verifications.
func (s *signin) hashKey(ctx context.Context, key string) (string, error) {
	select {
	case s.slow <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-s.slow }()
	return HashKey(key)
}

func remoteHost(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// failLog logs failed sign-ins at info, bounded: the first of each
// (address, account) pair in a minute, failLogLines at most of guesses
// verified and as many of guesses refused unverified by the limits (so a
// flood of refusals cannot hide the verifications), then one line counting
// the rest.
type failLog struct {
	log               *slog.Logger
	mu                sync.Mutex
	window            time.Time
	seen              map[failKey]struct{}
	logged            [2]int // lines of refused, verified failures in this window
	verified, refused int    // not logged one by one in this window
}

// note records a failed sign-in at user from host: verified, a key found
// wrong (or an unknown account); otherwise refused by the limits.
type failKey struct {
	host, user string
	verified   bool
}

func (f *failLog) note(now time.Time, host, user string, verified bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Concurrent requests note in a slightly different order than they
	// read the clock: only a clock stepped back by a whole window starts
	// a new one.
	if d := now.Sub(f.window); d >= failLogWindow || d <= -failLogWindow {
		if n := f.verified + f.refused; n > 0 {
			f.log.Info("kosync failed sign-ins, not logged one by one", "count", n, "verified", f.verified, "refused", f.refused,
				"since", f.window.UTC().Format(time.RFC3339Nano))
		}
		f.window, f.verified, f.refused, f.logged = now, 0, 0, [2]int{}
		clear(f.seen)
	}
	k := failKey{host, user, verified}
	kind := 0
	if verified {
		kind = 1
	}
	if _, ok := f.seen[k]; ok || f.logged[kind] >= failLogLines {
		if verified {
			f.verified++
		} else {
			f.refused++
		}
		return
	}
	f.seen[k] = struct{}{}
	f.logged[kind]++
	why := "refused: too many failed sign-ins"
	if verified {
		why = "wrong key or unknown account"
	}
	f.log.Info("kosync sign-in failed", "remote", host, "user", user, "why", why)
}
