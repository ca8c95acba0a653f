package peer

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// Benchmarks against the in-memory store (memstore_test.go). Run with
// -benchtime=1x or a small count: each iteration is a whole scenario, and
// the figures are reported as metrics, not as ns/op.

const benchBooks = 100_000

func quiet(c *Config) {
	c.Logger = slog.New(slog.DiscardHandler)
}

func filledDevice(b *testing.B, name string, books int) *device {
	d := newDevice(b, name)
	if err := d.store.fill(books); err != nil {
		b.Fatal(err)
	}
	return d
}

// Initial sync of a library of 100,000 books to a new device: records per
// second from the start of the new node to the last record applied, and
// sync bytes on the wire per record.
func BenchmarkInitialSync(b *testing.B) {
	lib := newLib(b)
	a := filledDevice(b, "A", benchBooks)
	a.start(b, lib, nil, quiet)
	var elapsed time.Duration
	var wire, records uint64
	for b.Loop() {
		b.StopTimer()
		d := newDevice(b, "B")
		b.StartTimer()
		start := time.Now()
		d.start(b, lib, a.node.Addrs(), quiet)
		poll.Until(b, "initial sync", time.Minute, func() bool { return d.store.len() == benchBooks })
		elapsed += time.Since(start)
		st := d.node.Stats()
		wire += st.BytesReceived + st.BytesSent
		records += st.RecordsReceived
		b.StopTimer()
		poll.Until(b, "the way back to settle", time.Minute, func() bool { return mergedAll(a.node, d) })
		if got := a.node.Stats().RecordsReceived; got != 0 {
			b.Errorf("A received %d records back", got)
		}
		d.stop(b)
		b.StartTimer()
	}
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(wire)/float64(records), "wire-B/record")
	b.ReportMetric(0, "ns/op")
}

// One book changed among 100,000 while a device was away: the sync bytes
// both ways when it comes back.
func BenchmarkReconnectOneChange(b *testing.B) {
	lib := newLib(b)
	a := filledDevice(b, "A", benchBooks)
	a.start(b, lib, nil, quiet)
	d := newDevice(b, "B")
	d.start(b, lib, a.node.Addrs(), quiet)
	poll.Until(b, "initial sync", time.Minute, func() bool { return mergedAll(a.node, d) && mergedAll(d.node, a) })
	var wire, records uint64
	var elapsed time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer()
		d.stop(b)
		i++
		key, want := bookKey(i%benchBooks), uint64(1_000_000+i)
		if err := a.store.setPosition(key, want); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		d.start(b, lib, a.node.Addrs(), quiet)
		poll.Until(b, "the change", time.Minute, func() bool {
			bk, _ := d.store.book(key)
			return bk.Position.Char == want
		})
		elapsed += time.Since(start)
		// Both directions done: B's pull from A, and A's pull from B (which
		// has nothing new for A but the change's echo, which it skips).
		poll.Until(b, "both directions", time.Minute, func() bool { return mergedAll(a.node, d) && mergedAll(d.node, a) })
		st := d.node.Stats()
		wire += st.BytesReceived + st.BytesSent
		records += st.RecordsReceived + st.RecordsSent
	}
	if !converged(a.store, d.store) {
		b.Fatalf("stores differ: %s", diffStores(a.store, d.store))
	}
	b.ReportMetric(float64(wire)/float64(b.N), "wire-B/op")
	b.ReportMetric(float64(records)/float64(b.N), "records/op")
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms-to-applied")
	b.ReportMetric(0, "ns/op")
}

// A local write on one device until the other device's store has applied
// it: p50 and p99 over 1,000 writes, on loopback. With durable stores
// (durableStore), every write a store makes durable costs a sync of a file
// first, as the real store's do: what the sync protocol adds to a change's
// way besides the two stores' own commits shows.
func BenchmarkPushLatency(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchPushLatency(b, false) })
	b.Run("durable", func(b *testing.B) { benchPushLatency(b, true) })
}

func benchPushLatency(b *testing.B, durable bool) {
	lib := newLib(b)
	a, d := filledDevice(b, "A", 1000), newDevice(b, "B")
	opt := func(dev *device) func(*Config) {
		return func(c *Config) {
			if durable {
				c.Store = newDurableStore(b, dev.store)
			}
		}
	}
	a.start(b, lib, nil, quiet, opt(a))
	d.start(b, lib, a.node.Addrs(), quiet, opt(d))
	poll.Until(b, "initial sync", time.Minute, func() bool { return mergedAll(a.node, d) && mergedAll(d.node, a) })
	var lat []time.Duration
	n := 0
	for b.Loop() {
		for range 1000 {
			n++
			key, want := bookKey(n%1000), uint64(2_000_000+n)
			start := time.Now()
			if err := a.store.setPosition(key, want); err != nil {
				b.Fatal(err)
			}
			deadline := time.NewTimer(5 * time.Second)
			for {
				_, changed := d.store.Watch()
				if bk, _ := d.store.book(key); bk.Position.Char == want {
					break
				}
				select {
				case <-changed:
				case <-deadline.C:
					b.Fatal("write not applied within 5 s")
				}
			}
			deadline.Stop()
			lat = append(lat, time.Since(start))
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1])/1e6, "max-ms")
	b.ReportMetric(0, "ns/op")
}

// durableStore is a memStore whose durable writes (ApplyRemote,
// SkipPast) first write and sync a file, so that they cost what a disk's
// sync costs. Its MarkDelivered syncs nothing, as the store's does not.
type durableStore struct {
	*memStore
	mu sync.Mutex
	f  *os.File
}

func newDurableStore(t testing.TB, s *memStore) *durableStore {
	f, err := os.Create(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &durableStore{memStore: s, f: f}
}

func (s *durableStore) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write(make([]byte, 64)); err != nil {
		return err
	}
	return s.f.Sync()
}

func (s *durableStore) ApplyRemote(ctx context.Context, from crdt.DeviceID, epoch, seq uint64, entries []crdt.Entry) error {
	if err := s.sync(); err != nil {
		return err
	}
	return s.memStore.ApplyRemote(ctx, from, epoch, seq, entries)
}

func (s *durableStore) SkipPast(ctx context.Context, seq uint64) error {
	if err := s.sync(); err != nil {
		return err
	}
	return s.memStore.SkipPast(ctx, seq)
}
