package peer

import (
	"fmt"
	"maps"
	"slices"

	"github.com/danyue/danyue/internal/lan"
	"github.com/libp2p/go-libp2p/core/event"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Meeting members at the addresses of the book (addrbook.go).

// maxPeerAddrs bounds the dial addresses a peer's state collects from the
// book, static flags and mDNS together; the newest are kept.
const maxPeerAddrs = 2 * maxKnownAddrs

// ownKnown is what this device says of itself: the addresses the user
// announced (Config.Announce) first, then those it listens on.
func (n *Node) ownKnown() Known {
	addrs := append(append([]ma.Multiaddr(nil), n.cfg.Announce...), n.host.Addrs()...)
	return Known{Peer: n.host.ID(), Addrs: dialable(addrs), Seen: n.now()}
}

// shareKnown is what a hello or an Addrs frame carries: this device's
// addresses, then the latest of the other members', at most
// maxKnownDevices entries.
func (n *Node) shareKnown() []wireKnown {
	if n.cfg.noBook {
		return nil
	}
	out := []wireKnown{n.ownKnown().wire()}
	for _, k := range n.book.list() {
		if len(out) == maxKnownDevices {
			break
		}
		if n.isMember(DeviceIDOf(k.Peer)) && !n.gater.refused(k.Peer) {
			out = append(out, k.wire())
		}
	}
	return out
}

// learnFrom takes what the member remote says of how to reach devices of
// the library (its hello or an Addrs frame), and dials the members whose
// addresses are new. What it says of itself is seen now; what it relays
// keeps the time it was seen. Entries past maxKnownDevices are ignored.
func (n *Node) learnFrom(remote lpeer.ID, ws []wireKnown) {
	if n.cfg.noBook {
		return
	}
	now := n.now()
	for i, w := range ws {
		if i == maxKnownDevices {
			break
		}
		k, ok := knownFromWire(w, now)
		if !ok || k.Peer == n.host.ID() || n.gater.refused(k.Peer) {
			continue
		}
		if k.Peer == remote {
			k.Seen = now
		}
		// A device not a member yet (its addition may arrive after the
		// hello that names it) is kept only while there is room: it
		// cannot push a member out of the book.
		member := n.isMember(DeviceIDOf(k.Peer))
		if !member && n.book.full(k.Peer) {
			continue
		}
		// The remote's own addresses are met too: it is connected, so
		// nothing is dialled, but its announced addresses (a port forward
		// at home) are where it is found once this device is away.
		if n.book.learn(k) && member {
			n.meet(k)
		}
	}
}

// meet makes k's device a kept peer, dialled at its book addresses with the
// keeper's backoff, unless it is connected, this device, removed, or not a
// member. New addresses for a peer in backoff are tried at once.
func (n *Node) meet(k Known) {
	d := DeviceIDOf(k.Peer)
	if k.Peer == n.host.ID() || n.gater.refused(k.Peer) || !n.isMember(d) || n.cfg.Restricted {
		return
	}
	n.host.Peerstore().AddAddrs(k.Peer, k.Addrs, peerstore.PermanentAddrTTL)
	n.mu.Lock()
	st := n.peer(k.Peer)
	before := len(st.addrs)
	st.addrs = mergeAddrs(st.addrs, k.Addrs)
	var dropped []ma.Multiaddr
	if extra := len(st.addrs) - maxPeerAddrs; extra > 0 {
		dropped = slices.Clone(st.addrs[:extra])
		st.addrs = st.addrs[extra:]
	}
	if st.lastSeen.Before(k.Seen) && !st.connected {
		st.lastSeen = k.Seen
	}
	start := n.keepLocked(st)
	if !start && !st.connected && len(st.addrs) != before {
		st.dialNow = true
	}
	connected := st.connected
	n.mu.Unlock()
	// The peerstore keeps what the state keeps: libp2p dials every
	// address it holds for a peer (a hole punch's first, direct try
	// included), and a member that moves about would otherwise leave one
	// for good on every network it was on.
	n.host.Peerstore().SetAddrs(k.Peer, dropped, 0)
	if start {
		n.spawn(func() { n.keep(st) })
	} else if !connected {
		st.poke()
	}
}

// meetKnown meets every member of the book: at start.
func (n *Node) meetKnown() {
	for _, k := range n.book.list() {
		n.meet(k)
	}
}

// watchAddrs follows this device's addresses as libp2p sees them, which it
// looks for once a minute (tickers.go): a change is told to the members
// (Addrs frames) and handled as a change of network (networkChanged). Only
// a change counts: the host also reports its first addresses, and
// addresses that come back unchanged.
func (n *Node) watchAddrs(sub event.Subscription) {
	defer sub.Close()
	was := n.host.Addrs()
	for {
		select {
		case <-n.ctx.Done():
			return
		case _, ok := <-sub.Out():
			if !ok {
				return
			}
		}
		now := n.host.Addrs()
		if sameAddrs(was, now) {
			continue
		}
		was = now
		n.book.touch()
		n.networkChanged()
	}
}

// watchNetwork follows the changes of this device's interfaces that the
// system reports as they happen (lan.Watch), which libp2p only sees at its
// next look: a phone that leaves the home Wi-Fi for the mobile network
// dials its members from there at once.
func (n *Node) watchNetwork(changes <-chan struct{}) {
	was := lan.LocalIPs()
	for range changes {
		now := lan.LocalIPs()
		if maps.Equal(was, now) {
			continue
		}
		was = now
		n.networkChanged()
	}
}

// networkChanged handles a change of this device's network: connections
// from an address this device no longer has are closed, since nothing sent
// on them arrives and they would otherwise look alive until their
// keep-alive fails, and every member is dialled at once rather than after
// its backoff, since what failed before may work from here: one not
// connected now, and one whose connection was just closed as soon as its
// disconnect is seen.
func (n *Node) networkChanged() {
	local := lan.LocalIPs()
	for _, c := range n.host.Network().Conns() {
		if ip, err := manet.ToIP(c.LocalMultiaddr()); err == nil && !ip.IsLoopback() && !local[ip.String()] {
			n.log.Info("closing a connection from an address this device no longer has", "peer", c.RemotePeer(), "local", c.LocalMultiaddr())
			c.Close()
		}
	}
	woken := n.dialMembersNow()
	n.log.Info("this device's network changed; dialling members", "addrs", n.Addrs(), "members", woken)
}

// dialMembersNow has every kept peer that is not connected dialled at
// once, past its backoff, and returns how many there are; a connected
// one is dialled as soon as its keeper sees it disconnected.
func (n *Node) dialMembersNow() int {
	n.mu.Lock()
	var wake []*peerState
	for _, st := range n.peers {
		if st.kept {
			st.dialNow = true
			wake = append(wake, st)
		}
	}
	n.mu.Unlock()
	for _, st := range wake {
		st.poke()
	}
	return len(wake)
}

// sameAddrs reports whether a and b hold the same addresses, in any order.
func sameAddrs(a, b []ma.Multiaddr) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !ma.Contains(b, x) {
			return false
		}
	}
	return true
}

