package kosync

import (
	"container/list"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sync"
)

// authCache remembers the (account, key) pairs that passed a slow
// verification, so that KOReader, which sends its key with every request,
// pays for one. It holds neither keys nor anything a key can be found from
// offline: entries are keyed by an HMAC of account and key under a random
// key of this process. Each entry remembers the verifier it passed, and a
// lookup hits only while the account's stored verifier is still that one,
// so a key changed or re-hashed on another device drops out at once.
type authCache struct {
	mac  []byte // the HMAC key, random per process
	max  int
	mu   sync.Mutex
	ll   *list.List // of *cacheEntry, most recently used first
	byID map[cacheID]*list.Element
}

type cacheID [sha256.Size]byte

type cacheEntry struct {
	id       cacheID
	verifier string
}

func newAuthCache(max int) (*authCache, error) {
	mac := make([]byte, 32)
	if _, err := rand.Read(mac); err != nil {
		return nil, fmt.Errorf("kosync cache key: %w", err)
	}
	return &authCache{mac: mac, max: max, ll: list.New(), byID: map[cacheID]*list.Element{}}, nil
}

// id returns the entry id of a pair. The account name is length-prefixed,
// so no two pairs share an input.
func (c *authCache) id(user, key string) cacheID {
	h := hmac.New(sha256.New, c.mac)
	fmt.Fprintf(h, "%d:%s", len(user), user)
	h.Write([]byte(key))
	var id cacheID
	h.Sum(id[:0])
	return id
}

// has reports whether the pair has an entry, for any verifier.
func (c *authCache) has(id cacheID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.byID[id]
	return ok
}

// hit reports whether the pair passed against verifier, the account's
// verifier now. An entry for an older verifier is dropped.
func (c *authCache) hit(id cacheID, verifier string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[id]
	if !ok {
		return false
	}
	if el.Value.(*cacheEntry).verifier != verifier {
		c.ll.Remove(el)
		delete(c.byID, id)
		return false
	}
	c.ll.MoveToFront(el)
	return true
}

// add remembers that the pair passed against verifier, evicting the least
// recently used entry past the bound.
func (c *authCache) add(id cacheID, verifier string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		el.Value.(*cacheEntry).verifier = verifier
		c.ll.MoveToFront(el)
		return
	}
	c.byID[id] = c.ll.PushFront(&cacheEntry{id: id, verifier: verifier})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.byID, old.Value.(*cacheEntry).id)
	}
}

func (c *authCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
