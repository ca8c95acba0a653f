package peer

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/sec"
	"github.com/libp2p/go-libp2p/core/transport"
	basichost "github.com/libp2p/go-libp2p/p2p/host/basic"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/net/upgrader"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/x/rate"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Timeouts. Readers wait for a frame as long as it takes (a push stream is
// idle most of the time; TCP keepalives notice a dead connection, see
// tcp.go), but everything that has begun must finish in bounded time.
const (
	// dialTimeout bounds one dial. A dial to a host with another pre-shared
	// key sometimes hangs (its side cannot decrypt our multistream header and
	// waits for more) instead of failing fast, so this is short: on a LAN a
	// member answers in milliseconds.
	dialTimeout = 2 * time.Second
	// handshakeTimeout bounds opening a sync stream and the hello exchange.
	handshakeTimeout = 10 * time.Second
	// frameTimeout bounds reading the body of a frame whose length arrived,
	// and writing one frame.
	frameTimeout = 30 * time.Second
	// stableConn is how long a connection must last for its loss to reset
	// the redial backoff: a connection that keeps dropping right after it is
	// made is redialled with growing delays, not in a loop.
	stableConn = 10 * time.Second
)

// defaultListen is every interface, on a port the OS chooses.
var defaultListen = []string{"/ip4/0.0.0.0/tcp/0", "/ip6/::/tcp/0"}

// newHost builds the libp2p host of a library: TCP only (QUIC and the other
// UDP transports cannot run behind a private network's pre-shared key),
// Noise, yamux, and none of the public-internet machinery: no AutoNAT
// probing, no DHT, no ping service; relays and hole punching among the
// library's members only (away.go), and a NAT port mapping only when asked
// (Config.PortMap). The
// resource manager keeps its default scaled limits, with the connection
// rate limit on inbound connections only. g refuses removed devices
// (gater.go).
//
// It is assembled from libp2p's parts (swarm, upgrader, basic host) rather
// than by libp2p.New, whose package links every transport it can build
// (QUIC, WebTransport, WebRTC, WebSocket) and the dependency injection
// that picks among them: a quarter of the binary, which a daemon that
// speaks TCP only would carry for nothing.
//
// The host neither listens nor runs its services until start is called,
// so that the caller can set its stream handlers first: a member that
// connected in between (redialling a device back from a restart) would be
// told the sync protocol is not supported, take it for a build of another
// protocol and not pull from this device until it reconnected.
func newHost(cfg *Config, psk pnet.PSK, g *gater) (_ host.Host, start func() error, err error) {
	listen := cfg.Listen
	if len(listen) == 0 {
		for _, s := range defaultListen {
			listen = append(listen, ma.StringCast(s))
		}
	}
	id, err := lpeer.IDFromPrivateKey(cfg.Identity)
	if err != nil {
		return nil, nil, fmt.Errorf("peer id: %w", err)
	}
	// Whatever is made below is closed again if a later step fails; once
	// the host exists, closing it closes them all.
	var undo []func() error
	defer func() {
		if err != nil {
			for _, u := range slices.Backward(undo) {
				u()
			}
		}
	}()
	ps, err := newPeerstore(id, cfg.Identity)
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, ps.Close)
	// Library peers are protected from trimming (see peers.go); the
	// watermarks only bound what a misbehaving member could open. The
	// silence period is the manager's ticker: once a minute is plenty.
	cm, err := connmgr.NewConnManager(64, 128, connmgr.WithGracePeriod(time.Minute), connmgr.WithSilencePeriod(time.Minute))
	if err != nil {
		return nil, nil, fmt.Errorf("connection manager: %w", err)
	}
	undo = append(undo, cm.Close)
	rm, err := newResourceManager()
	if err != nil {
		return nil, nil, fmt.Errorf("resource manager: %w", err)
	}
	undo = append(undo, rm.Close)
	bus := eventbus.NewBus()
	sw, up, err := newSwarm(cfg.Identity, id, ps, bus, psk, rm, g)
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, sw.Close)
	hopts := &basichost.HostOpts{EventBus: bus, ConnManager: cm}
	if cfg.PortMap {
		hopts.NATManager = newPortMapper(cfg.Logger)
	}
	h, err := basichost.NewHost(sw, hopts)
	if err != nil {
		return nil, nil, fmt.Errorf("libp2p host: %w", err)
	}
	start = func() error {
		// Relayed connections (away.go) come in on the circuit transport,
		// upgraded like the others: the library's key, Noise, yamux.
		if err := client.AddTransport(h, up); err != nil {
			return fmt.Errorf("relay client: %w", err)
		}
		// As libp2p.New: listening succeeds if one address does.
		if err := sw.Listen(listen...); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		h.Start()
		return nil
	}
	return h, start, nil
}

