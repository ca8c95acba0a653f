package peer

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/danyue/danyue/internal/lan"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Noticing a lost peer. A member that vanishes without closing (its Wi-Fi
// dropped, its lid shut, the switch between us died) must show as
// disconnected within 20 s, so that its keeper redials and `peers` tells
// the truth. Every wakeup of the process counts on an idle phone, so the
// watching is left to the kernel: TCP keepalive probes are sent and
// answered by the two kernels, and wake neither daemon while the peer is
// there. When the probes go unanswered the kernel ends the connection, its
// reads fail, and libp2p reports the peer gone. A heartbeat in the sync
// protocol, or yamux keepalives at this rate, would wake both daemons for
// every beat of every connection.
//
// libp2p's TCP transport enables keepalive on every connection with a 30 s
// period and offers no option to change it, so keepaliveUpgrader sits
// between the transport and its upgrader, where each raw connection (dialled
// or accepted) passes once, and sets the schedule below.
var tcpKeepAlive = net.KeepAliveConfig{
	Enable: true,
	// Idle is how long a connection is quiet before the first probe; a
	// probe is one small packet each way, handled by the kernels.
	Idle: 5 * time.Second,
	// Interval and Count: the connection ends after Count probes in a row
	// go unanswered, Idle + Count·Interval = 14 s after the peer was last
	// heard from.
	Interval: 3 * time.Second,
	Count:    3,
}

// internetKeepAlive is the schedule of a connection to a public address (a
// member reached over the internet, through a home router's port forward):
// there a probe is a packet across the mobile network, each one waking the
// phone's radio, and what needs a packet now and then is the NAT between,
// which forgets an idle connection after its timeout. RFC 5382 asks NATs to
// keep an idle TCP connection for two hours and four minutes; mobile
// networks are known to keep less, so a probe goes every two minutes. A
// member that vanished is noticed in about two and a half minutes instead
// of 14 s; this device's own network changes are seen at once
// (lan.Watch), and data sent and not acknowledged still ends the
// connection after unackedTimeout.
var internetKeepAlive = net.KeepAliveConfig{
	Enable:   true,
	Idle:     2 * time.Minute,
	Interval: 10 * time.Second,
	Count:    3,
}

// unackedTimeout ends a connection whose sent data stays unacknowledged
// this long: the same bound as the keepalive probes', short of
// lostPeerBound because what is in flight may have been sent a few seconds
// after the peer was last heard from.
const unackedTimeout = 14 * time.Second

// lostPeerBound is how long after a peer was last heard from, at most, its
// connection ends when it has vanished without closing it.
const lostPeerBound = 20 * time.Second

// newTCPTransport is libp2p's TCP transport with keepaliveUpgrader in front
// of its upgrader, dialling from ephemeral ports except for a hole punch.
// libp2p provides the arguments.
//
// By default libp2p dials from its listen port (SO_REUSEPORT). Two devices
// on fixed ports then dial each other over one and the same address pair:
// when both dial at once (a device back from a restart, its peer redialling
// it) TCP's simultaneous open makes one connection that both sides think
// they initiated, and the security handshake fails ("noise: message is too
// short"); when one side still holds a dead connection of that pair (its
// peer lost power), the new dial collides with it. Either cost a redial a
// second later. A hole punch (DCUtR, away.go) needs exactly that
// simultaneous open, from the port the NAT maps to the listen port, and
// libp2p says so in the dial's context: those dials, and only those, go
// out from the listen port, and the listeners carry SO_REUSEPORT so that
// they can.
func newTCPTransport(up transport.Upgrader, rcmgr network.ResourceManager) (*tcpTransport, error) {
	up = keepaliveUpgrader{up}
	plain, err := tcp.NewTCPTransport(up, rcmgr, nil, tcp.WithConnectionTimeout(dialTimeout), tcp.DisableReuseport())
	if err != nil {
		return nil, err
	}
	punch, err := tcp.NewTCPTransport(up, rcmgr, nil, tcp.WithConnectionTimeout(dialTimeout))
	if err != nil {
		return nil, err
	}
	return &tcpTransport{TcpTransport: plain, punch: punch}, nil
}

// tcpTransport is the plain transport for ordinary dials and the
// reuseport one for listening and hole punches (see newTCPTransport).
// Every method the swarm calls that matters here is spelled out: an
// embedded DialWithUpdates would bypass the choice.
type tcpTransport struct {
	*tcp.TcpTransport
	punch *tcp.TcpTransport
}

