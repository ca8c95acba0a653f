package main

import (
	"testing"

	"github.com/danyue/danyue/daemon/api"
)

func TestPeerStateText(t *testing.T) {
	for _, c := range []struct {
		p    api.Peer
		want string
	}{
		{api.Peer{State: "connected", Connected: true, Via: "lan"}, "connected (LAN)"},
		{api.Peer{State: "connected", Connected: true, Via: "internet"}, "connected (internet)"},
		{api.Peer{State: "connected", Connected: true, Via: "internet", HolePunched: true}, "connected (internet, hole punched)"},
		{api.Peer{State: "relayed", Via: "relayed"}, "relayed (through a member; connecting directly)"},
		{api.Peer{State: "unreachable"}, "unreachable"},
		{api.Peer{State: "never-met"}, "never met"},
		{api.Peer{}, "offline"},
	} {
		if got := peerStateText(c.p); got != c.want {
			t.Errorf("peerStateText(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}