// newPeerstore is the peerstore of a host of identity key, whose id is id.
func newPeerstore(id lpeer.ID, key crypto.PrivKey) (peerstore.Peerstore, error) {
	ps, err := pstoremem.NewPeerstore()
	if err != nil {
		return nil, fmt.Errorf("peerstore: %w", err)
	}
	if err := ps.AddPrivKey(id, key); err != nil {
		ps.Close()
		return nil, fmt.Errorf("peerstore: %w", err)
	}
	if err := ps.AddPubKey(id, key.GetPublic()); err != nil {
		ps.Close()
		return nil, fmt.Errorf("peerstore: %w", err)
	}
	return ps, nil
}

// newSwarm is the swarm of a host: TCP, upgraded by the private network's
// key psk, Noise and yamux, with g as its gater; and that upgrader, for the
// relay transport.
func newSwarm(key crypto.PrivKey, id lpeer.ID, ps peerstore.Peerstore, bus event.Bus, psk pnet.PSK, rm network.ResourceManager, g *gater) (*swarm.Swarm, transport.Upgrader, error) {
	// Noise is given the muxers, as libp2p.New does, so that it agrees on
	// one inside its handshake instead of a round trip after it.
	muxers := []upgrader.StreamMuxer{{ID: yamux.ID, Muxer: muxer()}}
	security, err := noise.New(noise.ID, key, muxers)
	if err != nil {
		return nil, nil, fmt.Errorf("noise: %w", err)
	}
	up, err := upgrader.New([]sec.SecureTransport{security}, muxers, psk, rm, g)
	if err != nil {
		return nil, nil, fmt.Errorf("upgrader: %w", err)
	}
	tpt, err := newTCPTransport(up, rm)
	if err != nil {
		return nil, nil, fmt.Errorf("tcp transport: %w", err)
	}
	sw, err := swarm.NewSwarm(id, ps, bus,
		swarm.WithConnectionGater(g),
		swarm.WithResourceManager(rm),
		swarm.WithDialTimeout(dialTimeout),
		swarm.WithDialTimeoutLocal(dialTimeout),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("swarm: %w", err)
	}
	if err := sw.AddTransport(tpt); err != nil {
		sw.Close()
		return nil, nil, fmt.Errorf("tcp transport: %w", err)
	}
	return sw, up, nil
}

// Connection rates. libp2p's resource manager limits new connections per
// remote address (0.2 a second after a burst of 16) in both directions. A
// device redials a lost member's known addresses every second
// (reconnectCap), and each of those dials spent a token of the member's
// address; when the member came back from a restart on a new port, its own
// dial to us was over the rate, so we reset it during the private-network
// handshake ("privnet: could not read full nonce", "write: broken pipe" on
// its side) and both sides backed off, for seconds and sometimes minutes.
// Our own dials are paced by our backoff; the rate limit guards against a
// flood of inbound connections from one address, so that is where it
// applies here, and with a rate that lets a device restart every second.
func inboundConnRate() *rate.Limiter {
	return &rate.Limiter{
		// Loopback is this machine (tests, several daemons on one host).
		NetworkPrefixLimits: []rate.PrefixLimit{
			{Prefix: netip.MustParsePrefix("127.0.0.0/8")},
			{Prefix: netip.MustParsePrefix("::1/128")},
		},
		SubnetRateLimiter: rate.SubnetLimiter{
			IPv4SubnetLimits: []rate.SubnetLimit{{PrefixLength: 32, Limit: rate.Limit{RPS: 2, Burst: 32}}},
			IPv6SubnetLimits: []rate.SubnetLimit{
				{PrefixLength: 64, Limit: rate.Limit{RPS: 2, Burst: 32}},
				{PrefixLength: 48, Limit: rate.Limit{RPS: 4, Burst: 64}},
			},
			GracePeriod: time.Minute,
		},
	}
}

