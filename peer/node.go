package peer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/lan"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Config configures a Node.
type Config struct {
	// Identity is the device's persisted Ed25519 key; the device id derives
	// from it (DeviceIDOf).
	Identity crypto.PrivKey
	Library  Library
	// Name is the device's display name, sent in hellos.
	Name  string
	Store Store
	// Listen overrides the listen addresses (default: every interface, IPv4
	// and IPv6, TCP on a port the OS chooses).
	Listen []ma.Multiaddr
	// Peers are static peers, each with its /p2p/<id> component, dialled at
	// start and redialled with backoff whenever they go away.
	Peers []ma.Multiaddr
	// MDNS turns on discovery on the LAN.
	MDNS bool
	// MDNSInterfaces restricts discovery to these interfaces (default: every
	// up, multicast-capable, non-loopback interface).
	MDNSInterfaces []net.Interface
	// Now is the daemon's wall clock (possibly skewed on purpose), sent in
	// hellos and used to estimate peers' clock offsets. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// OnEvent, if set, is called with peer events, in order, from one
	// goroutine; it should not block for long.
	OnEvent func(Event)
	// Removed, if set, reports whether a device was removed from the
	// library: its connections are refused (gater.go). It is called on
	// libp2p's goroutines, for every dial and connection, and must not
	// block.
	Removed func(crdt.DeviceID) bool
	// Restricted makes a node that carries only the rekey protocol (no
	// sync), and connects, in both directions, only with the devices Admit
	// accepts: the node a device keeps on a superseded secret, to bring
	// members still on it over to the new one (rekey.go).
	Restricted bool
	// Admit, for a restricted node, reports whether a device may connect;
	// it is called like Removed and must not block.
	Admit func(crdt.DeviceID) bool
	// Member, if set, reports whether a device is a current member of the
	// library. A device that completes the private network's handshake
	// holds the secret, from an invite code perhaps, but only a member is
	// given anything: synced with in either direction, offered a secret,
	// sent summaries or residues. Any other device's sync streams are
	// refused with ErrNotMember, unless Redeem makes it a member. Nil: every
	// device that connects is a member. It must not block.
	Member func(crdt.DeviceID) bool
	// Redeem, if set, is called with the ticket a device that is not a
	// member presents in its hello (the ticket of a long invite code this
	// device made): it returns nil once it made the device a member, else
	// an error whose message the refused device is told.
	Redeem func(ctx context.Context, from crdt.DeviceID, ticket []byte) error
	// Ticket, if set, returns the ticket to present in the hello of a pull
	// from device to: that of the invite this device joined by, to the
	// device that made it; nil for any other.
	Ticket func(to crdt.DeviceID) []byte
	// OnRekey, if set, is called with every rekey offer a peer makes, and
	// reports whether the device took it (or has it already). It runs on
	// the offer's stream and must not block for long: a device that takes a
	// new secret restarts its nodes after answering.
	OnRekey func(from crdt.DeviceID, r Rekey) bool
	// RekeyOffer, if set, is called when a peer connects: what to offer it,
	// if anything.
	RekeyOffer func(to crdt.DeviceID) (Rekey, bool)
	// Summaries, if set, is what to gossip (summary.go): called when a
	// peer connects, it returns this device's summary and the latest
	// known of the others (crdt.Summaries.List order).
	Summaries func() []crdt.Summary
	// OnSummaries, if set, is called with every list of summaries a peer
	// sends; it must not block for long.
	OnSummaries func(from crdt.DeviceID, list []crdt.Summary)
	// Known is the address book this device kept from its last run
	// (addrbook.go): the members in it are dialled at start. OnKnown, if
	// set, is called with the whole book, from one goroutine, after it
	// changed; the daemon persists it.
	Known   []Known
	OnKnown func([]Known)
	// Announce are addresses the user says members can reach this device
	// on (a port forward, a DNS name), shared before those it listens on.
	Announce []ma.Multiaddr
	// PortMap asks the router for a port mapping to the listen port (UPnP
	// IGD or NAT-PMP, whichever it answers, renewed while the node runs),
	// so that the members reach this device from the internet at the
	// mapped address, which it shares with them like the others. Off by
	// default: a mapped port is open to the whole internet, which the user
	// decides, for the one member meant to be reachable.
	PortMap bool
	// OnResidues, if set, merges residues of collected books a peer hands
	// over (residues.go), without moving any cursor. An error wrapping
	// ErrRecordsRefused says some were over the sender's bound, which the
	// daemon logs: the node fails the handing without a warning of its own.
	OnResidues func(ctx context.Context, from crdt.DeviceID, entries []crdt.Entry) error
	// Reoffer is how long a pull stream whose batches had records refused
	// (ErrRecordsRefused) runs before it is pulled again, to have them
	// offered again; it doubles for each such stream of a peer in a row,
	// up to an hour. Default a minute (refused.go).
	Reoffer time.Duration

	// caughtEvery, if set, replaces defaultCaughtEvery (tests).
	caughtEvery time.Duration
	// deferWindow, if set, replaces deferWindow (tests).
	deferWindow time.Duration
	// noBook turns the address book off: nothing is shared, learnt or
	// dialled from it, so that the topology a test builds stays as built.
	noBook bool
}

