package peer

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
)

// Dialling. Static peers (Config.Peers), peers given to Connect, and every
// peer that has completed a hello (a member of the library, however it was
// found) get a keeper goroutine that redials them with backoff whenever they
// are not connected; peers found by mDNS and not yet heard from are dialled
// once per discovery, subject to the same backoff. A member that was just
// lost is redialled every reconnectCap for reconnectWindow, so that a healed
// network or a device back from a short trip is found within seconds;
// after that it waits like any other address. Every dial bypasses
// libp2p's own dial backoff (whose 5 s floor would swallow our first
// retries) and is bounded by dialTimeout.
// A failing address is logged once, at warning level, until it works again:
// a stranger (another library's key) looks exactly like a failing address.

// addStatic remembers info as a peer to keep connected and starts its keeper.
// If the caller dials right away (Connect), the keeper's first dial waits for
// that one's outcome instead of racing it.
func (n *Node) addStatic(info lpeer.AddrInfo, callerDials bool) *peerState {
	n.host.Peerstore().AddAddrs(info.ID, info.Addrs, peerstore.PermanentAddrTTL)
	n.mu.Lock()
	st := n.peer(info.ID)
	st.addrs = mergeAddrs(st.addrs, info.Addrs)
	start := n.keepLocked(st)
	if start && callerDials {
		st.nextDial = n.now().Add(dialTimeout + time.Second)
	}
	n.mu.Unlock()
	if start {
		n.spawn(func() { n.keep(st) })
	}
	return st
}

// keepLocked marks st as kept and reports whether its keeper must be
// started. n.mu must be held.
func (n *Node) keepLocked(st *peerState) bool {
	start := !st.kept
	st.kept = true
	return start
}

// Reconnecting to a lost member: every reconnectCap at most, for
// reconnectWindow after the loss.
const (
	reconnectCap    = time.Second
	reconnectWindow = 2 * time.Minute
)

// keep redials st whenever it is not connected, waiting out the backoff of
// failed dials; a poke (disconnect, Connect, mDNS) makes it look again.
func (n *Node) keep(st *peerState) {
	for {
		if n.gater.refused(st.id) {
			// Removed from the library, or not a member a restricted node
			// admits: the gater would refuse every dial, so the keeper
			// stops rather than count refusals for ever.
			n.mu.Lock()
			st.kept = false
			n.mu.Unlock()
			why := "it was removed from the library"
			if n.gater.removed == nil || !n.gater.removed(st.device) {
				why = "it is not a member this node admits"
			}
			n.log.Info("stopped redialling a device", "peer", st.id, "device", st.device, "why", why)
			return
		}
		n.mu.Lock()
		connected := st.connected
		wait := st.nextDial.Sub(n.now())
		if st.dialNow {
			wait, st.dialNow = 0, false
		}
		n.mu.Unlock()
		if connected {
			select {
			case <-st.wake:
				continue
			case <-n.ctx.Done():
				return
			}
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-st.wake:
			case <-n.ctx.Done():
				t.Stop()
				return
			}
			t.Stop()
			continue
		}
		n.dial(n.ctx, st)
	}
}

// dialDiscovered dials a peer found by mDNS, unless it is connected, already
// being dialled, or in backoff.
func (n *Node) dialDiscovered(id lpeer.ID, addrs []ma.Multiaddr) {
	if id == n.host.ID() || n.gater.refused(id) {
		return
	}
	n.mu.Lock()
	st := n.peers[id]
	if st == nil {
		known := 0
		for _, p := range n.peers {
			if p.discovered && !p.kept && p.name == "" {
				known++
			}
		}
		if known >= maxDiscoveredPeers {
			n.mu.Unlock()
			n.log.Debug("mdns: too many unconnected discovered peers, ignoring", "peer", id)
			return
		}
		st = n.peer(id)
	}
	st.discovered = true
	st.addrs = mergeAddrs(st.addrs, addrs)
	switch {
	case st.connected:
		n.mu.Unlock()
		return
	case st.kept:
		// The keeper dials it now, even in backoff: discovery is itself
		// rate-limited, and the peer has just shown it is back.
		st.dialNow = true
		n.mu.Unlock()
		st.poke()
		return
	case st.dialing || n.now().Before(st.nextDial):
		n.mu.Unlock()
		return
	}
	st.dialing = true
	n.mu.Unlock()
	n.spawn(func() {
		n.dial(n.ctx, st)
		n.mu.Lock()
		st.dialing = false
		n.mu.Unlock()
	})
}

