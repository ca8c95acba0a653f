package library

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/multiformats/go-multiaddr"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
)

// The restricted nodes, one on each superseded secret (rotate.go says why):
// they admit only current members, carry only rekey offers, and offer the
// current secret to every member they meet. They close once every current
// member has been seen on the current secret.

// maxMeet bounds the addresses of members on losing secrets kept for the
// restricted nodes to dial.
const maxMeet = 64

// meetOnPrevious dials addrs from the restricted nodes: a member offered
// a secret that loses to this device's, and its own restricted nodes (on
// the secret both had before) are where this device's offer reaches it.
func (l *Library) meetOnPrevious(addrs []multiaddr.Multiaddr) {
	l.log.Info("a member is on a secret that loses to this device's; reaching it on the previous secret", "addrs", addrs)
	// Restricted nodes started later (a rotation under way) dial them too.
	nodes := l.net.addMeet(addrs)
	l.dialFromPrevious(nodes, addrs)
}

// dialFromPrevious has each restricted node of nodes dial addrs, and keep
// redialling them.
func (l *Library) dialFromPrevious(nodes []*peer.Node, addrs []multiaddr.Multiaddr) {
	for _, n := range nodes {
		l.spawn(func() {
			ctx, cancel := context.WithTimeout(context.Background(), handshakeWrite)
			defer cancel()
			_ = n.Connect(ctx, addrs) // kept and redialled if it fails now
		})
	}
}

// restartPreviousLocked replaces the restricted nodes by one on each
// superseded secret, dialling peers. Callers hold l.moveMu.
func (l *Library) restartPreviousLocked(ctx context.Context, peers []multiaddr.Multiaddr) error {
	l.closePreviousLocked()
	prev := l.store.PreviousLibraries()
	if len(prev) == 0 {
		l.net.clearMeet()
		return nil
	}
	listen, err := anyPort(l.cfg.Listen)
	if err != nil {
		return err
	}
	var nodes []*peer.Node
	for _, p := range prev {
		n, err := peer.New(context.WithoutCancel(ctx), peer.Config{
			Identity:   l.identity,
			Library:    peerLibrary(p),
			Name:       l.Name(),
			Store:      syncStore{l},
			Listen:     listen,
			Peers:      append(slices.Clone(l.cfg.Peers), peers...),
			MDNS:       l.cfg.MDNS,
			Now:        l.cfg.Now,
			Logger:     l.log.With("component", "peer", "secret", "previous", "epoch", p.Epoch),
			Removed:    l.members.removed,
			Restricted: true,
			Admit:      l.members.current,
			OnRekey:    l.onRekey,
			RekeyOffer: l.previousOffer,
		})
		if err != nil {
			l.log.Warn("start the node that brings members over from a previous secret", "epoch", p.Epoch, "err", err)
			continue
		}
		nodes = append(nodes, n)
	}
	// Members met on losing secrets (meetOnPrevious) are dialled by the
	// nodes published here, whichever of the two came first.
	meet, ok := l.net.setPrevious(nodes)
	if !ok {
		for _, n := range nodes {
			n.Close()
		}
		return errors.New("the library is closing")
	}
	if len(meet) > 0 {
		l.dialFromPrevious(nodes, meet)
	}
	l.log.Info("bringing members over from the previous secrets", "secrets", len(nodes), "peers", peers)
	return nil
}

// closePreviousLocked closes the restricted nodes. Callers hold l.moveMu.
func (l *Library) closePreviousLocked() {
	for _, n := range l.net.takePrevious() {
		if err := n.Close(); err != nil {
			l.log.Warn("stop a node on a previous secret", "err", err)
		}
	}
}

var tcpPort = regexp.MustCompile(`/tcp/[0-9]+`)

// anyPort is the listen addresses with the ports left to the system: the
// restricted nodes cannot take the main node's ports. Nil stays nil (the
// default addresses).
func anyPort(addrs []multiaddr.Multiaddr) ([]multiaddr.Multiaddr, error) {
	var out []multiaddr.Multiaddr
	for _, a := range addrs {
		m, err := multiaddr.NewMultiaddr(tcpPort.ReplaceAllString(a.String(), "/tcp/0"))
		if err != nil {
			return nil, fmt.Errorf("listen address %s: %w", a, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// currentOffer is what this device tells a member about the current
// secret, with where its main node listens.
func (l *Library) currentOffer() (peer.Rekey, bool) {
	lib, ok := l.store.Library()
	if !ok {
		return peer.Rekey{}, false
	}
	r := peer.Rekey{Library: peerLibrary(lib), Removed: l.members.removedIDs(), Members: l.roster()}
	if node := l.net.current(); node != nil {
		r.Addrs = node.Addrs()
	}
	r.Addrs = append(r.Addrs, l.net.previousAddrs()...)
	return r, true
}

// previousOffer is what a restricted node offers every member it meets:
// the current secret.
func (l *Library) previousOffer(to crdt.DeviceID) (peer.Rekey, bool) {
	if !l.members.current(to) {
		return peer.Rekey{}, false
	}
	return l.currentOffer()
}

// mainOffer runs when a member connects to the main node on secret lib:
// it is on that secret. A library that has rotated tells it the epoch and
// its roster (a device that joined by an invite knows neither). A device
// that is not a member is told nothing.
func (l *Library) mainOffer(lib peer.Library, to crdt.DeviceID) (peer.Rekey, bool) {
	if !l.members.current(to) {
		return peer.Rekey{}, false
	}
	l.noteOnCurrent(lib, to)
	r, ok := l.currentOffer()
	if !ok || r.Library.Epoch == 0 {
		return peer.Rekey{}, false
	}
	return r, true
}

// noteOnCurrent records that a device was seen on secret lib, if that is
// the current secret, and once every current member has been, closes the
// restricted nodes and drops the superseded secrets. A node being replaced
// still meets devices on the secret it runs on: they are not on the new
// one (peerNodes.seenOnCurrent).
func (l *Library) noteOnCurrent(lib peer.Library, id crdt.DeviceID) {
	if !l.net.seenOnCurrent(l.store, lib, id, l.self, l.members.currentIDs()) {
		return
	}
	l.spawn(func() {
		l.moveMu.Lock()
		defer l.moveMu.Unlock()
		l.closePreviousLocked()
		l.net.clearMeet()
		ctx, cancel := context.WithTimeout(context.Background(), handshakeWrite)
		defer cancel()
		if err := l.store.DropPreviousLibraries(ctx); err != nil {
			l.log.Warn("forget the previous library secrets", "err", err)
			return
		}
		l.log.Info("every member has the current library secret; the previous secrets are forgotten")
	})
}
