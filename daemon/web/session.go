package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"sync"
	"time"
)

// A login token is shown once, by `danyue open`, and is good for one login
// within tokenTTL; the session it opens lasts sessionTTL. Both live only in
// the daemon's memory: a restart logs every browser out, which is the safe
// side for a page that can read the invite code.
const (
	tokenTTL    = 5 * time.Minute
	sessionTTL  = 12 * time.Hour
	maxTokens   = 32
	maxSessions = 64
)

// session is one logged-in browser. Its cookie is sent to every port of
// the host, so it only lets a browser read the page: acting (a POST) also
// needs the page key, which the daemon hands out once, on the login page,
// for the page's script to keep in the origin's storage and put in each
// form it sends. pageKey is its SHA-256.
type session struct {
	expires time.Time
	pageKey string
}

// checkPageKey reports whether key is the session's page key, in constant
// time.
func (v session) checkPageKey(key string) bool {
	return subtle.ConstantTimeCompare([]byte(hashOf(key)), []byte(v.pageKey)) == 1
}

// sessions holds the login tokens not yet used and the live sessions, keyed
// by the SHA-256 of the secret so that a lookup's timing says nothing about
// the secret itself. Both maps are bounded: minting more evicts the oldest.
type sessions struct {
	now func() time.Time

	mu     sync.Mutex
	tokens map[string]time.Time
	live   map[string]session
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, tokens: make(map[string]time.Time), live: make(map[string]session)}
}

// randomSecret returns 256 random bits as hex.
func randomSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

func hashOf(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return string(h[:])
}

// mint returns a new one-time login token and when it expires.
func (s *sessions) mint() (string, time.Time, error) {
	tok, err := randomSecret()
	if err != nil {
		return "", time.Time{}, err
	}
	exp := s.now().Add(tokenTTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	evict(s.tokens, maxTokens, s.now(), func(t time.Time) time.Time { return t })
	s.tokens[hashOf(tok)] = exp
	return tok, exp, nil
}

// redeem uses up tok and, if it was valid, opens a session; it returns the
// session id to put in the cookie and the page key to give the page.
func (s *sessions) redeem(tok string) (id, pageKey string, ok bool, err error) {
	if tok == "" {
		return "", "", false, nil
	}
	s.mu.Lock()
	exp, found := s.tokens[hashOf(tok)]
	delete(s.tokens, hashOf(tok))
	s.mu.Unlock()
	if !found || !s.now().Before(exp) {
		return "", "", false, nil
	}
	if id, err = randomSecret(); err != nil {
		return "", "", false, err
	}
	if pageKey, err = randomSecret(); err != nil {
		return "", "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	evict(s.live, maxSessions, s.now(), func(v session) time.Time { return v.expires })
	s.live[hashOf(id)] = session{expires: s.now().Add(sessionTTL), pageKey: hashOf(pageKey)}
	return id, pageKey, true, nil
}

// get returns the live session of id.
func (s *sessions) get(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.live[hashOf(id)]
	if ok && !s.now().Before(v.expires) {
		delete(s.live, hashOf(id))
		return session{}, false
	}
	return v, ok
}

// end logs the session out.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, hashOf(id))
}

// evict makes room for one more entry in m: it drops what has expired and,
// if m is still full, the entry that expires first.
func evict[V any](m map[string]V, limit int, now time.Time, expiry func(V) time.Time) {
	for k, v := range m {
		if !now.Before(expiry(v)) {
			delete(m, k)
		}
	}
	for len(m) >= limit {
		first := ""
		for k, v := range m {
			if first == "" || expiry(v).Before(expiry(m[first])) {
				first = k
			}
		}
		delete(m, first)
	}
}
