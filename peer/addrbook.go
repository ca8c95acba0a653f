package peer

import (
	"cmp"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// The address book: the last addresses of every member, learned from the
// members themselves, so that devices find each other wherever they have
// met before, with or without mDNS (docs/design.md, "Finding each other").
//
// Every hello carries its sender's addresses and the latest it knows of the
// other members (key 12); a sender whose puller has capAddrs sends an Addrs
// frame (key 10) whenever its book learns an address, so that a library
// paired in a chain (A invited B, B invited C) becomes a mesh: A learns C's
// addresses through B and dials C. The book is persisted by the daemon
// (Config.Known, Config.OnKnown) and dialled at start, when a device becomes
// a member, and when this device's own addresses change.
//
// What a member says is bounded and checked at the door: at most
// maxKnownAddrs addresses per device, each at most maxAddrBytes and of a
// dialable form (an IP or DNS name, TCP, a port; no wildcard or multicast
// address, no relay), at most maxKnownDevices devices in the book and in one
// message. Only current members are dialled, through the keeper's backoff,
// so a member can make this device dial at most maxKnownAddrs addresses for
// each member of the library. Loopback addresses are kept: they reach a
// device on the same host, which is how several devices share one machine
// (tests, a first try of danyue), at the cost of a failed dial elsewhere.

// Bounds of the address book (see above).
const (
	maxKnownAddrs   = 8
	maxAddrBytes    = 128
	maxKnownDevices = 64
	maxPeerIDBytes  = 64
)

// capAddrs: the device reads Addrs frames on its pull streams.
const capAddrs = 1 << 1

// Known is what this device knows of how to reach a device of the library:
// its peer id, its last addresses and when they were last heard of.
type Known struct {
	Peer  lpeer.ID
	Addrs []ma.Multiaddr
	Seen  time.Time
}

// wireKnown is a Known on the wire.
type wireKnown struct {
	Peer   []byte   `cbor:"0,keyasint"`
	Addrs  [][]byte `cbor:"1,keyasint,omitempty"`
	SeenMs uint64   `cbor:"2,keyasint,omitempty"`
}

// addrBook holds the Known of other devices, by peer id. It has its own
// lock: it is read on every hello and written from pull streams.
type addrBook struct {
	mu      sync.Mutex
	known   map[lpeer.ID]Known
	changed chan struct{} // closed and replaced when an address is learnt
	save    chan struct{} // a persist is due (saveLoop)
}

func newAddrBook(initial []Known) *addrBook {
	b := &addrBook{known: make(map[lpeer.ID]Known), changed: make(chan struct{}), save: make(chan struct{}, 1)}
	for _, k := range initial {
		if addrs := dialable(k.Addrs); k.Peer != "" && len(addrs) > 0 {
			b.putLocked(Known{Peer: k.Peer, Addrs: addrs, Seen: k.Seen})
		}
	}
	return b
}

// watch returns a channel closed when the book next learns an address.
func (b *addrBook) watch() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// get returns what the book knows of p.
func (b *addrBook) get(p lpeer.ID) (Known, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.known[p]
	return k, ok
}

// list returns the book, the most recently seen first.
func (b *addrBook) list() []Known {
	b.mu.Lock()
	out := make([]Known, 0, len(b.known))
	for _, k := range b.known {
		out = append(out, k)
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y Known) int {
		return cmp.Or(y.Seen.Compare(x.Seen), cmp.Compare(x.Peer, y.Peer))
	})
	return out
}

// learn takes k if it is newer than what the book has of its device, and
// reports whether an address changed (what Addrs frames are sent for).
func (b *addrBook) learn(k Known) (addrsChanged bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old, ok := b.known[k.Peer]
	if ok && !k.Seen.After(old.Seen) {
		return false
	}
	addrsChanged = !ok || !slices.EqualFunc(old.Addrs, k.Addrs, ma.Multiaddr.Equal)
	b.putLocked(k)
	if addrsChanged {
		close(b.changed)
		b.changed = make(chan struct{})
	}
	select {
	case b.save <- struct{}{}:
	default:
	}
	return addrsChanged
}

