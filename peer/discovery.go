package peer

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/mdns"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/danyue/danyue/internal/lan"
)

// mDNS discovery with hashicorp/mdns. Facts that shape this file, measured
// with v1.0.7: a server without an explicit interface listens only on the
// routed one, so there is one server per interface; a query sends once and
// blocks for its whole timeout, and drops results its channel cannot take,
// so results go to a buffered channel read by a goroutine that dials at
// once (not when the query ends); a query fails entirely if either family
// cannot send (IPv6 addresses still tentative right after boot, or a
// loopback interface), so IPv4 and IPv6 are queried separately; answers
// include our own instance. The library does not announce unsolicited, so
// every device queries at start (after its own server is up, so of two
// devices starting together the later one's query finds the earlier one)
// and then with backoff.

// Sharing UDP port 5353 with the system's own responder. hashicorp/mdns
// (v1.0.7) sets no socket option itself: every multicast socket it opens
// (a server's, one per family on its interface; a query's, one per family,
// beside an ephemeral unicast socket) comes from net.ListenMulticastUDP,
// which binds the wildcard address, not the group, and before the bind sets
// (net/sockopt_*.go, setDefaultMulticastSockopts):
//   - Linux and Android: SO_REUSEADDR. avahi-daemon and systemd-resolved
//     bind 5353 with SO_REUSEADDR too, so the port is shared.
//   - macOS and the BSDs: SO_REUSEADDR and SO_REUSEPORT. mDNSResponder binds
//     5353 with SO_REUSEPORT, so the port is shared.
//   - Windows: SO_REUSEADDR. The DNS Client service (Dnscache) and browsers
//     bind 5353 with SO_REUSEADDR, not SO_EXCLUSIVEADDRUSE, so it is shared.
//
// Queries arrive by multicast, which reaches every socket sharing the port.
// Answers (the library's server, and any responder for a query from a port
// other than 5353, RFC 6762 section 6.7) go by unicast to the querier's own
// ephemeral port, which nobody shares. So sharing 5353 loses nothing, where
// a unicast datagram to 5353 would reach only one of the sharing sockets.
// Where the port cannot be shared (a program holds it without the options
// above, SO_EXCLUSIVEADDRUSE on Windows, only SO_REUSEPORT on Linux, or a
// sandbox refuses multicast), the bind fails: discovery is turned off on
// that interface with one WARN line that names --peer, and the node goes on
// with its static peers.

const (
	mdnsService  = "_danyue._tcp"
	mdnsDomain   = "local."
	queryTimeout = time.Second
	// maxTXTAddrs bounds the addresses announced and accepted per answer.
	maxTXTAddrs = 8
)

type discovery struct {
	n       *Node
	servers []*mdns.Server
	ifaces  []net.Interface
	entries chan *mdns.ServiceEntry
	logger  *log.Logger

	// query is mdns.QueryContext; a test replaces it to fail one family.
	query func(context.Context, *mdns.QueryParam) error

	mu  sync.Mutex
	off map[string]bool // interfaces where port 5353 cannot be bound
	// familyOff holds the interfaces and families (true: IPv6) whose query
	// sockets cannot be bound. One family failing is common and harmless
	// (IPv4 multicast with no route for it in a fresh network namespace,
	// IPv6 disabled): the other one still finds peers, so the interface is
	// turned off only when both are.
	familyOff map[familyKey]bool
}

type familyKey struct {
	iface string
	v6    bool
}

