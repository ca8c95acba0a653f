package peer

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/logbuf"
	"github.com/danyue/danyue/internal/poll"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// A peer that is merely not there (offline, restarting: nothing listens on
// its address) is no reason for a warning; one that answers and cannot
// complete the handshake (no shared secret) is.
func TestDialFailureLogLevels(t *testing.T) {
	lib := newLib(t)
	nobody := newDevice(t, "gone")
	closed := ma.StringCast("/ip4/127.0.0.1/tcp/1/p2p/" + nobody.id.String())

	var offline logbuf.Buffer
	a := newDevice(t, "A")
	a.start(t, lib, []ma.Multiaddr{closed}, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&offline, nil))
	})
	waitDialFailed(t, a.node, nobody.id)
	if s := offline.String(); strings.Contains(s, "level=WARN") || !strings.Contains(s, "level=INFO") {
		t.Errorf("a peer with nothing listening was logged as:\n%s\nwant one INFO line, no WARN", s)
	}

	var stranger logbuf.Buffer
	s := newDevice(t, "stranger")
	s.start(t, newLib(t), a.node.Addrs(), func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&stranger, nil))
	})
	waitDialFailed(t, s.node, a.id)
	if got := stranger.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "member of this library") {
		t.Errorf("a failed handshake was logged as:\n%s\nwant a WARN that suggests another library", got)
	}
}

func waitDialFailed(t *testing.T, n *Node, id lpeer.ID) {
	t.Helper()
	poll.Until(t, "a failed dial", 30*time.Second, func() bool {
		for _, p := range n.Peers() {
			if p.ID == id && p.LastError != "" {
				return true
			}
		}
		return false
	})
}
