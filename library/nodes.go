package library

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	libp2ppeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// startNode starts the peer network for the current library, dialling
// extra (e.g. the inviter after a join) besides the configured static
// peers, and the restricted nodes on the superseded secrets this device
// still holds, which bring members over. Callers hold moveMu.
func (l *Library) startNode(ctx context.Context, extra []multiaddr.Multiaddr) error {
	if err := l.startNodeOn(ctx, nil, extra); err != nil {
		return err
	}
	return l.restartPreviousLocked(ctx, nil)
}

// startNodeOn starts the main node on listen, or where configured if
// listen is nil.
func (l *Library) startNodeOn(ctx context.Context, listen, extra []multiaddr.Multiaddr) error {
	lib, _ := l.store.Library()
	// The gater reads the members from the first connection on. A node
	// restarted on a new secret of the same library keeps the set, which
	// commits keep current: reloading it would race a removal being
	// committed, whose effects (rotate.go, membership.go) would then be
	// lost.
	if !l.members.loadedFor(crdt.LibraryID(lib.ID)) {
		if err := l.loadMembers(ctx); err != nil {
			return err
		}
	}
	if err := l.ensureName(ctx); err != nil {
		return fmt.Errorf("record this device's name in the library: %w", err)
	}
	if listen == nil {
		listen = l.cfg.Listen
	}
	known, port := l.loadKnown(ctx)
	// Members remember this device's addresses, port included: listening
	// on the port of the last run is what lets them find it after a
	// restart. Taken meanwhile, another is chosen.
	pinned := len(listen) == 0 && port != 0
	if pinned {
		listen = portListen(port)
	}
	cfg := peer.Config{
		Identity:    l.identity,
		Library:     peerLibrary(lib),
		Name:        l.Name(),
		Store:       syncStore{l},
		Listen:      listen,
		Peers:       append(slices.Clone(l.cfg.Peers), extra...),
		MDNS:        l.cfg.MDNS,
		PortMap:     l.cfg.PortMap,
		Now:         l.cfg.Now,
		Logger:      l.log.With("component", "peer"),
		OnEvent:     l.onPeerEvent,
		Removed:     l.members.removed,
		Member:      l.members.current,
		Redeem:      l.redeem,
		Ticket:      l.ticketFor,
		OnRekey:     l.onRekey,
		RekeyOffer:  func(to crdt.DeviceID) (peer.Rekey, bool) { return l.mainOffer(peerLibrary(lib), to) },
		Summaries:   l.summaries,
		OnSummaries: l.onSummaries,
		OnResidues:  l.onResidues,
		Known:       known,
		OnKnown:     l.saveKnown,
		Announce:    l.cfg.Announce,
		Reoffer:     l.cfg.Bounds.Retry,
	}
	node, err := peer.New(ctx, cfg)
	if err != nil && pinned {
		l.log.Info("the port of the last run is taken; listening on another", "port", port, "err", err)
		cfg.Listen = nil
		node, err = peer.New(ctx, cfg)
	}
	if err != nil {
		return fmt.Errorf("start peer network: %w", err)
	}
	if !l.net.publish(node) {
		// Close ran while a join was restarting the network.
		node.Close()
		return errors.New("the library is closing")
	}
	return nil
}

// peerLibrary is the library as the peer layer takes it.
func peerLibrary(l store.Library) peer.Library {
	return peer.Library{ID: l.ID, Secret: l.Secret, Epoch: l.Epoch}
}

// ErrNoNetwork is returned while the peer network is not running (a join
// is restarting it, or the library is closing).
var ErrNoNetwork = errors.New("the peer network is not running")

// Peers returns what the main node knows of each peer; none while the
// network is not running.
func (l *Library) Peers() []peer.PeerInfo {
	if node := l.net.current(); node != nil {
		return node.Peers()
	}
	return nil
}

// Traffic returns the main node's counters, and false while the network
// is not running.
func (l *Library) Traffic() (peer.Stats, bool) {
	if node := l.net.current(); node != nil {
		return node.Stats(), true
	}
	return peer.Stats{}, false
}

// Addrs returns the addresses other devices reach the main node at.
func (l *Library) Addrs() []multiaddr.Multiaddr {
	if node := l.net.current(); node != nil {
		return node.Addrs()
	}
	return nil
}

// ListenAddrs returns the addresses the main node listens on, ports
// resolved: a device restarted on them is where its peers last saw it.
func (l *Library) ListenAddrs() []multiaddr.Multiaddr {
	if node := l.net.current(); node != nil {
		return node.ListenAddrs()
	}
	return nil
}

