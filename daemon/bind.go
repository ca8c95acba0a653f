package daemon

import (
	"fmt"
	"net"

	"github.com/multiformats/go-multiaddr"

	"github.com/danyue/danyue/daemon/kosync"
	"github.com/danyue/danyue/internal/lan"
)

// early holds what Start checks and binds before it creates or opens
// anything: a mistake in a flag (an address that does not parse, a port in
// use, --http on a non-loopback address) is refused while the data dir is
// still as it was, and the log has not yet said "created a new store".
type early struct {
	http, kosync            net.Listener // nil when not asked for
	listen, peers, announce []multiaddr.Multiaddr
}

func bindEarly(cfg Config) (early, error) {
	var e early
	var err error
	if e.listen, err = parseAddrs(cfg.Listen); err != nil {
		return e, fmt.Errorf("--listen: %w", err)
	}
	if e.peers, err = parseAddrs(cfg.Peers); err != nil {
		return e, fmt.Errorf("--peer: %w", err)
	}
	if e.announce, err = parseAddrs(cfg.Announce); err != nil {
		return e, fmt.Errorf("--announce: %w", err)
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

func parseAddrs(ss []string) ([]multiaddr.Multiaddr, error) {
	out := make([]multiaddr.Multiaddr, 0, len(ss))
	for _, s := range ss {
		a, err := multiaddr.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a multiaddr: %w", s, err)
		}
		out = append(out, a)
	}
	return out, nil
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
// reached, for people to type into another device: on every address
// (0.0.0.0, ::) that is each address of this machine, which is what a
// KOReader on the LAN needs, not "[::]"; loopback last.
func reachableURLs(addr, path string) []string {
	var urls []string
	for _, hp := range lan.Addrs(addr, true) {
		urls = append(urls, "http://"+hp+path)
	}
	return urls
}

// isLoopbackAddr reports whether a listener's address is on loopback only.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host) // SplitHostPort took the brackets off
	return ip != nil && ip.IsLoopback()
}