// dial makes one attempt to connect to st and schedules the next one.
func (n *Node) dial(ctx context.Context, st *peerState) error {
	n.stats.dialAttempts.Add(1)
	n.mu.Lock()
	addrs := append([]ma.Multiaddr(nil), st.addrs...)
	attempt := st.dialCount
	st.dialCount++
	st.dialsActive++
	n.mu.Unlock()

	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	// The node paces its own redials (dialBackoff, reconnectCap); the
	// swarm's per-address backoff would refuse the dial that finds a member
	// back from a restart. Clearing it, rather than dialling with
	// network.WithForceDirectDial, keeps the swarm off its forced-direct
	// path, which dereferences a transport that Close has already dropped
	// when a dial is still being resolved (libp2p issue 1545).
	if sw, ok := n.host.Network().(*swarm.Swarm); ok {
		sw.Backoff().Clear(st.id)
	}
	cctx, addrs := n.viaRelays(dctx, st, addrs)
	err := n.host.Connect(cctx, lpeer.AddrInfo{ID: st.id, Addrs: addrs})

	n.mu.Lock()
	st.dialsActive--
	n.progressedLocked()
	// Even after a success the next dial waits: the connection event may
	// not have arrived yet, and the keeper must not dial again meanwhile.
	delay := dialBackoff.delay(attempt)
	if st.member && n.now().Sub(st.lostAt) < reconnectWindow {
		delay = min(delay, reconnectCap)
	}
	st.nextDial = n.now().Add(delay)
	if err == nil {
		st.logged = nil
		n.mu.Unlock()
		return nil
	}
	if ctx.Err() != nil {
		n.mu.Unlock()
		return err
	}
	st.lastErr = err.Error()
	fresh := st.unlogged(addrs)
	next, member := st.nextDial, st.member
	n.mu.Unlock()
	switch {
	case len(fresh) > 0 && (member || nothingListens(err)):
		// Offline, asleep or restarting: the normal life of a device.
		n.log.Info("peer unreachable; retrying with backoff", "peer", st.id, "addrs", fresh, "err", err)
	case len(fresh) > 0:
		n.log.Warn("cannot connect to peer: it answered but the handshake failed; it may not be a member of this library (no shared secret); retrying with backoff",
			"peer", st.id, "addrs", fresh, "err", err)
	default:
		n.log.Debug("dial failed again", "peer", st.id, "err", err, "next", next)
	}
	return err
}

// viaRelays adds to a dial of st the relays this device has (away.go),
// with the context that allows a relayed connection. A member not reached
// directly is also dialled through them, unless a relayed connection is
// up: then only the direct addresses are tried, which finds the member come
// home or reachable again while the hole punch goes on. Of two members,
// only the one with the lower peer id dials the other through a relay: the
// device a relayed connection reaches starts the hole punch, and two at
// once, one from each side, dial the same address pair from the same ports
// and fail each other. The other is dialled at once when its addresses
// change (meet), as a device that comes back from elsewhere does.
func (n *Node) viaRelays(ctx context.Context, st *peerState, addrs []ma.Multiaddr) (context.Context, []ma.Multiaddr) {
	if n.host.ID() < st.id && n.isMember(st.device) && !relayedOnly(n.host.Network().ConnsToPeer(st.id)) {
		if via := n.away.circuits(st.id); len(via) > 0 {
			return network.WithAllowLimitedConn(ctx, "hole punch"), append(addrs, via...)
		}
	}
	return ctx, addrs
}

// unlogged returns the addresses among addrs whose failure has not been
// logged since st was last reached, and marks them logged. The caller holds
// the node's lock.
func (st *peerState) unlogged(addrs []ma.Multiaddr) []string {
	var fresh []string
	for _, a := range addrs {
		if !st.logged[a.String()] {
			if st.logged == nil {
				st.logged = make(map[string]bool)
			}
			st.logged[a.String()] = true
			fresh = append(fresh, a.String())
		}
	}
	return fresh
}

// nothingListens reports whether every address of a failed dial failed
// before a handshake could start: refused, unroutable or silent. A member
// of another library gets further: it accepts the connection and then the
// handshake fails.
func nothingListens(err error) bool {
	var de *swarm.DialError
	if errors.As(err, &de) && len(de.DialErrors) > 0 {
		for _, te := range de.DialErrors {
			if !failedToDial(te.Cause) {
				return false
			}
		}
		return true
	}
	return failedToDial(err)
}

func failedToDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