// Node is one device's presence on the library's private network: a libp2p
// host, discovery, redialling, and sync streams in both directions with
// every connected member.
type Node struct {
	cfg  Config
	log  *slog.Logger
	now  func() time.Time
	host host.Host
	self crdt.DeviceID
	// run tells this node's hellos from those of the device's earlier
	// and later runs (lineage, knowledge.go).
	run   uint64
	store Store
	// sends is what this node sent to whom, and the delivered marks that
	// follow it (delivered.go).
	sends  deliveries
	sub    event.Subscription
	disc   *discovery
	events *eventQueue
	gater  *gater

	ctx    context.Context
	cancel context.CancelFunc
	// wg counts every goroutine the node starts or adopts (stream handlers
	// run on libp2p's goroutines but register here), so Close can join them.
	wg        sync.WaitGroup
	trackMu   sync.Mutex
	closed    bool
	closeOnce sync.Once
	closeErr  error
	eventsWG  sync.WaitGroup
	eventsEnd chan struct{}

	mu    sync.Mutex
	peers map[lpeer.ID]*peerState
	// progress, once SyncState made it, is closed at the next change of
	// sync progress (progressedLocked).
	progress chan struct{}
	// discovered: mDNS has finished its first query round (or is off).
	discovered bool

	stats stats

	// What this device knows it has of other devices' stores, which
	// records came from where, and the catch-up gate (knowledge.go).
	kn   knowledge
	prov provenance
	dir  directSet // the devices this device pulls from itself (fanout.go)
	gate catchUpGate

	book *addrBook // how to reach the members (addrbook.go)
	away *away     // relays and hole punching (away.go); nil on a restricted node
}

// New starts a node: it listens, dials the static peers, and starts mDNS
// if configured.
func New(ctx context.Context, cfg Config) (*Node, error) {
	static, err := cfg.check()
	if err != nil {
		return nil, fmt.Errorf("new node: %w", err)
	}
	psk, err := cfg.Library.psk()
	if err != nil {
		return nil, fmt.Errorf("new node: %w", err)
	}
	g := &gater{removed: cfg.Removed}
	if cfg.Restricted {
		g.admit = cfg.Admit
		if g.admit == nil {
			g.admit = func(crdt.DeviceID) bool { return false }
		}
	}
	h, start, err := newHost(&cfg, psk, g)
	if err != nil {
		return nil, fmt.Errorf("new node: %w", err)
	}
	sub, err := h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged), eventbus.BufSize(256))
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("new node: subscribe to connection events: %w", err)
	}
	n := &Node{
		cfg:    cfg,
		log:    cfg.Logger,
		now:    cfg.Now,
		host:   h,
		gater:  g,
		self:   DeviceIDOf(h.ID()),
		run:    rand.Uint64(),
		store:  cfg.Store,
		sub:    sub,
		events: newEventQueue(cfg.OnEvent),
		peers:  make(map[lpeer.ID]*peerState),
		sends:  deliveries{kick: make(chan struct{}, 1)},
		// Without mDNS there is no first round to wait for.
		discovered: !cfg.MDNS,
		eventsEnd:  make(chan struct{}),
		book:       newAddrBook(cfg.Known),
	}

	// The node outlives the ctx of New only through Close.
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n.setHandlers()
	// Only now can a member connect, and find every protocol served.
	if err := start(); err != nil {
		n.cancel()
		sub.Close()
		h.Close()
		return nil, fmt.Errorf("new node: %w", err)
	}
	// Before anything that reads n.away runs (follow, the keepers).
	if !cfg.Restricted {
		if err := n.startAway(h.(interface{ IDService() identify.IDService }).IDService()); err != nil {
			n.log.Warn("cannot relay or hole punch; devices away from home sync through a member they reach directly", "err", err)
		}
	}
	n.follow()
	n.log.Info("peer node started", "peer", h.ID(), "device", n.self, "addrs", n.Addrs(), "restricted", cfg.Restricted, "epoch", cfg.Library.Epoch)
	for _, info := range static {
		if info.ID == h.ID() {
			continue
		}
		n.addStatic(info, false)
	}
	n.meetKnown()
	if cfg.MDNS {
		n.disc = n.startDiscovery()
		if len(n.disc.ifaces) == 0 {
			n.firstDiscoveryDone() // nothing to query
		}
	}
	return n, nil
}