// saveKnown hands the book to Config.OnKnown whenever it changed, from one
// goroutine, so that a burst of hellos makes one write.
func (n *Node) saveKnown() {
	for {
		select {
		case <-n.book.save:
			n.cfg.OnKnown(n.book.list())
		case <-n.ctx.Done():
			select {
			case <-n.book.save:
				n.cfg.OnKnown(n.book.list())
			default:
			}
			return
		}
	}
}

// sendAddrs sends the puller an Addrs frame: what this device knows of how
// to reach the members.
func (snd *sender) sendAddrs() error {
	ws := snd.n.shareKnown()
	snd.out.Reset()
	if err := appendFrame(&snd.out, &wireFrame{Addrs: ws}); err != nil {
		return err
	}
	if err := snd.n.writeFrame(snd.s, snd.out.Bytes()); err != nil {
		return fmt.Errorf("send addrs: %w", err)
	}
	return nil
}

// checkAnnounce checks the addresses a user announces: each must be one a
// member can dial (shareable), given without /p2p.
func checkAnnounce(addrs []ma.Multiaddr) error {
	for _, a := range addrs {
		if len(a.Bytes()) > maxAddrBytes || !shareable(a) {
			return fmt.Errorf("announce %s: not an address members can dial (want /ip4|/ip6|/dns|/dns4|/dns6/HOST/tcp/PORT, at most %d bytes)", a, maxAddrBytes)
		}
	}
	if len(addrs) > maxKnownAddrs {
		return fmt.Errorf("announce: %d addresses, at most %d", len(addrs), maxKnownAddrs)
	}
	return nil
}
