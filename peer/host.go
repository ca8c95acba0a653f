package peer

import (
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/quicreuse"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// Timeouts. Readers wait for a frame as long as it takes (a push stream is
// idle most of the time; yamux keepalives notice a dead connection), but
// everything that has begun must finish in bounded time.
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
// limits.
func newHost(cfg *Config, psk pnet.PSK) (host.Host, error) {
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
	h, err := libp2p.New(
		libp2p.Identity(cfg.Identity),
		libp2p.PrivateNetwork(psk),
		libp2p.Transport(tcp.NewTCPTransport, tcp.WithConnectionTimeout(dialTimeout)),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, muxer()),
		// No QUIC transport runs here, but libp2p builds a QUIC connection
		// manager for the swarm anyway, with two garbage collectors ticking
		// every 30 s: provide none.
		libp2p.QUICReuse(func() (*quicreuse.ConnManager, error) { return nil, nil }),
		libp2p.ListenAddrs(listen...),
		libp2p.ConnectionManager(cm),
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
		return nil, fmt.Errorf("libp2p host: %w", err)
	}
	return h, nil
}

// muxer returns yamux tuned for a background daemon on a LAN: keepalives once
// a minute (they notice a peer that vanished without closing, and each one
// wakes the process), round trips measured rarely (nothing here uses them),
// and a 1 MiB stream window instead of 16 MiB (enough for a LAN; memory
// matters on a phone).
func muxer() *yamux.Transport {
	c := *yamux.DefaultTransport
	c.KeepAliveInterval = time.Minute
	c.MeasureRTTInterval = time.Hour
	c.MaxStreamWindowSize = 1 << 20
	return &c
}
