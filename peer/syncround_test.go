package peer

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/logbuf"
	"github.com/danyue/danyue/internal/poll"
)

// Issue 49: a sync is one INFO line on each side when it ends, with the
// peer, the records each way and the time it took.
func TestSyncLogsOneLinePerRound(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	if err := a.store.fill(25); err != nil {
		t.Fatal(err)
	}
	logsA, logsB := &logbuf.Buffer{}, &logbuf.Buffer{}
	logTo := func(buf *logbuf.Buffer) func(*Config) {
		return func(c *Config) {
			c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(buf, &testLogWriter{t: t}), nil))
		}
	}
	a.start(t, lib, nil, logTo(logsA))
	b.start(t, lib, a.node.Addrs(), logTo(logsB))
	line := func(buf *logbuf.Buffer, want string) func() bool {
		return func() bool {
			for l := range strings.Lines(buf.String()) {
				if strings.Contains(l, `msg="synced with peer"`) && strings.Contains(l, want) {
					return true
				}
			}
			return false
		}
	}
	poll.Until(t, "A's line for sending 25 records", 20*time.Second, line(logsA, "records_in=0 records_out=25"))
	poll.Until(t, "B's line for receiving them", 20*time.Second, line(logsB, "records_in=25 records_out=0"))
	for l := range strings.Lines(logsA.String()) {
		if strings.Contains(l, "synced with peer") && (!strings.Contains(l, "level=INFO") || !strings.Contains(l, "took=") || !strings.Contains(l, "device=")) {
			t.Errorf("the line lacks its level, device or time: %s", l)
		}
	}
}
