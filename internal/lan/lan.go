// Package lan answers two questions about this machine's network
// interfaces that the daemon asks in several places: which interfaces can
// reach other devices (for mDNS), and at which addresses a listener bound to
// every address can be reached (to tell a person or another device).
package lan

import (
	"net"
)

// Interfaces returns the interfaces that are up and not loopback; with
// multicast, only those that can multicast, which is what mDNS needs.
func Interfaces(multicast bool) []net.Interface {
	all, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []net.Interface
	for _, ifc := range all {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 || multicast && ifc.Flags&net.FlagMulticast == 0 {
			continue
		}
		out = append(out, ifc)
	}
	return out
}

// Addrs returns the host:port addresses at which a listener bound to addr
// is reached: addr itself, or, for a listener on every address (0.0.0.0,
// [::]), each global unicast address of an up interface (IPv4 only for
// 0.0.0.0), and after them the loopback ones if loopback is set.
// Link-local addresses, which need a zone, are left out.
func Addrs(addr string, loopback bool) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsUnspecified() {
		return []string{addr}
	}
	v4only := ip.To4() != nil
	var lan, loop []string
	for _, ip := range upIPs() {
		if v4only && ip.To4() == nil {
			continue
		}
		hp := net.JoinHostPort(ip.String(), port)
		switch {
		case ip.IsLoopback():
			if loopback {
				loop = append(loop, hp)
			}
		case ip.IsGlobalUnicast():
			lan = append(lan, hp)
		}
	}
	return append(lan, loop...)
}

// LocalIPs returns the addresses of this machine's interfaces that are up,
// as strings (net.IP.String).
func LocalIPs() map[string]bool {
	out := map[string]bool{}
	for _, ip := range upIPs() {
		out[ip.String()] = true
	}
	return out
}

// upIPs returns the addresses of the interfaces that are up.
func upIPs() []net.IP {
	all, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []net.IP
	for _, ifc := range all {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				out = append(out, n.IP)
			}
		}
	}
	return out
}

// Private reports whether ip is on a private network rather than the
// internet: RFC 1918 and RFC 4193 addresses, loopback, link-local, and the
// shared address space of RFC 6598 (carrier-grade NAT inside, and VPNs
// such as Tailscale).
func Private(ip net.IP) bool {
	return ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || sharedSpace.Contains(ip)
}

// sharedSpace is 100.64.0.0/10 (RFC 6598).
var sharedSpace = &net.IPNet{IP: net.IPv4(100, 64, 0, 0), Mask: net.CIDRMask(10, 32)}
