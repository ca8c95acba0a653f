package peer

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// protectTag keeps library peers out of the connection manager's trimming:
// every peer that completes the private-network handshake holds the
// secret (a member, or a device that may become one).
const protectTag = "danyue-library"

// maxDiscoveredPeers bounds the peers known only from mDNS answers (never
// connected, not kept), so that a LAN full of forged announcements cannot
// grow the table without bound.
const maxDiscoveredPeers = 64

// peerState is everything the node tracks about one peer. Fields are guarded
// by Node.mu except echo, which has its own lock.
type peerState struct {
	id     lpeer.ID
	device crdt.DeviceID
	name   string
	addrs  []ma.Multiaddr // known dial addresses

	kept       bool // a keeper goroutine redials it (dialer.go)
	member     bool // completed a hello: a device of this library
	discovered bool // known from mDNS
	wake       chan struct{}
	dialNow    bool // the keeper should dial without waiting for its backoff
	dialing    bool // a one-shot dial (mDNS) is in flight
	dialCount  int  // dials since the last stable connection
	nextDial   time.Time
	logged     map[string]bool // addresses whose dial failure was logged

	connected   bool
	connectedAt time.Time
	connCtx     context.Context    // lives as long as this connection
	cancelConn  context.CancelFunc // ends this connection's pull loop
	// waiting: connected, but not a member (Config.Member), so given
	// nothing until Admitted says it is one.
	waiting bool
	// admitsUs is poked when the peer pulls from us: it holds us for a
	// member, so a pull of ours it refused as not one is worth retrying.
	admitsUs  chan struct{}
	caps      uint64        // the capability bits of its latest hello
	pullDone  chan struct{} // closed when the previous pull loop returned
	punched   bool          // this connection was made by hole punching (away.go)
	announced bool          // PeerConnected was emitted for this connection
	serving   int           // sync streams we are sending on to it
	fanout    *fanout       // what it said on its latest pull stream of devices it pulls from (fanout.go)
	lastSeen  time.Time
	lostAt    time.Time // when the last connection to a member ended
	lastErr   string
	pullConn  network.Conn // the connection our pull stream runs on
	// pullMoved: admitSync closed pullConn for a newer connection, so the
	// pull reopens there at once rather than after a backoff.
	pullMoved  bool
	cancelPull context.CancelFunc // ends our pull stream (it reopens)
	resendAll  bool               // our next pull starts from 0 (see noteRegression)

	refusals int // our pull streams in a row that refused records (refused.go)

	clockOffset time.Duration
	clockKnown  bool
	skewWarned  bool // PeerClockSkewed was emitted for this connection
	merged      uint64
	remoteLast  uint64
	recordsIn   uint64 // records received from it, since the node started
	recordsOut  uint64 // records sent to it
	theyPull    bool   // its pull from us has said hello on this connection
	acked       uint64 // our sequence number it has merged up to
	dialsActive int    // dials to it under way
	round       syncRound
	toGo        uint64 // records still to come from it (togo.go)

	echo echoSet
}

// peer returns the state of id, creating it. n.mu must be held.
func (n *Node) peer(id lpeer.ID) *peerState {
	st := n.peers[id]
	if st == nil {
		st = &peerState{id: id, device: DeviceIDOf(id), wake: make(chan struct{}, 1), admitsUs: make(chan struct{}, 1)}
		n.peers[id] = st
	}
	return st
}

func (st *peerState) poke() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// watchConnections follows libp2p's per-peer connectedness: the first
// connection to a peer starts pulling from it, losing the last one stops
// that and lets the keeper redial.
func (n *Node) watchConnections() {
	for {
		select {
		case <-n.ctx.Done():
			return
		case ev, ok := <-n.sub.Out():
			if !ok {
				return
			}
			e := ev.(event.EvtPeerConnectednessChanged)
			switch e.Connectedness {
			case network.Connected:
				n.onConnected(e.Peer)
			case network.NotConnected, network.Limited:
				// A relayed connection carries no sync (away.go).
				if n.away != nil {
					n.away.lost(e.Peer)
				}
				if e.Connectedness == network.Limited {
					n.log.Info("reached a peer through a member's relay; trying to connect directly", "peer", e.Peer)
				}
				n.onDisconnected(e.Peer)
			}
		}
	}
}

func (n *Node) onConnected(id lpeer.ID) {
	n.host.ConnManager().Protect(id, protectTag)
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.peer(id)
	if st.connected {
		return
	}
	now := n.now()
	st.connected, st.connectedAt, st.lastSeen, st.lastErr = true, now, now, ""
	// A direct connection that came while a relayed one was up is taken
	// for the hole punch's (away.go); a direct dial that found the peer
	// in those two minutes would pass for one too.
	st.punched = false
	for _, c := range n.host.Network().ConnsToPeer(id) {
		st.punched = st.punched || c.Stat().Limited
	}
	n.progressedLocked()
	st.connCtx, st.cancelConn = context.WithCancel(n.ctx)
	if !n.cfg.Restricted && !n.isMember(st.device) {
		// It holds the secret but is no member: nothing until it is one.
		st.waiting = true
		n.log.Info("connected to a device that is not a member of the library; it is given nothing unless it becomes one", "peer", id, "device", st.device)
		return
	}
	n.startConnLocked(st)
}

