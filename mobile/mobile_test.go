package mobile

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/leaks"
	"github.com/danyue/danyue/internal/poll"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaks.Ignore()...)
}

const (
	keyA = "md5:900150983cd24fb0d6963f7d28e17f72"
	keyB = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	keyC = "md5:e2fc714c4727ee9395f324cd2e7f331f"
)

// logWriter sends log lines to t.Log until the test ends: goroutines of a
// stopped node must not log into a finished test.
type logWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// startNode starts a node through the facade on loopback, without mDNS, and
// stops it when the test ends.
func startNode(t *testing.T, name string) *Node {
	t.Helper()
	// Short: the API socket's path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "dym")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := NewConfig(filepath.Join(dir, "data"))
	cfg.Name = name
	cfg.Listen = "/ip4/127.0.0.1/tcp/0"
	cfg.NoMDNS = true
	cfg.PairListen = "127.0.0.1:0"
	lw := &logWriter{t: t}
	cfg.logger = slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", name)
	n, err := Start(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("stop %s: %v", name, err)
		}
		lw.mu.Lock()
		lw.done = true
		lw.mu.Unlock()
	})
	return n
}

// recorder is an EventHandler that keeps what it was given.
type recorder struct {
	mu      sync.Mutex
	events  []string // "kind json"
	busy    atomic.Int32
	overlap atomic.Bool
}

func (r *recorder) OnEvent(kind, data string) {
	if r.busy.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.busy.Add(-1)
	r.mu.Lock()
	r.events = append(r.events, kind+" "+data)
	r.mu.Unlock()
}

// find returns the data of the first event of kind whose data satisfies ok.
func (r *recorder) find(kind string, ok func(data string) bool) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		k, data, _ := strings.Cut(e, " ")
		if k == kind && ok(data) {
			return data, true
		}
	}
	return "", false
}

