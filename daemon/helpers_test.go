package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/leaks"
	"github.com/danyue/danyue/internal/poll"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaks.Ignore()...)
}

// testLogger routes a component's logs to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// tempDir returns a short temporary directory: unix socket paths are
// limited to about 100 bytes, and test names make t.TempDir long.
func tempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type testDaemon struct {
	*Daemon
	dir    string
	client *client.Client
}

// startDaemon starts a daemon on a fresh data dir, listening for peers on
// loopback only and without mDNS, and closes it when the test ends.
func startDaemon(t testing.TB, mod func(*Config)) *testDaemon {
	t.Helper()
	dir := tempDir(t)
	cfg := Config{
		DataDir: filepath.Join(dir, "data"),
		Name:    "test-" + filepath.Base(dir),
		Listen:  []string{"/ip4/127.0.0.1/tcp/0"},
		NoMDNS:  true,
		Logger:  testLogger(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	d, err := Start(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	return adopt(t, d)
}

// startStillDaemon starts a daemon whose collection loop has run its round
// at the start and runs the next an hour later, so that the deleted books a
// test writes stay on its shelf: a library of one member collects them at
// its next round, which otherwise comes as soon as they are written.
func startStillDaemon(t testing.TB) *testDaemon {
	t.Helper()
	d := startDaemon(t, func(c *Config) { c.summaryEvery = time.Hour })
	poll.Until(t, "the collection loop's round at the start", 10*time.Second, func() bool {
		return d.lib.CollectionStats().Rounds > 0
	})
	return d
}

// adopt wraps a started daemon for a test, and closes it when the test
// ends.
func adopt(t testing.TB, d *Daemon) *testDaemon {
	td := &testDaemon{Daemon: d, dir: d.cfg.DataDir, client: client.New(d.Socket())}
	t.Cleanup(func() {
		td.client.Close()
		if err := d.Close(); err != nil {
			t.Errorf("close daemon: %v", err)
		}
	})
	return td
}

// ctxT is the context of a test's calls: it ends with the test. It has no
// deadline of its own: a test that runs long on a loaded machine (under
// -race, say) must not fail for a deadline it set itself, and a call that
// hangs is caught by the test binary's -timeout, with every goroutine's
// stack.
func ctxT(t testing.TB) context.Context { return t.Context() }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// count returns the number of event subscribers, so a test can wait until
// its stream is open.
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