// PeerID returns the main node's libp2p peer id, "" while the network is
// not running.
func (l *Library) PeerID() libp2ppeer.ID {
	if node := l.net.current(); node != nil {
		return node.ID()
	}
	return ""
}

// Restricted returns how many restricted nodes run, on superseded secrets
// (previous.go): none once every member has the current secret.
func (l *Library) Restricted() int { return l.net.previousCount() }

// peerNodes is the library's peer nodes: the main node on the current
// secret and the restricted nodes on superseded ones (previous.go), with
// what bringing members over needs. It has a lock of its own, which guards
// these fields only and is never held while a node starts, stops or dials:
// whatever replaces nodes holds Library.moveMu instead.
type peerNodes struct {
	mu sync.Mutex
	// closed: the library is closing; no node is published from now on.
	closed bool
	node   *peer.Node
	// previous are the restricted nodes on superseded secrets, and
	// onCurrent the members seen on the current one.
	previous  []*peer.Node
	onCurrent map[crdt.DeviceID]bool
	// meet is where members on losing secrets listen (meetOnPrevious).
	meet []multiaddr.Multiaddr
}

// current returns the main node, nil while none runs.
func (n *peerNodes) current() *peer.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.node
}

// publish makes node the main node, and reports false (publishing
// nothing) once the library is closing.
func (n *peerNodes) publish(node *peer.Node) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.node = node
	return true
}

// take removes the main node and returns it; a new secret's node starts
// with no member seen on it.
func (n *peerNodes) take(resetSeen bool) *peer.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	node := n.node
	n.node = nil
	if resetSeen {
		n.onCurrent = make(map[crdt.DeviceID]bool)
	}
	return node
}

// close marks the network closing and returns every node, for the
// library's Close.
func (n *peerNodes) close() (node *peer.Node, previous []*peer.Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	node, previous = n.node, n.previous
	n.node, n.previous = nil, nil
	return node, previous
}

// setPrevious publishes the restricted nodes, and returns where members
// on losing secrets listen, for them to dial; false once the library is
// closing.
func (n *peerNodes) setPrevious(nodes []*peer.Node) ([]multiaddr.Multiaddr, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, false
	}
	n.previous = nodes
	return slices.Clone(n.meet), true
}

// takePrevious removes the restricted nodes and returns them.
func (n *peerNodes) takePrevious() []*peer.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	nodes := n.previous
	n.previous = nil
	return nodes
}

// previousAddrs returns where the restricted nodes listen.
func (n *peerNodes) previousAddrs() []multiaddr.Multiaddr {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []multiaddr.Multiaddr
	for _, p := range n.previous {
		out = append(out, p.Addrs()...)
	}
	return out
}

// addMeet keeps addrs for the restricted nodes to dial (the newest
// maxMeet), and returns the restricted nodes running now.
func (n *peerNodes) addMeet(addrs []multiaddr.Multiaddr) []*peer.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.meet = append(n.meet, addrs...)
	if len(n.meet) > maxMeet {
		n.meet = n.meet[len(n.meet)-maxMeet:]
	}
	return slices.Clone(n.previous)
}

// clearMeet forgets the addresses kept for the restricted nodes.
func (n *peerNodes) clearMeet() {
	n.mu.Lock()
	n.meet = nil
	n.mu.Unlock()
}

// seenOnCurrent records that device id was seen on secret lib if that is
// the store's current secret, and reports whether restricted nodes run
// and every member of members but self has been seen on it. The store
// moves to a new secret before moveToLocked resets what was seen, so a
// device checked here before the move is reset with the rest.
func (n *peerNodes) seenOnCurrent(st *store.Store, lib peer.Library, id, self crdt.DeviceID, members []crdt.DeviceID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cur, ok := st.Library(); !ok || cur.Secret != lib.Secret {
		return false
	}
	if n.onCurrent == nil {
		n.onCurrent = make(map[crdt.DeviceID]bool)
	}
	n.onCurrent[id] = true
	if len(n.previous) == 0 {
		return false
	}
	for _, m := range members {
		if m != self && !n.onCurrent[m] {
			return false
		}
	}
	return true
}

// seen reports whether device id was seen on the current secret.
func (n *peerNodes) seen(id crdt.DeviceID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.onCurrent[id]
}

// previousCount returns how many restricted nodes run.
func (n *peerNodes) previousCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.previous)
}
