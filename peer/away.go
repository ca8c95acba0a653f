package peer

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/danyue/danyue/internal/lan"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Away from home: two devices that are both behind NAT, and both away from
// the member reachable from the internet, meet through that member and
// then connect directly (docs/design.md, "Away from home").
//
// Every member serves as a circuit relay (libp2p's circuit relay v2) for
// the library's members only, with libp2p's limits on each relayed
// connection (two minutes, 128 KiB each way). A device connected to a
// member over a public address keeps a reservation there, so that the
// other members can reach it through that member; a device that cannot
// dial a member directly also dials it through each member it is
// connected to over a public address. The relayed connection carries no
// sync (the member in the middle holds every record anyway, and syncs
// them itself); it lets the two devices hole punch (DCUtR): the device the
// relayed connection reached asks the other for its public address, and
// both dial at once from their listen ports (tcp.go), so that NATs that
// keep the source port let the two SYNs cross. The public address each
// device offers is its listen port at the address a member over the
// internet saw it at (identify). Behind a NAT that maps each destination
// to a new port, the punch fails, the relayed connection ends after its
// two minutes, and sync goes on through the member, as before; the next
// dial tries again.
type away struct {
	n     *Node
	relay *relayv2.Relay
	ids   identify.IDService

	mu sync.Mutex
	// relays are the members connected over a public address, at that
	// address: where this device reserves, and dials others through.
	relays map[lpeer.ID]ma.Multiaddr
	// reserving ends the reservation loop at a relay.
	reserving map[lpeer.ID]context.CancelFunc
	// seenAs is this device's public IP as each relay saw it.
	seenAs map[lpeer.ID]net.IP
	punch  *holepunch.Service // started once seenAs has an address
}

// reserveRetry is how soon a failed reservation is tried again; a
// granted one is renewed reserveMargin before it expires.
const (
	reserveRetry  = time.Minute
	reserveMargin = 5 * time.Minute
)

// relayResources are libp2p's defaults with room for a library's devices:
// one reservation each, and circuits only for hole punching.
func relayResources() relayv2.Resources {
	r := relayv2.DefaultResources()
	r.MaxReservations = maxKnownDevices
	r.MaxReservationsPerIP = maxKnownDevices
	r.MaxReservationsPerASN = maxKnownDevices
	r.MaxCircuits = 4
	return r
}

// startAway starts the relay service and follows identification, which
// says who is a relay and how they see this device.
func (n *Node) startAway(ids identify.IDService) error {
	sub, err := n.host.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
	if err != nil {
		return err
	}
	a := &away{n: n, ids: ids, relays: map[lpeer.ID]ma.Multiaddr{}, reserving: map[lpeer.ID]context.CancelFunc{}, seenAs: map[lpeer.ID]net.IP{}}
	a.relay, err = relayv2.New(n.host, relayv2.WithACL(memberACL{n}), relayv2.WithResources(relayResources()))
	if err != nil {
		sub.Close()
		return err
	}
	n.away = a
	n.spawn(func() {
		defer sub.Close()
		for {
			select {
			case <-n.ctx.Done():
				return
			case ev, ok := <-sub.Out():
				if !ok {
					return
				}
				a.identified(ev.(event.EvtPeerIdentificationCompleted))
			}
		}
	})
	return nil
}

// close stops the relay service and hole punching.
func (a *away) close() {
	a.relay.Close()
	a.mu.Lock()
	hp := a.punch
	a.mu.Unlock()
	if hp != nil {
		hp.Close()
	}
}

// memberACL lets the relay serve the library's members only.
type memberACL struct{ n *Node }

func (m memberACL) AllowReserve(p lpeer.ID, _ ma.Multiaddr) bool {
	return !m.n.refusedAsStranger(p)
}

func (m memberACL) AllowConnect(src lpeer.ID, _ ma.Multiaddr, dest lpeer.ID) bool {
	return !m.n.refusedAsStranger(src) && !m.n.refusedAsStranger(dest)
}

// public reports whether a is a direct address on the internet: not
// relayed, not on a private network.
func public(a ma.Multiaddr) (net.IP, bool) {
	if a == nil || isRelayed(a) {
		return nil, false
	}
	ip, err := manet.ToIP(a)
	return ip, err == nil && !lan.Private(ip) && !ip.IsUnspecified() && !ip.IsMulticast()
}

