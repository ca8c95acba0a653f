package peer

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/logbuf"
	"github.com/danyue/danyue/internal/poll"
	"github.com/libp2p/go-libp2p/core/network"
)

// Issue 49: a peer that serves rekey but not sync (the restricted node of a
// superseded secret after a forget, or a node shutting down) is not a build
// of another protocol: the pull side says what happened at INFO, logs no
// ERROR and reports no refusal.
func TestSyncWithdrawnIsNotARefusal(t *testing.T) {
	lib := newLib(t)
	r := rawHost(t, lib)
	r.SetStreamHandler(RekeyProtocolID, func(s network.Stream) { s.Reset() })
	a := newDevice(t, "A")
	var events eventLog
	logs := &logbuf.Buffer{}
	a.start(t, lib, p2pAddrs(t, r), func(c *Config) {
		c.OnEvent = events.add
		c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, &testLogWriter{t: t}), nil))
	})
	poll.Until(t, "the pull to end", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "stopped serving sync")
	})
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "stopped serving sync") && !strings.Contains(line, "level=INFO") {
			t.Errorf("logged at another level than INFO: %s", line)
		}
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("an ERROR line: %s", line)
		}
	}
	if e, ok := events.find(PeerRefused, nil); ok {
		t.Errorf("reported as refused: %v", e.Err)
	}
}
