package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/mixload"
)

// mixedClients is how many reader apps (each its own connection) the mixed
// load runs at once.
const mixedClients = 64

// BenchmarkMixedLoad runs 64 clients over the unix socket sending the
// requests of reader apps (package mixload's mix) on a shelf of 1,000 and
// of 100,000 books. Every write is acknowledged durable. It reports the
// throughput, the latency a client sees (p50, p99, max) and the CPU time
// the process spent per operation (and the p99 of writes alone, which wait
// for the disk), which other load on the machine does not inflate as it
// does the rest. The clients run in the daemon's process, and their garbage
// shares its heap; testnet/cmd/mixed runs the same mix against a daemon
// process, under the settings the daemon's command gives it.
//
//	go test ./daemon/ -run '^$' -bench MixedLoad -benchtime 20000x
func BenchmarkMixedLoad(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		d := startDaemon(b, quietDaemon)
		fillBooks(b, d, n)
		cursors := pageCursors(b, d, client.BooksQuery{Limit: 1000, Sort: "key"})
		clients := make([]*client.Client, mixedClients)
		for i := range clients {
			clients[i] = client.New(d.Socket())
			defer clients[i].Close()
		}
		b.Run(fmt.Sprintf("books=%d", n), func(b *testing.B) {
			mixedLoad(b, clients, n, cursors)
		})
	}
}

func mixedLoad(b *testing.B, clients []*client.Client, books int, cursors []string) {
	b.ResetTimer()
	cpu0 := processCPU()
	r, err := mixload.Run(context.Background(), clients, books, b.N, cursors)
	cpu := processCPU() - cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(r.PerSecond(), "ops/s")
	b.ReportMetric(ms(mixload.Percentile(r.All, 0.50)), "p50-ms")
	b.ReportMetric(ms(mixload.Percentile(r.All, 0.99)), "p99-ms")
	b.ReportMetric(ms(mixload.Percentile(r.Writes, 0.99)), "write-p99-ms")
	b.ReportMetric(ms(mixload.Percentile(r.All, 1)), "max-ms")
	// Server and clients together: the clients' share (HTTP, JSON
	// decoding) is what reader apps would spend on the same cores.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(r.All)), "cpu-us/op")
}

// The mix runs to its end on a small shelf, where books are deleted again
// after their tombstones were collected: every request is answered.
func TestMixedLoad(t *testing.T) {
	const books, ops = 50, 2000
	d := startDaemon(t, func(c *Config) {
		quietDaemon(c)
		c.summaryEvery = time.Millisecond // collects deletes as they come
	})
	fillBooks(t, d, books)
	ctx := context.Background()
	cursors, err := mixload.Cursors(ctx, d.client, client.BooksQuery{Limit: 10, Sort: "key"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cursors) != books/10-1 {
		t.Fatalf("%d page cursors for %d books in pages of 10", len(cursors), books)
	}
	clients := make([]*client.Client, 4)
	for i := range clients {
		clients[i] = client.New(d.Socket())
		defer clients[i].Close()
	}
	r, err := mixload.Run(ctx, clients, books, ops, cursors)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.All) != ops || len(r.Writes) == 0 || len(r.Writes) >= ops {
		t.Errorf("%d requests answered, %d of them writes; want %d, some of them writes", len(r.All), len(r.Writes), ops)
	}
}
