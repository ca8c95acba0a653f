package peer

import (
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"
)

// Redials of a lost member's dead addresses must not use up the connection
// rate of its address: when it comes back, its inbound connection is
// accepted. Inbound connections from one address are still rate-limited.
func TestConnectionRateIsForInboundOnly(t *testing.T) {
	rm, err := newResourceManager()
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	member := ma.StringCast("/ip4/192.168.1.20/tcp/4001")
	for i := range 100 { // a minute and a half of redials every second
		scope, err := rm.OpenConnection(network.DirOutbound, true, member)
		if err != nil {
			t.Fatalf("outbound connection %d refused: %v", i, err)
		}
		scope.Done()
	}
	accepted := 0
	for range 100 {
		scope, err := rm.OpenConnection(network.DirInbound, true, member)
		if errors.Is(err, errInboundRate) {
			break
		}
		if err != nil {
			t.Fatalf("inbound connection refused: %v", err)
		}
		scope.Done()
		accepted++
	}
	if accepted == 0 || accepted == 100 {
		t.Fatalf("accepted %d of 100 inbound connections at once, want the burst and then refusals", accepted)
	}
	t.Logf("a burst of %d inbound connections from one address accepted, then refused", accepted)
}
