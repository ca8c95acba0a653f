package peer

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"

	"github.com/danyue/danyue/internal/portmap"
	"github.com/libp2p/go-libp2p/core/network"
	basichost "github.com/libp2p/go-libp2p/p2p/host/basic"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// portMapper fills libp2p's NATManager slot (Config.PortMap) with
// internal/portmap, which keeps the external port of a mapping across the
// router's restarts. libp2p's own manager picks a random external port
// whenever it finds the router again, and a member away, which knows this
// device by the port it was told, cannot learn a new one (docs/upstream.md).
type portMapper struct {
	net    network.Network
	m      *portmap.Mapper
	notify *network.NotifyBundle
}

func newPortMapper(log *slog.Logger) func(network.Network) basichost.NATManager {
	return func(n network.Network) basichost.NATManager {
		pm := &portMapper{net: n, m: portmap.New(portmap.Config{Discover: portmap.Discover, Log: log})}
		resync := func(network.Network, ma.Multiaddr) { pm.sync() }
		pm.notify = &network.NotifyBundle{ListenF: resync, ListenCloseF: resync}
		n.Notify(pm.notify)
		pm.sync()
		return pm
	}
}

// sync gives the mapper the TCP ports this host listens on over IPv4.
func (pm *portMapper) sync() {
	var ports []int
	for _, a := range pm.net.ListenAddresses() {
		if p, ok := tcp4Port(a); ok && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	pm.m.SetPorts(ports...)
}

// tcp4Port returns the port of a /ip4/.../tcp/PORT address.
func tcp4Port(a ma.Multiaddr) (int, bool) {
	na, err := manet.ToNetAddr(a)
	if err != nil {
		return 0, false
	}
	ap, err := netip.ParseAddrPort(na.String())
	if err != nil || na.Network() != "tcp" || !ap.Addr().Unmap().Is4() {
		return 0, false
	}
	return int(ap.Port()), true
}

// GetMapping returns the public address at which the listen address a is
// reached through the router, or nil.
func (pm *portMapper) GetMapping(a ma.Multiaddr) ma.Multiaddr {
	p, ok := tcp4Port(a)
	if !ok {
		return nil
	}
	ext, ok := pm.m.Mapping(p)
	if !ok {
		return nil
	}
	out, err := manet.FromNetAddr(net.TCPAddrFromAddrPort(ext))
	if err != nil {
		return nil
	}
	return out
}

func (pm *portMapper) HasDiscoveredNAT() bool { return pm.m.Found() }

func (pm *portMapper) Close() error {
	pm.net.StopNotify(pm.notify)
	return pm.m.Close()
}
