package library

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// The peer layer's address book (peer/addrbook.go), kept in the store
// across restarts so that a device dials its members where they last were.
// The saved book also holds this device's own addresses, whose port the
// next run listens on again (startNodeOn): what the members remember of it
// stays true.

// loadKnown reads the saved address book: the members' entries, and the
// TCP port this device last listened on (0 if none). A book that cannot be
// read is logged and skipped: the members are then found as after a first
// start.
func (l *Library) loadKnown(ctx context.Context) (_ []peer.Known, port int) {
	saved, err := l.store.KnownAddrs(ctx)
	if err != nil {
		l.log.Warn("cannot read the saved addresses of the members; finding them anew", "err", err)
		return nil, 0
	}
	self, _ := lpeer.IDFromPrivateKey(l.identity)
	out := make([]peer.Known, 0, len(saved))
	for _, k := range saved {
		id, err := lpeer.Decode(k.Peer)
		if err != nil {
			continue
		}
		pk := peer.Known{Peer: id, Seen: k.Seen}
		for _, s := range k.Addrs {
			if a, err := multiaddr.NewMultiaddr(s); err == nil {
				pk.Addrs = append(pk.Addrs, a)
			}
		}
		if id == self {
			port = lastTCPPort(pk.Addrs)
			continue
		}
		out = append(out, pk)
	}
	return out, port
}

// saveKnown saves the address book and this device's own addresses; the
// peer layer calls it from one goroutine after the book changed.
func (l *Library) saveKnown(list []peer.Known) {
	saved := make([]store.Known, 0, min(len(list)+1, store.MaxKnown))
	if node := l.net.current(); node != nil {
		var own []multiaddr.Multiaddr
		for _, a := range node.Addrs() {
			if base, last := multiaddr.SplitLast(a); last != nil && last.Protocol().Code == multiaddr.P_P2P {
				own = append(own, base)
			}
		}
		if len(own) == 0 {
			// A node that is closing listens no more: keep what the
			// last save said of this device.
			own = l.savedOwn(node.ID())
		}
		list = append([]peer.Known{{Peer: node.ID(), Addrs: own}}, list...)
	}
	for _, k := range list[:min(len(list), store.MaxKnown)] {
		sk := store.Known{Peer: k.Peer.String(), Seen: k.Seen}
		for _, a := range k.Addrs[:min(len(k.Addrs), store.MaxKnownAddrs)] {
			sk.Addrs = append(sk.Addrs, a.String())
		}
		if len(sk.Addrs) > 0 {
			saved = append(saved, sk)
		}
	}
	if err := l.store.SaveKnown(context.Background(), saved); err != nil && !errors.Is(err, store.ErrClosed) {
		l.log.Warn("cannot save the addresses of the members", "err", err)
	}
}

// savedOwn returns the addresses of self in the saved book.
func (l *Library) savedOwn(self lpeer.ID) []multiaddr.Multiaddr {
	saved, _ := l.store.KnownAddrs(context.Background())
	var out []multiaddr.Multiaddr
	for _, k := range saved {
		if k.Peer != self.String() {
			continue
		}
		for _, s := range k.Addrs {
			if a, err := multiaddr.NewMultiaddr(s); err == nil {
				out = append(out, a)
			}
		}
	}
	return out
}

// lastTCPPort is the TCP port of the first of addrs that has one, 0 if none.
func lastTCPPort(addrs []multiaddr.Multiaddr) int {
	for _, a := range addrs {
		if v, err := a.ValueForProtocol(multiaddr.P_TCP); err == nil {
			if p, err := strconv.Atoi(v); err == nil && p > 0 && p < 1<<16 {
				return p
			}
		}
	}
	return 0
}

// portListen is the default listen addresses (every interface, IPv4 and
// IPv6) on port.
func portListen(port int) []multiaddr.Multiaddr {
	var out []multiaddr.Multiaddr
	for _, f := range []string{"/ip4/0.0.0.0/tcp/%d", "/ip6/::/tcp/%d"} {
		if a, err := multiaddr.NewMultiaddr(fmt.Sprintf(f, port)); err == nil {
			out = append(out, a)
		}
	}
	return out
}
