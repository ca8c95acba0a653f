package peer

import (
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

func TestTCP4Port(t *testing.T) {
	for _, tc := range []struct {
		addr string
		port int
		ok   bool
	}{
		{"/ip4/0.0.0.0/tcp/4001", 4001, true},
		{"/ip4/192.168.1.5/tcp/4001", 4001, true},
		{"/ip6/::/tcp/4001", 0, false},
		{"/ip4/192.168.1.5/udp/4001", 0, false},
		{"/dns4/home.example/tcp/4001", 0, false},
	} {
		port, ok := tcp4Port(ma.StringCast(tc.addr))
		if port != tc.port || ok != tc.ok {
			t.Errorf("tcp4Port(%s) = %d, %v; want %d, %v", tc.addr, port, ok, tc.port, tc.ok)
		}
	}
}
