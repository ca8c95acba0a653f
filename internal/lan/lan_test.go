package lan

import (
	"net"
	"strings"
	"testing"
)

func TestAddrs(t *testing.T) {
	if got := Addrs("127.0.0.1:7100", false); len(got) != 1 || got[0] != "127.0.0.1:7100" {
		t.Errorf("a bound address: %q", got)
	}
	if got := Addrs("no port", true); got != nil {
		t.Errorf("a malformed address: %q", got)
	}
	for _, addr := range []string{"[::]:7200", "0.0.0.0:7200"} {
		with, without := Addrs(addr, true), Addrs(addr, false)
		if len(with) == 0 {
			t.Errorf("%s: nothing, although this machine has a loopback address", addr)
		}
		if len(with) < len(without) {
			t.Errorf("%s: %d addresses with loopback, %d without", addr, len(with), len(without))
		}
		for _, hp := range with {
			host, port, err := net.SplitHostPort(hp)
			ip := net.ParseIP(host)
			switch {
			case err != nil || port != "7200" || ip == nil:
				t.Errorf("%s: %q is not an address to dial", addr, hp)
			case ip.IsUnspecified(), ip.IsLinkLocalUnicast():
				t.Errorf("%s: %q cannot be reached from another device", addr, hp)
			case addr == "0.0.0.0:7200" && strings.Contains(hp, "["):
				t.Errorf("%s: IPv6 %q for an IPv4 listener", addr, hp)
			}
		}
		for _, hp := range without {
			if host, _, _ := net.SplitHostPort(hp); net.ParseIP(host).IsLoopback() {
				t.Errorf("%s: loopback %q although not asked for", addr, hp)
			}
		}
	}
}

func TestInterfaces(t *testing.T) {
	for _, multicast := range []bool{false, true} {
		for _, ifc := range Interfaces(multicast) {
			if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 || multicast && ifc.Flags&net.FlagMulticast == 0 {
				t.Errorf("Interfaces(%v) gave %s (%v)", multicast, ifc.Name, ifc.Flags)
			}
		}
	}
}
