package daemon

import (
	"slices"
	"sync"

	"github.com/multiformats/go-multiaddr"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// peerNodes is the daemon's peer nodes: the main node on the current secret
// and the restricted nodes on superseded ones (rotate.go), with what
// bringing members over needs. It has a lock of its own, which guards
// these fields only and is never held while a node starts, stops or dials:
// whatever replaces nodes holds Daemon.joinMu instead.
type peerNodes struct {
	mu sync.Mutex
	// closed: the daemon is closing; no node is published from now on.
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
// nothing) once the daemon is closing.
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
// daemon's Close.
func (n *peerNodes) close() (node *peer.Node, previous []*peer.Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	node, previous = n.node, n.previous
	n.node, n.previous = nil, nil
	return node, previous
}

// setPrevious publishes the restricted nodes, and returns where members
// on losing secrets listen, for them to dial; false once the daemon is
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
func (n *peerNodes) seenOnCurrent(st *store.Store, lib peer.Library, id, self crdt.DeviceID, members []crdt.Member) bool {
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
		if m.ID != self && !m.IsRemoved() && !n.onCurrent[m.ID] {
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
