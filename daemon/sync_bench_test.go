package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// The sync benchmarks of the peer package, on real daemons with their badger
// stores: what a user gets. Each iteration is a whole scenario; the figures
// are reported as metrics. Run with -benchtime=1x.

const syncBenchBooks = 100_000

// fillBooks writes n books straight into d's store, in batches, as if the
// daemon had been used for years.
func fillBooks(b testing.TB, d *testDaemon, n int) {
	b.Helper()
	ctx := context.Background()
	// Stamped by a clock of the test's: a write of the daemon's to one of
	// these books still orders after it (library.Library.SetPosition).
	clock := crdt.NewClock(d.Device(), crdt.Timestamp{})
	for start := 0; start < n; start += store.MaxBatchEntries {
		var entries []crdt.Entry
		for i := start; i < min(n, start+store.MaxBatchEntries); i++ {
			key := crdt.MustParseBookKey(fmt.Sprintf("md5:%032x", i+1))
			e, err := crdt.SetPosition(key, clock.Now(uint64(time.Now().UnixMilli())), uint64(i), 0.5)
			if err != nil {
				b.Fatal(err)
			}
			t, _ := crdt.SetTitle(key, e.Book.Position.At, fmt.Sprintf("Book %d", i))
			e.Book.Merge(&t.Book)
			entries = append(entries, e)
		}
		if _, err := d.store.Apply(ctx, store.Batch{Entries: entries}); err != nil {
			b.Fatal(err)
		}
	}
}

func quietDaemon(c *Config) { c.Logger = discardLogger() }

// joined starts a new daemon and joins it to a's library.
func joined(b *testing.B, a *testDaemon) *testDaemon {
	b.Helper()
	d := startDaemon(b, quietDaemon)
	code, err := a.client.Invite(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.client.Join(context.Background(), code); err != nil {
		b.Fatal(err)
	}
	return d
}

func shelfCount(d *Daemon) int {
	visible, _ := d.lib.Counts()
	return visible
}

// BenchmarkSyncInitial100k: a new device joins a library of 100,000 books;
// records per second from the join to the last book applied, and sync bytes
// on the wire per record.
func BenchmarkSyncInitial100k(b *testing.B) {
	a := startDaemon(b, quietDaemon)
	fillBooks(b, a, syncBenchBooks)
	var elapsed time.Duration
	var wire, records uint64
	for b.Loop() {
		start := time.Now()
		d := joined(b, a)
		poll.Until(b, "initial sync", 5*time.Minute, func() bool { return shelfCount(d.Daemon) == syncBenchBooks })
		elapsed += time.Since(start)
		st := traffic(d.Daemon)
		wire += st.BytesReceived + st.BytesSent
		records += st.RecordsReceived
	}
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(wire)/float64(records), "wire-B/record")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSyncReconnectOneChange100k: two devices share 100,000 books; one
// is stopped, one book changes meanwhile, and when it starts again the wire
// carries that change and little else: bytes per reconnect.
func BenchmarkSyncReconnectOneChange100k(b *testing.B) {
	ctx := context.Background()
	a := startDaemon(b, quietDaemon)
	fillBooks(b, a, syncBenchBooks)
	var aAddrs []string
	for _, m := range a.lib.Addrs() {
		aAddrs = append(aAddrs, m.String())
	}
	cfg := Config{
		DataDir: filepath.Join(tempDir(b), "data"), Name: "B", NoMDNS: true, Logger: discardLogger(),
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Peers: aAddrs,
	}
	d, err := Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { d.Close() }()
	code, err := a.client.Invite(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := joinCode(ctx, d, code); err != nil {
		b.Fatal(err)
	}
	poll.Until(b, "initial sync", 5*time.Minute, func() bool { return shelfCount(d) == syncBenchBooks })
	key := crdt.MustParseBookKey(fmt.Sprintf("md5:%032x", 1))
	var wire uint64
	for i := 0; b.Loop(); i++ {
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
		char := uint64(1_000_000 + i)
		if _, err := a.lib.SetPosition(ctx, key, char, 0.9, ""); err != nil {
			b.Fatal(err)
		}
		if d, err = Start(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		poll.Until(b, "the change to arrive", time.Minute, func() bool {
			bk, err := d.lib.Book(ctx, key)
			return err == nil && bk.Position.Char == char
		})
		st := traffic(d)
		wire += st.BytesReceived + st.BytesSent
	}
	b.ReportMetric(float64(wire)/float64(b.N), "wire-B/op")
	b.ReportMetric(0, "ns/op")
}

// joinCode joins d to the library of a long invite code.
func joinCode(ctx context.Context, d *Daemon, code string) error {
	_, err := d.lib.Join(ctx, code, "")
	return err
}

// traffic returns d's peer network counters.
func traffic(d *Daemon) peer.Stats {
	st, _ := d.lib.Traffic()
	return st
}

// BenchmarkSyncPushLatency: a position set on one device, until the other
// device's store has it; p50 and p99 over 1,000 writes.
func BenchmarkSyncPushLatency(b *testing.B) {
	a := startDaemon(b, quietDaemon)
	d := joined(b, a)
	poll.Until(b, "connection", time.Minute, func() bool { return len(d.peers()) == 1 && d.peers()[0].Connected })
	ctx := context.Background()
	key := crdt.MustParseBookKey("md5:900150983cd24fb0d6963f7d28e17f72")
	var samples []time.Duration
	for b.Loop() {
		samples = samples[:0]
		for i := range 1000 {
			start := time.Now()
			if _, err := a.lib.SetPosition(ctx, key, uint64(i+1), 0.5, ""); err != nil {
				b.Fatal(err)
			}
			for {
				bk, err := d.lib.Book(ctx, key)
				if err == nil && bk.Position.Char == uint64(i+1) {
					break
				}
				if time.Since(start) > 10*time.Second {
					b.Fatalf("write %d never arrived", i)
				}
			}
			samples = append(samples, time.Since(start))
		}
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}