// follow starts the goroutines that follow the node's connections and
// deliveries, and this device's addresses and network.
func (n *Node) follow() {
	n.eventsWG.Go(func() { n.events.run(n.eventsEnd) })
	n.spawn(n.watchConnections)
	n.spawn(n.markDelivered)
	if n.cfg.OnKnown != nil {
		n.spawn(n.saveKnown)
	}
	if addrSub, err := n.host.EventBus().Subscribe(new(event.EvtLocalAddressesUpdated)); err == nil {
		n.spawn(func() { n.watchAddrs(addrSub) })
	} else {
		n.log.Warn("cannot follow this device's address changes; members are redialled with backoff only", "err", err)
	}
	if changes, err := lan.Watch(n.ctx); err == nil {
		n.spawn(func() { n.watchNetwork(changes) })
	} else {
		n.log.Debug("the system does not report network changes; libp2p's look, once a minute, finds them", "err", err)
	}
}

// check checks cfg, fills in its defaults and returns its static peers.
func (cfg *Config) check() ([]lpeer.AddrInfo, error) {
	switch {
	case cfg.Identity == nil:
		return nil, errors.New("no identity key")
	case cfg.Store == nil:
		return nil, errors.New("no store")
	case cfg.Library.IsZero():
		return nil, ErrNoLibrary
	case len(cfg.Name) > crdt.MaxDeviceNameBytes:
		return nil, fmt.Errorf("device name of %d bytes exceeds %d", len(cfg.Name), crdt.MaxDeviceNameBytes)
	}
	if err := checkAnnounce(cfg.Announce); err != nil {
		return nil, err
	}
	static, err := lpeer.AddrInfosFromP2pAddrs(cfg.Peers...)
	if err != nil {
		return nil, fmt.Errorf("static peers must end in /p2p/<peer id>: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return static, nil
}

// setHandlers serves the node's protocols: a restricted node only rekey.
func (n *Node) setHandlers() {
	n.host.SetStreamHandler(RekeyProtocolID, n.handleRekey)
	if !n.cfg.Restricted {
		n.host.SetStreamHandler(ProtocolID, n.handleSync)
		n.host.SetStreamHandler(SummaryProtocolID, n.handleSummaries)
		n.host.SetStreamHandler(ResidueProtocolID, n.handleResidues)
	}
}

// spawn runs fn on a goroutine joined by Close, unless the node is closing.
func (n *Node) spawn(fn func()) bool {
	if !n.track() {
		return false
	}
	go func() {
		defer n.wg.Done()
		fn()
	}()
	return true
}

// track adds one to wg unless the node is closing; the caller must call
// wg.Done when it returns true.
func (n *Node) track() bool {
	n.trackMu.Lock()
	defer n.trackMu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	return true
}

// Close stops discovery, closes every connection and stream, and returns
// once every goroutine the node started has returned.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.trackMu.Lock()
		n.closed = true
		n.trackMu.Unlock()
		// From here no dial starts, libp2p's own included (gater.go).
		n.gater.closing.Store(true)
		n.cancel()
		// The connections close before any handler goes: removing one
		// makes libp2p's identify push the new list of protocols to every
		// connected peer, and the host's Close waits for each answer, up
		// to five seconds when those peers are stopping too.
		for _, c := range n.host.Network().Conns() {
			c.Close()
		}
		n.host.RemoveStreamHandler(ProtocolID)
		n.host.RemoveStreamHandler(RekeyProtocolID)
		n.host.RemoveStreamHandler(SummaryProtocolID)
		n.host.RemoveStreamHandler(ResidueProtocolID)
		if n.disc != nil {
			n.disc.close()
		}
		n.sub.Close()
		// Our goroutines end first (the cancel above ends their dials and
		// resets their streams): libp2p tears its transports down in Close
		// without waiting for dials still in flight, and a dial of ours
		// racing that teardown crashes in its dial worker (libp2p issue
		// 1545).
		n.wg.Wait()
		if n.away != nil {
			n.away.close()
		}
		// Every send stream has ended: the marks cover all that was sent.
		if err := n.flushMarks(context.Background()); err != nil {
			n.log.Warn("could not record what was sent to peers", "err", err)
		}
		n.closeErr = n.host.Close()
		close(n.eventsEnd)
		n.eventsWG.Wait()
		n.log.Info("peer node stopped", "peer", n.host.ID())
	})
	return n.closeErr
}