func isRelayed(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// identified takes a member identified over a public address for a relay,
// and what it saw of this device.
func (a *away) identified(e event.EvtPeerIdentificationCompleted) {
	if e.Conn == nil || a.n.refusedAsStranger(e.Peer) {
		return
	}
	if _, ok := public(e.Conn.RemoteMultiaddr()); !ok {
		return
	}
	a.mu.Lock()
	_, known := a.relays[e.Peer]
	a.relays[e.Peer] = e.Conn.RemoteMultiaddr()
	if ip, ok := public(e.ObservedAddr); ok {
		a.seenAs[e.Peer] = ip
		a.startPunchLocked()
	}
	if a.reserving[e.Peer] == nil {
		ctx, cancel := context.WithCancel(a.n.ctx)
		a.reserving[e.Peer] = cancel
		p := e.Peer
		a.n.spawn(func() { a.reserve(ctx, p) })
	}
	a.mu.Unlock()
	if !known {
		// The members not reached directly may be reached through it.
		a.n.dialMembersNow()
	}
}

// lost forgets relay p when the last direct connection to it ended.
func (a *away) lost(p lpeer.ID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cancel := a.reserving[p]; cancel != nil {
		cancel()
		delete(a.reserving, p)
	}
	delete(a.relays, p)
	delete(a.seenAs, p)
}

// reserve keeps a reservation at relay p until ctx ends.
func (a *away) reserve(ctx context.Context, p lpeer.ID) {
	for {
		rctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		r, err := client.Reserve(rctx, a.n.host, lpeer.AddrInfo{ID: p})
		cancel()
		wait := reserveRetry
		if err == nil {
			wait = max(time.Until(r.Expiration)-reserveMargin, reserveRetry)
			a.n.log.Debug("reserved a relay slot", "relay", p, "expires", r.Expiration)
		} else if ctx.Err() == nil {
			a.n.log.Debug("relay reservation failed", "relay", p, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// startPunchLocked starts hole punching the first time this device knows
// its public address: before that it has nothing to offer, and libp2p's
// service would look for one every few seconds. a.mu must be held.
func (a *away) startPunchLocked() {
	if a.punch != nil {
		return
	}
	hp, err := holepunch.NewService(a.n.host, a.ids, a.punchAddrs, holepunch.WithTracer(punchLog{a.n}))
	if err != nil {
		a.n.log.Warn("cannot hole punch; devices behind NAT sync through a reachable member", "err", err)
		return
	}
	a.punch = hp
}

// punchLog says how each hole punch went: rare (one per relayed
// connection), and what a user away wants to know.
type punchLog struct{ n *Node }

func (l punchLog) Trace(e *holepunch.Event) {
	switch ev := e.Evt.(type) {
	case *holepunch.StartHolePunchEvt:
		l.n.log.Debug("hole punching", "peer", e.Remote, "addrs", ev.RemoteAddrs, "rtt", ev.RTT)
	case *holepunch.EndHolePunchEvt:
		if ev.Success {
			l.n.log.Info("connected directly by hole punching", "peer", e.Remote, "took", ev.EllapsedTime)
		} else {
			l.n.log.Info("hole punch failed; syncing through the member in between", "peer", e.Remote, "took", ev.EllapsedTime, "err", ev.Error)
		}
	case *holepunch.ProtocolErrorEvt:
		l.n.log.Info("hole punch failed; syncing through the member in between", "peer", e.Remote, "err", ev.Error)
	}
}

// punchAddrs are the addresses this device offers for a hole punch: the
// IPs relays saw it at, with its IPv4 listen port, which a NAT that keeps
// source ports maps to itself.
func (a *away) punchAddrs() []ma.Multiaddr {
	port := 0
	for _, l := range a.n.host.Network().ListenAddresses() {
		if p, ok := tcp4Port(l); ok {
			port = p
			break
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []ma.Multiaddr
	for _, ip := range a.seenAs {
		ip4 := ip.To4()
		if ip4 == nil || port == 0 {
			continue
		}
		m, err := ma.NewMultiaddr("/ip4/" + ip4.String() + "/tcp/" + strconv.Itoa(port))
		if err == nil && !ma.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// circuits are the addresses that reach member p through the relays this
// device is connected to, but p itself.
func (a *away) circuits(p lpeer.ID) []ma.Multiaddr {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []ma.Multiaddr
	for r, addr := range a.relays {
		if r == p {
			continue
		}
		c, err := ma.NewMultiaddr("/p2p/" + r.String() + "/p2p-circuit")
		if err == nil {
			out = append(out, addr.Encapsulate(c))
		}
	}
	slices.SortFunc(out, func(x, y ma.Multiaddr) int { return x.Compare(y) })
	return out
}

// relayedOnly reports whether every connection to p is a relayed one.
func relayedOnly(conns []network.Conn) bool {
	for _, c := range conns {
		if !c.Stat().Limited {
			return false
		}
	}
	return len(conns) > 0
}