// putLocked stores k, making room by dropping the device seen longest ago.
func (b *addrBook) putLocked(k Known) {
	if _, ok := b.known[k.Peer]; !ok && len(b.known) >= maxKnownDevices {
		var oldest lpeer.ID
		for p, o := range b.known {
			if oldest == "" || o.Seen.Before(b.known[oldest].Seen) {
				oldest = p
			}
		}
		delete(b.known, oldest)
	}
	b.known[k.Peer] = k
}

// full reports whether the book has no room for p without dropping
// another device.
func (b *addrBook) full(p lpeer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.known[p]
	return !ok && len(b.known) >= maxKnownDevices
}

// touch wakes the watchers as if an address was learnt: this device's own
// addresses changed.
func (b *addrBook) touch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
}

// forget drops p (a device removed from the library).
func (b *addrBook) forget(p lpeer.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.known[p]; ok {
		delete(b.known, p)
		select {
		case b.save <- struct{}{}:
		default:
		}
	}
}

// dialable returns the addresses of in that a member may be dialled on,
// without their /p2p component, without duplicates, at most maxKnownAddrs.
func dialable(in []ma.Multiaddr) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, a := range in {
		if len(out) == maxKnownAddrs {
			break
		}
		if base, last := ma.SplitLast(a); last != nil && last.Protocol().Code == ma.P_P2P {
			a = base
		}
		if len(a.Bytes()) <= maxAddrBytes && shareable(a) && !ma.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// shareable reports whether a is an address one device can dial another on:
// an IP address or a DNS name, then TCP with a port. A wildcard or
// multicast IP is refused: it names no device.
func shareable(a ma.Multiaddr) bool {
	ps := a.Protocols()
	if len(ps) != 2 || ps[1].Code != ma.P_TCP {
		return false
	}
	if port, err := a.ValueForProtocol(ma.P_TCP); err != nil || port == "0" {
		return false
	}
	switch ps[0].Code {
	case ma.P_DNS, ma.P_DNS4, ma.P_DNS6:
		return true
	case ma.P_IP4, ma.P_IP6:
		v, err := a.ValueForProtocol(ps[0].Code)
		ip := net.ParseIP(v)
		return err == nil && ip != nil && !ip.IsUnspecified() && !ip.IsMulticast()
	}
	return false
}

// knownFromWire checks what a member says of a device: the peer id must
// parse, and only dialable addresses are kept. ok is false for an entry
// with nothing usable.
func knownFromWire(w wireKnown, now time.Time) (Known, bool) {
	if len(w.Peer) > maxPeerIDBytes {
		return Known{}, false
	}
	id, err := lpeer.IDFromBytes(w.Peer)
	if err != nil {
		return Known{}, false
	}
	var addrs []ma.Multiaddr
	for _, raw := range w.Addrs {
		if len(raw) > maxAddrBytes {
			continue
		}
		a, err := ma.NewMultiaddrBytes(raw)
		if err != nil {
			continue
		}
		addrs = append(addrs, a)
		if len(addrs) == 2*maxKnownAddrs {
			break
		}
	}
	addrs = dialable(addrs)
	if len(addrs) == 0 {
		return Known{}, false
	}
	seen := time.UnixMilli(int64(min(w.SeenMs, crdt.MaxWall)))
	if seen.After(now) {
		// Another device's clock: never newer than what we hear now.
		seen = now
	}
	return Known{Peer: id, Addrs: addrs, Seen: seen}, true
}

func (k Known) wire() wireKnown {
	w := wireKnown{Peer: []byte(k.Peer), SeenMs: uint64(max(k.Seen.UnixMilli(), 0))}
	for _, a := range k.Addrs {
		w.Addrs = append(w.Addrs, a.Bytes())
	}
	return w
}