// errPunchPrivate refuses a hole punch's dial to an address that is not
// public. libp2p dials every address the peerstore holds for the peer,
// and the stale private addresses of a device on another network each
// hold one of the peer's outbound connection slots until they time out,
// refusing the one dial that matters: the address its NAT shows.
var errPunchPrivate = errors.New("a hole punch dials only public addresses")

func (t *tcpTransport) pick(ctx context.Context, raddr ma.Multiaddr) (*tcp.TcpTransport, error) {
	if simultaneous, _, _ := network.GetSimultaneousConnect(ctx); simultaneous {
		if _, ok := public(raddr); !ok {
			return nil, errPunchPrivate
		}
		return t.punch, nil
	}
	return t.TcpTransport, nil
}

func (t *tcpTransport) Dial(ctx context.Context, raddr ma.Multiaddr, p lpeer.ID) (transport.CapableConn, error) {
	return t.DialWithUpdates(ctx, raddr, p, nil)
}

func (t *tcpTransport) DialWithUpdates(ctx context.Context, raddr ma.Multiaddr, p lpeer.ID, updates chan<- transport.DialUpdate) (transport.CapableConn, error) {
	tp, err := t.pick(ctx, raddr)
	if err != nil {
		return nil, err
	}
	return tp.DialWithUpdates(ctx, raddr, p, updates)
}

// Listen listens with SO_REUSEPORT, for hole punches. A fixed port is
// first bound without it, so that a port another process holds (even
// another daemon, which would also set SO_REUSEPORT and then share the
// incoming connections) is refused as it was before.
func (t *tcpTransport) Listen(laddr ma.Multiaddr) (transport.Listener, error) {
	if port, err := laddr.ValueForProtocol(ma.P_TCP); err == nil && port != "0" {
		l, err := manet.Listen(laddr)
		if err != nil {
			return nil, err
		}
		l.Close()
	}
	return t.punch.Listen(laddr)
}

// keepaliveUpgrader sets tcpKeepAlive on each raw connection before
// libp2p's upgrader sees it: dialled ones in Upgrade, accepted ones through
// the listener it wraps. The transport has set its own keepalive by then.
type keepaliveUpgrader struct {
	transport.Upgrader
}

func (u keepaliveUpgrader) Upgrade(ctx context.Context, t transport.Transport, c manet.Conn, dir network.Direction, p lpeer.ID, scope network.ConnManagementScope) (transport.CapableConn, error) {
	setKeepAlive(c)
	return u.Upgrader.Upgrade(ctx, t, c, dir, p, scope)
}

func (u keepaliveUpgrader) UpgradeGatedMaListener(t transport.Transport, l transport.GatedMaListener) transport.Listener {
	return u.Upgrader.UpgradeGatedMaListener(t, keepaliveListener{l})
}

type keepaliveListener struct {
	transport.GatedMaListener
}

func (l keepaliveListener) Accept() (manet.Conn, network.ConnManagementScope, error) {
	c, scope, err := l.GatedMaListener.Accept()
	if err == nil {
		setKeepAlive(c)
	}
	return c, scope, err
}

// keepAliveFor is the keepalive schedule of a connection to remote:
// internetKeepAlive to a public address, tcpKeepAlive otherwise.
func keepAliveFor(remote ma.Multiaddr) net.KeepAliveConfig {
	if ip, err := manet.ToIP(remote); err == nil && !lan.Private(ip) {
		return internetKeepAlive
	}
	return tcpKeepAlive
}

// setKeepAlive applies tcpKeepAlive, or internetKeepAlive for a remote on
// the internet, to c if it is a TCP connection (manet exposes the
// *net.TCPConn's methods), and bounds how long data sent on it
// may stay unacknowledged to the same time: the kernel sends keepalive
// probes only while nothing is in flight, so a connection lost just after a
// write (an ack, a push) would otherwise retransmit for many minutes. A
// connection that refuses keeps libp2p's 30 s schedule and yamux's
// keepalives: slower, not broken.
func setKeepAlive(c manet.Conn) {
	if kc, ok := c.(interface {
		SetKeepAliveConfig(net.KeepAliveConfig) error
	}); ok {
		_ = kc.SetKeepAliveConfig(keepAliveFor(c.RemoteMultiaddr()))
	}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			_ = setUnackedTimeout(raw, unackedTimeout)
		}
	}
}
