package peer

import (
	"sync/atomic"

	"github.com/danyue/danyue/crdt"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// gater is the node's libp2p connection gater. It refuses, in both
// directions, every connection with a device removed from the library
// (Config.Removed): a dial to one is refused before it starts, and a
// connection from one as soon as its identity is authenticated, before any
// stream is opened. The check runs on every connection, so a removal that
// arrives by sync takes effect at once, on every member that has merged it
// (Node.Disconnect closes the connections already open).
//
// A device that is no member but knows the current secret may be a device
// joining by a long invite code (which carries that secret): the gater of
// the main node lets it in, and it is given nothing until its inviter
// makes it a member (members.go). The secret rotates when a device is
// removed (rekey.go): a removed device, or a new identity made with its
// secret, knows only a superseded one, and the nodes that still run on a
// superseded secret are restricted: their gater admits only the members
// the daemon names (Config.Admit).
//
// Once the node is closing the gater refuses every dial, libp2p's own
// included: a dial that starts while libp2p tears its transports down can
// crash in its dial worker (libp2p issue 1545).
type gater struct {
	removed func(crdt.DeviceID) bool // nil: nobody was removed
	// admit, on a restricted node, is the only devices it connects with
	// (Config.Admit); nil on a library's main node.
	admit   func(crdt.DeviceID) bool
	closing atomic.Bool
}

var _ interface {
	InterceptPeerDial(lpeer.ID) bool
	InterceptAddrDial(lpeer.ID, ma.Multiaddr) bool
	InterceptAccept(network.ConnMultiaddrs) bool
	InterceptSecured(network.Direction, lpeer.ID, network.ConnMultiaddrs) bool
	InterceptUpgraded(network.Conn) (bool, control.DisconnectReason)
} = (*gater)(nil)

// refused reports whether the device of p was removed from the library,
// or, on a restricted node, is not admitted.
func (g *gater) refused(p lpeer.ID) bool {
	d := DeviceIDOf(p)
	return (g.removed != nil && g.removed(d)) || (g.admit != nil && !g.admit(d))
}

func (g *gater) InterceptPeerDial(p lpeer.ID) bool {
	return !g.closing.Load() && !g.refused(p)
}

func (g *gater) InterceptAddrDial(p lpeer.ID, _ ma.Multiaddr) bool {
	return !g.closing.Load() && !g.refused(p)
}

func (g *gater) InterceptAccept(network.ConnMultiaddrs) bool {
	return !g.closing.Load()
}

func (g *gater) InterceptSecured(_ network.Direction, p lpeer.ID, _ network.ConnMultiaddrs) bool {
	return !g.closing.Load() && !g.refused(p)
}

func (g *gater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}

// Disconnect closes every connection with device d, for a device just
// removed from the library: the gater refuses new ones from then on (as
// long as Config.Removed reports it). It returns how many peers it
// disconnected.
func (n *Node) Disconnect(d crdt.DeviceID) int {
	// Nor is it shared with the members or kept as one of them.
	for _, k := range n.book.list() {
		if DeviceIDOf(k.Peer) == d {
			n.book.forget(k.Peer)
		}
	}
	closed := 0
	for _, p := range n.host.Network().Peers() {
		if DeviceIDOf(p) != d {
			continue
		}
		if err := n.host.Network().ClosePeer(p); err != nil {
			n.log.Warn("close the connections of a removed device", "peer", p, "device", d, "err", err)
			continue
		}
		n.log.Info("closed the connections of a removed device", "peer", p, "device", d)
		closed++
	}
	return closed
}