func (n *Node) startDiscovery() *discovery {
	d := &discovery{
		n:       n,
		entries: make(chan *mdns.ServiceEntry, 64),
		off:     make(map[string]bool),
		query:   mdns.QueryContext,
		logger:  slog.NewLogLogger(n.log.With("component", "mdns").Handler(), slog.LevelDebug),
	}
	candidates := n.cfg.MDNSInterfaces
	if len(candidates) == 0 {
		candidates = lan.Interfaces(true)
	}
	if len(candidates) == 0 {
		n.log.Warn("mdns: LAN discovery is off: no up, multicast-capable interface; add the other devices with --peer MULTIADDR (their addresses are in danyue status)")
		return d
	}
	hostAddrs := n.host.Addrs()
	// d.ifaces keeps the interfaces to query: those whose server started
	// and those we do not listen on (nothing to announce, still peers to
	// find); an interface whose server could not bind is dropped, since a
	// query there would bind the same port the same way.
	for i := range candidates {
		ifc := &candidates[i]
		ips, addrs := addrsOnInterface(ifc, hostAddrs)
		if len(addrs) == 0 {
			n.log.Debug("mdns: not listening on this interface, not announcing there", "iface", ifc.Name)
			d.ifaces = append(d.ifaces, *ifc)
			continue
		}
		port, _ := strconv.Atoi(valueOr(addrs[0], ma.P_TCP))
		// One name per node, not per device: a device runs a node on each
		// secret a rotation superseded beside its main one, all of one
		// identity, and an mDNS client takes one answer per name and query.
		instance := fmt.Sprintf("%s-%d", n.host.ID(), port)
		txt := announceTXT(n.cfg.Library.announceHash(), n.host.ID(), addrs)
		zone, err := mdns.NewMDNSService(instance, mdnsService, mdnsDomain, instance+".local.", port, ips, txt)
		if err != nil {
			n.log.Warn("mdns: cannot announce on interface", "iface", ifc.Name, "err", err)
			d.ifaces = append(d.ifaces, *ifc)
			continue
		}
		// NewServer fails only when neither family's multicast socket could
		// be opened: the port is not ours to share here (see the top).
		srv, err := mdns.NewServer(&mdns.Config{Zone: zone, Iface: ifc, Logger: d.logger})
		if err != nil {
			d.turnOff(ifc.Name, err)
			continue
		}
		d.servers = append(d.servers, srv)
		d.ifaces = append(d.ifaces, *ifc)
	}
	if len(d.ifaces) == 0 {
		return d // each interface has said why; static peers remain
	}
	n.spawn(d.consume)
	n.spawn(d.queryLoop)
	n.log.Info("mdns discovery started", "announcing_on", len(d.servers), "querying_on", len(d.ifaces))
	return d
}

func (d *discovery) close() {
	for _, s := range d.servers {
		s.Shutdown()
	}
}

// queryLoop queries at once and then with backoff: a device that starts
// later queries at its own start and finds us, so the schedule only matters
// for answers lost on the way.
func (d *discovery) queryLoop() {
	for attempt := 0; ; attempt++ {
		d.queryOnce()
		d.n.firstDiscoveryDone()
		t := time.NewTimer(queryBackoff.delay(attempt))
		select {
		case <-t.C:
		case <-d.n.ctx.Done():
			t.Stop()
			return
		}
	}
}

func (d *discovery) queryOnce() {
	var wg sync.WaitGroup
	for i := range d.ifaces {
		if d.isOff(d.ifaces[i].Name) {
			continue
		}
		for _, v6 := range []bool{false, true} {
			if d.isFamilyOff(d.ifaces[i].Name, v6) {
				continue
			}
			wg.Go(func() {
				err := d.query(d.n.ctx, &mdns.QueryParam{
					Service:     mdnsService,
					Domain:      "local",
					Timeout:     queryTimeout,
					Interface:   &d.ifaces[i],
					Entries:     d.entries,
					DisableIPv4: v6,
					DisableIPv6: !v6,
					Logger:      d.logger,
				})
				switch {
				case err == nil || d.n.ctx.Err() != nil:
				case isBindError(err):
					d.familyFailed(d.ifaces[i].Name, v6, err)
				default:
					d.n.log.Debug("mdns: query failed", "iface", d.ifaces[i].Name, "ipv6", v6, "err", err)
				}
			})
		}
	}
	wg.Wait()
}

// turnOff stops discovery on an interface whose mDNS port cannot be bound,
// and says so once, with what to do instead: a user whose devices do not
// find each other reads the log for exactly this.
func (d *discovery) turnOff(iface string, err error) {
	d.mu.Lock()
	already := d.off[iface]
	d.off[iface] = true
	d.mu.Unlock()
	if already {
		return
	}
	d.n.log.Warn("mdns: LAN discovery is off on this interface; add the other devices with --peer MULTIADDR (their addresses are in danyue status)",
		"iface", iface,
		"reason", "cannot bind UDP port 5353: another program holds it without sharing it, or the system refuses multicast",
		"err", err)
}

// familyFailed stops querying over one family on an interface whose query
// sockets for it cannot be bound, and turns the interface off when the
// other family cannot be bound either. One family alone is worth no
// warning: the other still finds peers.
func (d *discovery) familyFailed(iface string, v6 bool, err error) {
	d.mu.Lock()
	if d.familyOff == nil {
		d.familyOff = make(map[familyKey]bool)
	}
	d.familyOff[familyKey{iface, v6}] = true
	both := d.familyOff[familyKey{iface, !v6}]
	d.mu.Unlock()
	if both {
		d.turnOff(iface, err)
		return
	}
	d.n.log.Debug("mdns: not querying over this family on this interface, the other one still does", "iface", iface, "ipv6", v6, "err", err)
}

func (d *discovery) isFamilyOff(iface string, v6 bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.familyOff[familyKey{iface, v6}]
}

