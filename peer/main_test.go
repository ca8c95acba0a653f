package peer

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLogWriter sends log lines to t.Logf until the test ends; libp2p and
// mDNS goroutines that outlive a test by a moment must not log into it.
type testLogWriter struct {
	t    testing.TB
	done atomic.Bool
	mu   sync.Mutex
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	if w.done.Load() {
		return len(p), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done.Load() {
		w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	}
	return len(p), nil
}

// testLogger logs to t at Info (Debug with DANYUE_TEST_DEBUG=1), prefixed
// with name.
func testLogger(t testing.TB, name string) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	level := slog.LevelInfo
	if os.Getenv("DANYUE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With("node", name)
}

func newKey(t testing.TB) crypto.PrivKey {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newLib(t testing.TB) Library {
	t.Helper()
	l, err := NewLibrary()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// rotatedLib is a new secret for lib's library, one epoch up: what a
// device that rotates offers.
func rotatedLib(t testing.TB, lib Library) Library {
	t.Helper()
	next := newLib(t)
	next.ID, next.Epoch = lib.ID, lib.Epoch+1
	return next
}

// device is one simulated device: its identity and store outlive its nodes,
// so a test can restart or wipe it.
type device struct {
	name  string
	key   crypto.PrivKey
	id    lpeer.ID
	store *memStore
	node  *Node
}

func newDevice(t testing.TB, name string) *device {
	k := newKey(t)
	id, err := lpeer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return &device{name: name, key: k, id: id, store: newMemStore(DeviceIDOf(id))}
}

var loopback = []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/0")}

// start starts the device's node in lib on loopback, dialling peers; it is
// closed when the test ends.
func (d *device) start(t testing.TB, lib Library, peers []ma.Multiaddr, opts ...func(*Config)) *Node {
	t.Helper()
	cfg := Config{
		Identity: d.key, Library: lib, Name: d.name, Store: d.store,
		Listen: loopback, Peers: peers, Logger: testLogger(t, d.name),
		// The tests build their topologies; those of the address book
		// turn it on (withBook).
		noBook: true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.node = n
	t.Cleanup(func() { n.Close() })
	return n
}

// lineage is that of the changes d's node numbers (knowledge.go).
func (d *device) lineage() uint64 { return lineage(d.store.Epoch(), d.node.run) }

func (d *device) stop(t testing.TB) {
	t.Helper()
	if err := d.node.Close(); err != nil {
		t.Fatal(err)
	}
}

// converged reports whether every store holds the same records, byte for
// byte.
func converged(stores ...*memStore) bool {
	first := stores[0].snapshot()
	for _, s := range stores[1:] {
		if !maps.Equal(first, s.snapshot()) {
			return false
		}
	}
	return true
}

func diffStores(a, b *memStore) string {
	sa, sb := a.snapshot(), b.snapshot()
	missing, differ := 0, 0
	for k, v := range sa {
		w, ok := sb[k]
		switch {
		case !ok:
			missing++
		case v != w:
			differ++
		}
	}
	return fmt.Sprintf("%d vs %d records, %d missing in the second, %d differ", len(sa), len(sb), missing, differ)
}

func connectedTo(n *Node, id lpeer.ID) bool {
	for _, p := range n.Peers() {
		if p.ID == id {
			return p.Connected && p.Name != ""
		}
	}
	return false
}

// mergedAll reports whether n is connected to d and has merged everything in
// d's store.
func mergedAll(n *Node, d *device) bool {
	last, _ := d.store.Watch()
	for _, p := range n.Peers() {
		if p.ID == d.id {
			return p.Connected && p.Merged >= last
		}
	}
	return false
}

// withBook turns the address book on (addrbook.go).
func withBook(c *Config) { c.noBook = false }