// join joins phone to laptop's library through the facade.
func join(t *testing.T, laptop, phone *Node) {
	t.Helper()
	code, err := laptop.Invite()
	if err != nil {
		t.Fatalf("invite: %v", err)
	}
	lib, err := phone.Join(code)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	st, err := laptop.c.Status(laptop.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lib != st.Library.ID {
		t.Fatalf("joined library %s, want the laptop's %s", lib, st.Library.ID)
	}
}

// TestTwoNodes drives two in-process nodes through the facade only: join,
// a write on one seen on the other, its event, a sync report, read time and
// a delete.
func TestTwoNodes(t *testing.T) {
	laptop, phone := startNode(t, "laptop"), startNode(t, "phone")
	rec := &recorder{}
	phone.SetEventHandler(rec)
	join(t, laptop, phone)
	poll.Until(t, "the peer event on the phone", 15*time.Second, func() bool {
		_, ok := rec.find("peer", func(data string) bool {
			var pe api.PeerEvent
			return json.Unmarshal([]byte(data), &pe) == nil && pe.Name == "laptop" && pe.Connected && pe.Device == laptop.Device()
		})
		return ok
	})

	b, err := laptop.SetPosition(keyA, 1234, 0.25, "Shared")
	if err != nil {
		t.Fatalf("set position: %v", err)
	}
	if b.Key != keyA || b.Char != 1234 || b.Percent != 0.25 || b.Title != "Shared" || b.PositionDevice != laptop.Device() ||
		b.PositionAt == "" || b.FurthestChar != 1234 || b.Deleted {
		t.Fatalf("book after set position = %+v", b)
	}
	poll.Until(t, "the phone to see the laptop's position", 15*time.Second, func() bool {
		b, err := phone.Book(keyA)
		return err == nil && b.Char == 1234 && b.PositionDeviceName == "laptop"
	})
	poll.Until(t, "the book event on the phone", 15*time.Second, func() bool {
		_, ok := rec.find("book", func(data string) bool {
			var ab api.Book
			return json.Unmarshal([]byte(data), &ab) == nil && ab.Key == keyA && ab.Position != nil && ab.Position.Char == 1234
		})
		return ok
	})

	rep, err := phone.SyncOnce(15_000)
	if err != nil {
		t.Fatalf("sync once: %v", err)
	}
	if !rep.CaughtUp || rep.PeersKnown != 1 || rep.PeersReached != 1 || rep.PeersCaughtUp != 1 || rep.Summary == "" {
		t.Fatalf("sync report = %+v", rep)
	}
	if p := rep.PeerAt(0); p == nil || p.Name != "laptop" || p.Device != laptop.Device() || !p.Reached || !p.CaughtUp || rep.PeerAt(1) != nil || rep.PeerAt(-1) != nil {
		t.Fatalf("sync report peer 0 = %+v", rep.PeerAt(0))
	}
	t.Logf("sync once: %s", rep.Summary)

	if b, err = phone.AddReadTime(keyA, 60_000, "session-1"); err != nil || b.ThisDeviceMs != 60_000 {
		t.Fatalf("add read time = %+v, %v", b, err)
	}
	if b, err = phone.AddReadTime(keyA, 60_000, "session-1"); err != nil || b.TotalMs != 60_000 {
		t.Fatalf("retried read time = %+v, %v; want counted once", b, err)
	}
	poll.Until(t, "the laptop to see the phone's read time", 15*time.Second, func() bool {
		b, err := laptop.Book(keyA)
		return err == nil && b.TotalMs == 60_000 && b.ThisDeviceMs == 0
	})

	if b, err = laptop.Delete(keyA); err != nil || !b.Deleted || b.DeletedBy != laptop.Device() || b.DeletedAt == "" {
		t.Fatalf("delete = %+v, %v", b, err)
	}
	poll.Until(t, "the deleted event on the phone", 15*time.Second, func() bool {
		data, ok := rec.find("deleted", func(data string) bool { return strings.Contains(data, keyA) })
		return ok && strings.Contains(data, "laptop")
	})
	if rec.overlap.Load() {
		t.Fatal("OnEvent was called concurrently")
	}
}

// TestShelf checks paging through a shelf with Len and Get.
func TestShelf(t *testing.T) {
	n := startNode(t, "reader")
	for i, key := range []string{keyA, keyB, keyC} {
		if _, err := n.SetPosition(key, int64(i*10), 0.1, "Book "+key[:3]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Delete(keyB); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		withDeleted bool
		want        []string
	}{
		{false, []string{keyA, keyC}},
		{true, []string{keyA, keyC, keyB}},
	}
	for _, tc := range tests {
		l, err := n.Shelf(tc.withDeleted)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := range l.Len() {
			got = append(got, l.Get(i).Key)
		}
		// The order (most recently read first) is the daemon's, tested
		// there; writes within one millisecond tie.
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("shelf(withDeleted=%v) = %v, want %v", tc.withDeleted, got, tc.want)
		}
		if l.Get(-1) != nil || l.Get(l.Len()) != nil {
			t.Errorf("Get out of range returned a book")
		}
	}
}

// TestBadInput checks that bad input gets a clear error and changes nothing.
func TestBadInput(t *testing.T) {
	n := startNode(t, "reader")
	if _, err := n.SetPosition(keyA, 10, 0.5, "Kept"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"malformed key", func() error { _, err := n.SetPosition("md5:nothex", 1, 0.1, ""); return err }, "md5"},
		{"empty key", func() error { _, err := n.Book(""); return err }, "empty"},
		{"negative char", func() error { _, err := n.SetPosition(keyA, -1, 0.1, ""); return err }, "char must be >= 0"},
		{"percent out of range", func() error { _, err := n.SetPosition(keyA, 1, 1.5, ""); return err }, "percent"},
		{"zero read time", func() error { _, err := n.AddReadTime(keyA, 0, ""); return err }, "addMs"},
		{"unknown book", func() error { _, err := n.Book(keyB); return err }, "no book"},
		{"bad invite", func() error { _, err := n.Join("nonsense"); return err }, "invite"},
		{"zero timeout", func() error { _, err := n.SyncOnce(0); return err }, "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	l, err := n.Shelf(true)
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 1 {
		t.Fatalf("shelf has %d books after bad input, want 1", l.Len())
	}
	if b := l.Get(0); b.Key != keyA || b.Char != 10 || b.Title != "Kept" || b.TotalMs != 0 {
		t.Fatalf("book after bad input = %+v, want it as written", b)
	}
}

// TestStartStop checks config errors, the HTTP API's address and token, and
// that Stop is idempotent and fails later calls cleanly.
func TestStartStop(t *testing.T) {
	if _, err := Start(nil); err == nil {
		t.Fatal("Start(nil) succeeded")
	}
	if _, err := Start(NewConfig("")); err == nil || !strings.Contains(err.Error(), "DataDir") {
		t.Fatalf("Start without DataDir = %v", err)
	}
	cfg := NewConfig(t.TempDir())
	cfg.LogLevel = "loud"
	if _, err := Start(cfg); err == nil || !strings.Contains(err.Error(), "LogLevel") {
		t.Fatalf("Start with a bad LogLevel = %v", err)
	}
	cfg = NewConfig(t.TempDir())
	cfg.Listen = "not-a-multiaddr"
	cfg.NoMDNS = true
	cfg.LogLevel = "off"
	if _, err := Start(cfg); err == nil || !strings.Contains(err.Error(), "multiaddr") {
		t.Fatalf("Start with a bad Listen = %v", err)
	}

	n := startNode(t, "reader")
	if len(n.Device()) != 16 || n.APIAddress() != "" || len(n.APIToken()) < 32 {
		t.Fatalf("device %q, address %q, token %d bytes", n.Device(), n.APIAddress(), len(n.APIToken()))
	}
	rec := &recorder{}
	n.SetEventHandler(rec)
	if err := n.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := n.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	n.SetEventHandler(rec) // after Stop: nothing to deliver, no goroutine left
	if _, err := n.Book(keyA); !errors.Is(err, ErrStopped) {
		t.Fatalf("Book after Stop = %v, want ErrStopped", err)
	}
	if _, err := n.SyncOnce(1000); !errors.Is(err, ErrStopped) {
		t.Fatalf("SyncOnce after Stop = %v, want ErrStopped", err)
	}

	// gobind gives Java a constructor of Node; a node made with it is an
	// error to use, not a crash.
	var zero Node
	zero.SetEventHandler(rec)
	if _, err := zero.Shelf(false); !errors.Is(err, errNotStarted) {
		t.Fatalf("Shelf on a zero Node = %v, want errNotStarted", err)
	}
	if zero.Device() != "" || zero.APIAddress() != "" || zero.APIToken() != "" || zero.Stop() != nil {
		t.Fatal("a zero Node answered as a started one")
	}
	if _, err := zero.SyncOnce(1); !errors.Is(err, errNotStarted) {
		t.Fatalf("SyncOnce on a zero Node = %v", err)
	}
}

// An app's data dir may be longer than a unix socket path can be (iOS app
// containers are): the embedded node serves no socket and works anyway.
func TestLongDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("Application Support-", 6), "danyue")
	cfg := NewConfig(dir)
	cfg.Listen = "/ip4/127.0.0.1/tcp/0"
	cfg.NoMDNS = true
	cfg.LogLevel = "off"
	n, err := Start(cfg)
	if err != nil {
		t.Fatalf("start on a %d-byte data dir: %v", len(dir), err)
	}
	defer n.Stop()
	if b, err := n.SetPosition(keyA, 7, 0.1, ""); err != nil || b.Char != 7 {
		t.Fatalf("set position = %+v, %v", b, err)
	}
	if _, err := os.Stat(daemon.DefaultSocket(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an embedded node made a socket: %v", err)
	}
}

// TestMemoryLimit: Config.MemoryLimit sets the process's Go memory limit
// while the node runs and Stop puts back the one before; 0 leaves it alone.
func TestMemoryLimit(t *testing.T) {
	limit := func() int64 { return debug.SetMemoryLimit(-1) } // -1 reads it
	before := limit()
	tests := []struct {
		name    string
		set     int64
		running int64
	}{
		{"unset", 0, before},
		{"set", 48 << 20, 48 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewConfig(t.TempDir())
			cfg.Listen, cfg.NoMDNS, cfg.LogLevel = "/ip4/127.0.0.1/tcp/0", true, "off"
			cfg.MemoryLimit = tt.set
			n, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := limit(); got != tt.running {
				t.Errorf("memory limit while the node runs: %d, want %d", got, tt.running)
			}
			if err := n.Stop(); err != nil {
				t.Fatal(err)
			}
			if got := limit(); got != before {
				t.Errorf("memory limit after Stop: %d, want %d as before", got, before)
			}
		})
	}
	cfg := NewConfig(t.TempDir())
	cfg.MemoryLimit = -1
	if _, err := Start(cfg); err == nil || !strings.Contains(err.Error(), "MemoryLimit") {
		t.Fatalf("Start with a negative MemoryLimit = %v", err)
	}
	if got := limit(); got != before {
		t.Errorf("memory limit after a failed Start: %d, want %d", got, before)
	}
}
