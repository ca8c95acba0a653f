package library

import (
	"context"
	"log/slog"
	"testing"

	"github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"

	"github.com/danyue/danyue/internal/leaks"
	"github.com/danyue/danyue/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaks.Ignore()...)
}

// testLogger routes a library's logs to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// ctxT is the context of a test's calls: it ends with the test. It has no
// deadline of its own: a test that runs long on a loaded machine (under
// -race, say) must not fail for a deadline it set itself, and a call that
// hangs is caught by the test binary's -timeout, with every goroutine's
// stack.
func ctxT(t testing.TB) context.Context { return t.Context() }

// loopback is where test libraries listen: loopback only, a port the
// system picks.
var loopback = []multiaddr.Multiaddr{multiaddr.StringCast("/ip4/127.0.0.1/tcp/0")}

// testConfig is the configuration of a library on a fresh store in dir,
// named name, listening on loopback only and without mDNS.
func testConfig(t testing.TB, dir, name string) Config {
	t.Helper()
	st, err := store.Open(context.Background(), dir, store.Options{Logger: testLogger(t).With("component", "store")})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return Config{Store: st, Name: name, Listen: loopback, Logger: testLogger(t).With("device", name)}
}

// openLibrary opens and starts a library of its own on a fresh store,
// and closes both when the test ends.
func openLibrary(t testing.TB, name string, mod func(*Config)) *Library {
	t.Helper()
	cfg := testConfig(t, t.TempDir(), name)
	if mod != nil {
		mod(&cfg)
	}
	return start(t, cfg)
}

// start opens and starts a library on cfg, and closes it and its store
// when the test ends.
func start(t testing.TB, cfg Config) *Library {
	t.Helper()
	l, err := Open(ctxT(t), cfg)
	if err != nil {
		cfg.Store.Close()
		t.Fatalf("open library: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close library: %v", err)
		}
		if err := cfg.Store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	if err := l.Start(ctxT(t)); err != nil {
		t.Fatalf("start library: %v", err)
	}
	return l
}

// mustDo returns the value of a call that must not fail.
func mustDo[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