func (d *discovery) isOff(iface string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.off[iface]
}

// isBindError reports whether a query failed because its sockets could not
// be bound, which will not change by retrying, rather than because a send
// failed, which does (IPv6 addresses still tentative after boot). The
// library has no sentinel; v1.0.7 says "failed to bind to any unicast udp
// port" or "failed to bind to any multicast udp port", and
// TestDiscoveryOffWhenPortHeld checks that against the real library.
func isBindError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed to bind")
}

func (d *discovery) consume() {
	hash, self := d.n.cfg.Library.announceHash(), d.n.host.ID()
	for {
		select {
		case <-d.n.ctx.Done():
			return
		case e := <-d.entries:
			id, addrs, err := parseAnnouncement(e.InfoFields, hash, self)
			if err != nil {
				if !errors.Is(err, errOwnAnnouncement) {
					d.n.log.Debug("mdns: ignoring answer", "name", e.Name, "err", err)
				}
				continue
			}
			if len(addrs) == 0 {
				addrs = entryAddrs(e)
			}
			d.n.log.Debug("mdns: found peer", "peer", id, "addrs", addrs)
			d.n.dialDiscovered(id, addrs)
		}
	}
}

// addrsOnInterface returns the IPs of ifc we listen on and the listen
// addresses with those IPs.
func addrsOnInterface(ifc *net.Interface, hostAddrs []ma.Multiaddr) ([]net.IP, []ma.Multiaddr) {
	ifAddrs, err := ifc.Addrs()
	if err != nil {
		return nil, nil
	}
	var ips []net.IP
	var out []ma.Multiaddr
	for _, a := range hostAddrs {
		ip, err := manet.ToIP(a)
		if err != nil || valueOr(a, ma.P_TCP) == "" {
			continue
		}
		for _, ia := range ifAddrs {
			if n, ok := ia.(*net.IPNet); ok && n.IP.Equal(ip) {
				out = append(out, a)
				ips = append(ips, ip)
				break
			}
		}
	}
	return ips, out
}

var errOwnAnnouncement = errors.New("our own announcement")

// announceTXT is the TXT record of our announcement: format version, library
// hash, peer id, and the addresses to dial.
func announceTXT(libHash string, id lpeer.ID, addrs []ma.Multiaddr) []string {
	txt := []string{"v=1", "lib=" + libHash, "id=" + id.String()}
	for _, a := range addrs {
		if s := a.String(); len(s)+len("addr=") <= 255 && len(txt) < 3+maxTXTAddrs {
			txt = append(txt, "addr="+s)
		}
	}
	return txt
}

// parseAnnouncement reads an answer's TXT record: it must name our library
// and a peer other than us; addresses that are not plain IP/TCP are dropped.
func parseAnnouncement(txt []string, libHash string, self lpeer.ID) (lpeer.ID, []ma.Multiaddr, error) {
	var lib, idText string
	var addrs []ma.Multiaddr
	for _, f := range txt {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "lib":
			lib = v
		case "id":
			idText = v
		case "addr":
			if len(addrs) >= maxTXTAddrs {
				continue
			}
			if a, err := ma.NewMultiaddr(v); err == nil && dialableTCP(a) {
				addrs = append(addrs, a)
			}
		}
	}
	if lib != libHash {
		return "", nil, fmt.Errorf("library %q is not ours", lib)
	}
	id, err := lpeer.Decode(idText)
	if err != nil {
		return "", nil, fmt.Errorf("peer id %q: %w", idText, err)
	}
	if id == self {
		return "", nil, errOwnAnnouncement
	}
	return id, addrs, nil
}

// dialableTCP reports whether a is /ip4|ip6/<ip>/tcp/<port> and nothing else.
func dialableTCP(a ma.Multiaddr) bool {
	ps := a.Protocols()
	return len(ps) == 2 && (ps[0].Code == ma.P_IP4 || ps[0].Code == ma.P_IP6) && ps[1].Code == ma.P_TCP
}

// entryAddrs builds addresses from an answer's A/AAAA and SRV records, for
// an announcement without addr= fields.
func entryAddrs(e *mdns.ServiceEntry) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, ip := range []net.IP{e.AddrV4, e.AddrV6} {
		if ip == nil || e.Port == 0 {
			continue
		}
		if a, err := manet.FromNetAddr(&net.TCPAddr{IP: ip, Port: e.Port}); err == nil {
			out = append(out, a)
		}
	}
	return out
}

func valueOr(a ma.Multiaddr, code int) string {
	v, err := a.ValueForProtocol(code)
	if err != nil {
		return ""
	}
	return v
}