// errInboundRate refuses an inbound connection over the rate.
var errInboundRate = errors.New("inbound connection rate limit exceeded")

// newResourceManager is libp2p's default resource manager (its scaled
// limits) with the connection rate limit on inbound connections only (see
// inboundConnRate).
func newResourceManager() (network.ResourceManager, error) {
	limits := rcmgr.DefaultLimits
	addIdentifyLimits(&limits)
	// libp2p allows a peer 8 connections in each direction and 8 in all,
	// and counts a dial from its start: our own dials to a member's
	// addresses, stale ones waiting out dialTimeout, used up the room that
	// member's connection to us needed, and the connection was refused
	// after its handshake for as long as we kept redialling it.
	limits.PeerBaseLimit.Conns = limits.PeerBaseLimit.ConnsInbound + limits.PeerBaseLimit.ConnsOutbound
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()), rcmgr.WithConnRateLimiters(&rate.Limiter{}))
	if err != nil {
		return nil, err
	}
	return &inboundRateLimited{ResourceManager: rm, limiter: inboundConnRate()}, nil
}

// addIdentifyLimits gives identify, the one libp2p service the host runs,
// the limits libp2p.SetDefaultServiceLimits gives it (that function is in
// the package newHost does without).
func addIdentifyLimits(config *rcmgr.ScalingLimitConfig) {
	config.AddServiceLimit(
		identify.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 64, StreamsOutbound: 64, Streams: 128, Memory: 4 << 20},
		rcmgr.BaseLimitIncrease{StreamsInbound: 64, StreamsOutbound: 64, Streams: 128, Memory: 4 << 20},
	)
	config.AddServicePeerLimit(
		identify.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 16, StreamsOutbound: 16, Streams: 32, Memory: 1 << 20},
		rcmgr.BaseLimitIncrease{},
	)
	for _, id := range [...]protocol.ID{identify.ID, identify.IDPush} {
		config.AddProtocolLimit(
			id,
			rcmgr.BaseLimit{StreamsInbound: 64, StreamsOutbound: 64, Streams: 128, Memory: 4 << 20},
			rcmgr.BaseLimitIncrease{StreamsInbound: 64, StreamsOutbound: 64, Streams: 128, Memory: 4 << 20},
		)
		config.AddProtocolPeerLimit(
			id,
			rcmgr.BaseLimit{StreamsInbound: 16, StreamsOutbound: 16, Streams: 32, Memory: 32 * (256<<20 + 16<<10)},
			rcmgr.BaseLimitIncrease{},
		)
	}
}

type inboundRateLimited struct {
	network.ResourceManager
	limiter *rate.Limiter
}

func (r *inboundRateLimited) OpenConnection(dir network.Direction, usefd bool, endpoint ma.Multiaddr) (network.ConnManagementScope, error) {
	if dir == network.DirInbound {
		if ip, err := manet.ToIP(endpoint); err == nil {
			if addr, ok := netip.AddrFromSlice(ip); ok && !r.limiter.Allow(addr.Unmap()) {
				return nil, errInboundRate
			}
		}
	}
	return r.ResourceManager.OpenConnection(dir, usefd, endpoint)
}

// muxKeepAlive is how long a connection is quiet before yamux pings over
// it. On a LAN the kernel's keepalives notice a vanished peer sooner and at
// no cost to the daemons (tcp.go); over the internet they wait two minutes,
// and a connection can die without a word (the home router's address
// changed, a NAT forgot it), which the side that sends nothing notices only
// when it next sends: this ping, which fails within yamux's write timeout.
// So an idle device away finds its member again within a minute of the
// loss: this, and yamux's write timeout for the ping. Each ping wakes both
// daemons and a phone's radio; shorter would notice sooner at that cost.
const muxKeepAlive = 40 * time.Second

// muxer returns yamux tuned for a background daemon: keepalives after
// muxKeepAlive of quiet, round trips measured rarely (nothing here uses
// them), and a 1 MiB stream window instead of 16 MiB (enough for a LAN;
// memory matters on a phone).
func muxer() *yamux.Transport {
	c := *yamux.DefaultTransport
	c.KeepAliveInterval = muxKeepAlive
	c.MeasureRTTInterval = time.Hour
	c.MaxStreamWindowSize = 1 << 20
	return &c
}
