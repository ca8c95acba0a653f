package peer

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/pnet"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/quicreuse"
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
// Noise, yamux, and none of the public-internet machinery: no relay, no NAT
// port mapping, no hole punching, no AutoNAT probing, no observed-address
// discovery, no ping service. The resource manager keeps its default scaled
// limits, with the connection rate limit on inbound connections only. g
// refuses removed devices (gater.go).
func newHost(cfg *Config, psk pnet.PSK, g *gater) (host.Host, error) {
	listen := cfg.Listen
	if len(listen) == 0 {
		for _, s := range defaultListen {
			listen = append(listen, ma.StringCast(s))
		}
	}
	// Library peers are protected from trimming (see peers.go); the
	// watermarks only bound what a misbehaving member could open. The
	// silence period is the manager's ticker: once a minute is plenty.
	cm, err := connmgr.NewConnManager(64, 128, connmgr.WithGracePeriod(time.Minute), connmgr.WithSilencePeriod(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("connection manager: %w", err)
	}
	rm, err := newResourceManager()
	if err != nil {
		cm.Close()
		return nil, fmt.Errorf("resource manager: %w", err)
	}
	h, err := libp2p.New(
		libp2p.ResourceManager(rm),
		libp2p.Identity(cfg.Identity),
		libp2p.PrivateNetwork(psk),
		libp2p.Transport(newTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, muxer()),
		// No QUIC transport runs here, but libp2p builds a QUIC connection
		// manager for the swarm anyway, with two garbage collectors ticking
		// every 30 s: provide none.
		libp2p.QUICReuse(func() (*quicreuse.ConnManager, error) { return nil, nil }),
		libp2p.ListenAddrs(listen...),
		libp2p.ConnectionManager(cm),
		libp2p.ConnectionGater(g),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
		libp2p.Ping(false),
		libp2p.ForceReachabilityPrivate(),
		libp2p.DisableIdentifyAddressDiscovery(),
		libp2p.WithDialTimeout(dialTimeout),
		libp2p.SwarmOpts(swarm.WithDialTimeoutLocal(dialTimeout)),
	)
	if err != nil {
		cm.Close()
		rm.Close()
		return nil, fmt.Errorf("libp2p host: %w", err)
	}
	return h, nil
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
	libp2p.SetDefaultServiceLimits(&limits)
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()), rcmgr.WithConnRateLimiters(&rate.Limiter{}))
	if err != nil {
		return nil, err
	}
	return &inboundRateLimited{ResourceManager: rm, limiter: inboundConnRate()}, nil
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

// muxer returns yamux tuned for a background daemon on a LAN: keepalives once
// a minute (each one wakes the process; the kernel's TCP keepalives notice a
// vanished peer sooner at no such cost, see tcp.go), round trips measured
// rarely (nothing here uses them), and a 1 MiB stream window instead of 16
// MiB (enough for a LAN; memory matters on a phone).
func muxer() *yamux.Transport {
	c := *yamux.DefaultTransport
	c.KeepAliveInterval = time.Minute
	c.MeasureRTTInterval = time.Hour
	c.MaxStreamWindowSize = 1 << 20
	return &c
}