// ID returns the node's libp2p peer id.
func (n *Node) ID() lpeer.ID { return n.host.ID() }

// Device returns the node's device id.
func (n *Node) Device() crdt.DeviceID { return n.self }

// Addrs returns the addresses the node listens on, each with its /p2p
// component, as other devices' --peer flags take them.
func (n *Node) Addrs() []ma.Multiaddr {
	p2p, err := ma.NewComponent("p2p", n.host.ID().String())
	if err != nil {
		return nil
	}
	var out []ma.Multiaddr
	for _, a := range n.host.Addrs() {
		out = append(out, a.Encapsulate(p2p))
	}
	return out
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats { return n.stats.snapshot() }

// Invite returns an invite code for this library that names this device and
// its addresses as the first peer to dial, without a ticket.
func (n *Node) Invite() string { return n.InviteTicket(nil) }

// InviteTicket is Invite with the one-time ticket ticket (nil for none).
func (n *Node) InviteTicket(ticket []byte) string {
	addrs := slices.Clone(n.host.Addrs())
	// Routable addresses first: the invite keeps only the first few, and a
	// loopback address only helps a device on this same machine.
	slices.SortStableFunc(addrs, func(a, b ma.Multiaddr) int {
		return cmp.Compare(addrRank(a), addrRank(b))
	})
	return EncodeInvite(Invite{Library: n.cfg.Library, Peer: n.host.ID(), Addrs: addrs, Ticket: ticket})
}

func addrRank(a ma.Multiaddr) int {
	switch {
	case manet.IsIPLoopback(a):
		return 2
	case manet.IsIP6LinkLocal(a):
		return 1
	}
	return 0
}

// Connect dials the peers of addrs (each with /p2p/<id>) and remembers them,
// so they are redialled with backoff whenever they go away: what a device
// does with the inviter's addresses after joining. It returns once every
// peer is connected, or with the dial errors.
func (n *Node) Connect(ctx context.Context, addrs []ma.Multiaddr) error {
	infos, err := lpeer.AddrInfosFromP2pAddrs(addrs...)
	if err != nil {
		return fmt.Errorf("connect: addresses must end in /p2p/<peer id>: %w", err)
	}
	var errs []error
	for _, info := range infos {
		if info.ID == n.host.ID() {
			continue
		}
		st := n.addStatic(info, true)
		if err := n.dial(ctx, st); err != nil {
			errs = append(errs, fmt.Errorf("connect to %s: %w", info.ID, err))
		}
	}
	return errors.Join(errs...)
}