// startConnLocked starts what a connection to a member carries: the offer
// of a secret, summaries, and (but on a restricted node) our pull. n.mu
// must be held.
func (n *Node) startConnLocked(st *peerState) {
	id, ctx := st.id, st.connCtx
	if n.cfg.RekeyOffer != nil {
		n.spawn(func() { n.offerOnConnect(id) })
	}
	if n.cfg.Summaries != nil && !n.cfg.Restricted {
		n.spawn(func() { n.summariesOnConnect(id) })
	}
	if n.cfg.Restricted {
		// No sync here: the connection carries only rekey offers.
		st.pullDone = nil
		return
	}
	// One pull loop per peer at a time: the loop of a previous connection
	// may still be returning, and two would race on the cursor.
	prev, done := st.pullDone, make(chan struct{})
	st.pullDone = done
	started := n.spawn(func() {
		defer close(done)
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				return
			}
		}
		n.pullLoop(ctx, st)
	})
	if !started {
		close(done)
	}
}

// errClosedBeforeHello is the note left on a member whose connection
// ended before its first hello.
var errClosedBeforeHello = errors.New("the connection closed before the peer's first hello; " +
	"if this repeats, it may have removed this device from the library or moved to a secret this device lacks")

func (n *Node) onDisconnected(id lpeer.ID) {
	n.mu.Lock()
	st := n.peers[id]
	if st == nil || !st.connected {
		n.mu.Unlock()
		return
	}
	now := n.now()
	st.connected, st.lastSeen, st.lostAt, st.waiting = false, now, now, false
	st.cancelConn()
	if now.Sub(st.connectedAt) >= stableConn {
		st.dialCount, st.nextDial = 0, time.Time{}
	}
	announced := st.announced
	if !announced && st.lastErr == "" && n.ctx.Err() == nil && !n.cfg.Restricted && n.isMember(st.device) {
		// A member that lets the connection up and drops it before any
		// hello (a node on a superseded secret that does not admit us, a
		// gater that refused us once it knew who we are) leaves no failed
		// dial or stream behind: without this the peer would look merely
		// offline, and the user would not learn that it refuses us.
		st.lastErr = errClosedBeforeHello.Error()
	}
	st.announced, st.skewWarned, st.theyPull = false, false, false
	n.progressedLocked()
	info := n.info(st)
	n.mu.Unlock()
	// What the peer was sent back is only known while connected: drop it
	// rather than keep memory for peers that may never return.
	st.echo.reset()
	n.host.ConnManager().Unprotect(id, protectTag)
	st.poke()
	if announced {
		n.log.Info("peer disconnected", "peer", id, "device", st.device, "name", info.Name)
		n.events.emit(Event{Kind: PeerDisconnected, Peer: info})
	}
}

// Peers returns what the node knows of every peer it has configured,
// discovered or been connected to, sorted by device id.
func (n *Node) Peers() []PeerInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]PeerInfo, 0, len(n.peers))
	for _, st := range n.peers {
		out = append(out, n.info(st))
	}
	slices.SortFunc(out, func(a, b PeerInfo) int { return cmp.Compare(a.Device, b.Device) })
	return out
}

// info snapshots st. n.mu must be held.
func (n *Node) info(st *peerState) PeerInfo {
	pi := PeerInfo{
		Device:      st.device,
		Name:        st.name,
		ID:          st.id,
		Connected:   st.connected,
		Kept:        st.kept,
		LastSeen:    st.lastSeen,
		ClockOffset: st.clockOffset,
		ClockKnown:  st.clockKnown,
		ClockSkewed: st.clockKnown && st.clockOffset.Abs() > MaxClockOffset,
		Merged:      st.merged,
		RemoteLast:  st.remoteLast,
		CaughtUp:    st.announced && st.merged >= st.remoteLast,
		RecordsIn:   st.recordsIn,
		RecordsOut:  st.recordsOut,
		LastError:   st.lastErr,
	}
	pi.Pulling = n.progressLocked(st)
	if st.theyPull {
		last, _ := n.store.Watch()
		pi.Delivered = st.acked >= last
	}
	conns := n.host.Network().ConnsToPeer(st.id)
	pi.Relayed = !st.connected && relayedOnly(conns)
	pi.HolePunched = st.connected && st.punched
	if st.connected {
		for _, c := range conns {
			if !c.Stat().Limited {
				pi.Addrs = append(pi.Addrs, c.RemoteMultiaddr())
			}
		}
	} else {
		pi.Addrs = slices.Clone(st.addrs)
	}
	return pi
}

// mergeAddrs adds the addresses of add missing from have.
func mergeAddrs(have, add []ma.Multiaddr) []ma.Multiaddr {
	for _, a := range add {
		if !ma.Contains(have, a) {
			have = append(have, a)
		}
	}
	return have
}
