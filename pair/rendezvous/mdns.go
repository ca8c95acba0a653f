package rendezvous

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/mdns"

	"github.com/danyue/danyue/internal/lan"
	"github.com/danyue/danyue/pair"
)

// The announcement is a separate mDNS service from the library's
// (_danyue._tcp), so a device that is not in any library yet finds it, and
// the library's own discovery never sees it. Its TXT record carries the
// format version and the channel, which is public by design (pair.Code);
// the code's words are never sent. The instance name is random.
//
// hashicorp/mdns listens on one interface per server and a query blocks for
// its timeout and fails if either family cannot send: as in peer/discovery.go,
// there is one server per interface and one query per interface and family.

const (
	mdnsService = "_danyue-pair._tcp"
	mdnsDomain  = "local."
	// browseRound is how long one mDNS query listens for answers.
	browseRound = time.Second
	maxTXTAddrs = 8
)

type announcer struct{ servers []*mdns.Server }

// announce starts an mDNS server for the rendezvous on each interface that
// has an address; failures are logged: the joiner can still be given an
// address by hand.
func announce(channel, port int, ifaces []net.Interface, logger *slog.Logger) *announcer {
	a := &announcer{}
	if len(ifaces) == 0 {
		ifaces = lan.Interfaces(true)
	}
	var id [8]byte
	rand.Read(id[:])
	instance := "pair-" + hex.EncodeToString(id[:])
	mlog := mdnsLogger(logger)
	for i := range ifaces {
		ips := interfaceIPs(&ifaces[i])
		if len(ips) == 0 {
			continue
		}
		txt := []string{"v=1", "ch=" + strconv.Itoa(channel)}
		for _, ip := range ips {
			if len(txt) < 2+maxTXTAddrs && ip.To4() != nil {
				txt = append(txt, "addr="+net.JoinHostPort(ip.String(), strconv.Itoa(port)))
			}
		}
		zone, err := mdns.NewMDNSService(instance, mdnsService, mdnsDomain, instance+".local.", port, ips, txt)
		if err != nil {
			logger.Warn("pairing: cannot announce on interface", "iface", ifaces[i].Name, "err", err)
			continue
		}
		srv, err := mdns.NewServer(&mdns.Config{Zone: zone, Iface: &ifaces[i], Logger: mlog})
		if err != nil {
			logger.Warn("pairing: cannot announce on interface (mDNS port unavailable); give the joiner --pair-addr", "iface", ifaces[i].Name, "err", err)
			continue
		}
		a.servers = append(a.servers, srv)
	}
	logger.Info("pairing: announced by mDNS", "service", mdnsService, "channel", channel, "interfaces", len(a.servers))
	return a
}

func (a *announcer) close() {
	if a == nil {
		return
	}
	for _, s := range a.servers {
		s.Shutdown()
	}
}

// Announcer is one rendezvous an mDNS answer announces: its instance
// name, channel and addresses (IPv4 first). Nothing in it is
// authenticated: anyone on the LAN can announce any channel.
type Announcer struct {
	Instance string
	Channel  int
	Addrs    []string
}

// maxAnnouncers bounds what one browse round keeps.
const maxAnnouncers = 32

// Browse queries mDNS on ifaces (default every up multicast interface)
// until a round finds rendezvous announcing channel (any channel if it is
// 0), or ctx ends. It returns every announcer that round found, in the
// order they answered.
func Browse(ctx context.Context, channel int, ifaces []net.Interface, logger *slog.Logger) ([]Announcer, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if len(ifaces) == 0 {
		ifaces = lan.Interfaces(true)
	}
	if len(ifaces) == 0 {
		return nil, fmt.Errorf("no up, multicast-capable network interface to look for the inviter on")
	}
	mlog := mdnsLogger(logger)
	for {
		entries := make(chan *mdns.ServiceEntry, 64)
		var wg sync.WaitGroup
		for i := range ifaces {
			for _, v6 := range []bool{false, true} {
				wg.Go(func() {
					err := mdns.QueryContext(ctx, &mdns.QueryParam{
						Service: mdnsService, Domain: "local", Timeout: browseRound,
						Interface: &ifaces[i], Entries: entries,
						DisableIPv4: v6, DisableIPv6: !v6, Logger: mlog,
					})
					if err != nil && ctx.Err() == nil {
						logger.Debug("pairing: mDNS query failed", "iface", ifaces[i].Name, "ipv6", v6, "err", err)
					}
				})
			}
		}
		// Drained while the queries run: a flood of answers must not
		// block them.
		var found []Announcer
		collected := make(chan struct{})
		go func() {
			defer close(collected)
			for e := range entries {
				found = addAnnouncer(found, e, channel)
			}
		}()
		wg.Wait()
		close(entries)
		<-collected
		if len(found) > 0 {
			return found, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// addAnnouncer adds what answer e announces, if it announces channel (or
// any channel, for 0), merging the answers of one instance.
func addAnnouncer(found []Announcer, e *mdns.ServiceEntry, channel int) []Announcer {
	ch, addrs := entryAddrs(e)
	if ch == 0 || channel != 0 && ch != channel {
		return found
	}
	for i := range found {
		if found[i].Instance == e.Name {
			found[i].Addrs = appendNew(found[i].Addrs, addrs...)
			return found
		}
	}
	if len(found) >= maxAnnouncers {
		return found
	}
	return append(found, Announcer{Instance: e.Name, Channel: ch, Addrs: appendNew(nil, addrs...)})
}

// entryAddrs returns the channel and the addresses of an answer; channel
// 0 if it is not a pairing announcement this version reads.
func entryAddrs(e *mdns.ServiceEntry) (channel int, out []string) {
	var v, ch string
	for _, f := range e.InfoFields {
		k, val, _ := strings.Cut(f, "=")
		switch k {
		case "v":
			v = val
		case "ch":
			ch = val
		case "addr":
			if len(out) < maxTXTAddrs {
				if _, _, err := net.SplitHostPort(val); err == nil {
					out = append(out, val)
				}
			}
		}
	}
	n, err := strconv.Atoi(ch)
	if v != "1" || err != nil || n < 1 || n > pair.MaxChannel {
		return 0, nil
	}
	if e.Port > 0 && e.AddrV4 != nil {
		out = append(out, net.JoinHostPort(e.AddrV4.String(), strconv.Itoa(e.Port)))
	}
	if e.Port > 0 && e.AddrV6IPAddr != nil {
		out = append(out, net.JoinHostPort(e.AddrV6IPAddr.String(), strconv.Itoa(e.Port)))
	}
	return n, out
}

func appendNew(dst []string, ss ...string) []string {
	for _, s := range ss {
		dup := false
		for _, d := range dst {
			dup = dup || d == s
		}
		if !dup {
			dst = append(dst, s)
		}
	}
	return dst
}

func interfaceIPs(ifc *net.Interface) []net.IP {
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
			ips = append(ips, n.IP)
		}
	}
	return ips
}

func mdnsLogger(logger *slog.Logger) *log.Logger {
	return slog.NewLogLogger(logger.With("component", "mdns").Handler(), slog.LevelDebug)
}
