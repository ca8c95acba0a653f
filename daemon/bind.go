package daemon

import (
	"fmt"
	"net"
	"strings"

	"github.com/danyue/danyue/daemon/kosync"
)

// early holds what Start checks and binds before it creates or opens
// anything: a mistake in a flag (an address that does not parse, a port in
// use, --http on a non-loopback address) is refused while the data dir is
// still as it was, and the log has not yet said "created a new store".
type early struct {
	http, kosync net.Listener // nil when not asked for
}

func bindEarly(cfg Config) (early, error) {
	var e early
	if _, err := parseAddrs(cfg.Listen); err != nil {
		return e, fmt.Errorf("--listen: %w", err)
	}
	if _, err := parseAddrs(cfg.Peers); err != nil {
		return e, fmt.Errorf("--peer: %w", err)
	}
	if cfg.Kosync != "" {
		if _, err := kosync.CleanPrefix(cfg.KosyncPrefix); err != nil {
			return e, fmt.Errorf("--kosync-prefix: %w", err)
		}
	}
	if cfg.HTTP != "" {
		ln, err := listenTCP(cfg.HTTP, cfg.HTTPAllowRemote)
		if err != nil {
			return e, err
		}
		e.http = ln
	}
	if cfg.Kosync != "" {
		ln, err := net.Listen("tcp", cfg.Kosync)
		if err != nil {
			e.close()
			return early{}, fmt.Errorf("--kosync %s: %w", cfg.Kosync, err)
		}
		e.kosync = ln
	}
	return e, nil
}

// close closes the listeners no server has taken over.
func (e early) close() {
	for _, ln := range []net.Listener{e.http, e.kosync} {
		if ln != nil {
			ln.Close()
		}
	}
}

// reachableURLs returns the URLs under which a listener on addr can be
// reached, for people to type into another device: a listener on every
// address (0.0.0.0, ::) is reachable at each address of this machine's
// interfaces, which is what a KOReader on the LAN needs, not "[::]".
// Loopback comes last; link-local addresses, which need a zone, are left
// out.
func reachableURLs(addr, path string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsUnspecified() {
		return []string{"http://" + addr + path}
	}
	v4only := ip.To4() != nil
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return []string{"http://" + addr + path}
	}
	var lan, loop []string
	for _, a := range ifaddrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLinkLocalUnicast() || (v4only && n.IP.To4() == nil) {
			continue
		}
		u := "http://" + net.JoinHostPort(n.IP.String(), port) + path
		if n.IP.IsLoopback() {
			loop = append(loop, u)
		} else {
			lan = append(lan, u)
		}
	}
	return append(lan, loop...)
}

// isLoopbackAddr reports whether a listener's address is on loopback only.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
