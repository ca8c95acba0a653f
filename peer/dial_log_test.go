package peer

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/logbuf"
	"github.com/danyue/danyue/internal/poll"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
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
	waitDialLogged(t, &offline)
	if s := offline.String(); strings.Contains(s, "level=WARN") || !strings.Contains(s, "level=INFO") {
		t.Errorf("a peer with nothing listening was logged as:\n%s\nwant one INFO line, no WARN", s)
	}

	var stranger logbuf.Buffer
	s := newDevice(t, "stranger")
	s.start(t, newLib(t), a.node.Addrs(), func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&stranger, nil))
	})
	waitDialLogged(t, &stranger)
	if got := stranger.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "member of this library") {
		t.Errorf("a failed handshake was logged as:\n%s\nwant a WARN that suggests another library", got)
	}
}

// waitDialLogged waits for the dialer's first word on a failed dial. The
// peer's status shows the error before the line is written, so the log
// itself is what the test waits for.
func waitDialLogged(t *testing.T, log *logbuf.Buffer) {
	t.Helper()
	poll.Until(t, "a failed dial logged", 30*time.Second, func() bool {
		s := log.String()
		return strings.Contains(s, "peer unreachable") || strings.Contains(s, "cannot connect to peer")
	})
}

func TestNothingListens(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	reset := &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}
	addr := ma.StringCast("/ip4/127.0.0.1/tcp/4001")
	dialErr := func(causes ...error) error {
		de := &swarm.DialError{}
		for _, c := range causes {
			de.DialErrors = append(de.DialErrors, swarm.TransportError{Address: addr, Cause: c})
		}
		return fmt.Errorf("connect: %w", de)
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", refused, true},
		{"reset in the handshake", reset, false},
		{"every address refused", dialErr(refused, refused), true},
		{"one address answered", dialErr(refused, reset), false},
		{"the answering address first", dialErr(reset, refused), false},
		{"no address tried", dialErr(), false},
	} {
		if got := nothingListens(tc.err); got != tc.want {
			t.Errorf("%s: nothingListens = %v, want %v", tc.name, got, tc.want)
		}
	}
}
