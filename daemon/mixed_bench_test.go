package daemon

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/client"
)

// mixedClients is how many reader apps (each its own connection) the mixed
// load runs at once.
const mixedClients = 64

// BenchmarkMixedLoad runs 64 clients over the unix socket, each sending one
// request after the other, mixed as reader apps send them: 35% GET a book,
// 25% PUT its position, 20% add read time, 5% DELETE a book and 15% a page of
// 20 books (the most recently read first, or a page from anywhere on the
// shelf in key order). Books are picked at random from a shelf of 1,000 and
// of 100,000. Every write is acknowledged durable. It reports the
// throughput, the latency a client sees (p50, p99, max) and the CPU time
// the process spent per operation (and the p99 of writes alone, which wait
// for the disk), which other load on the machine does not
// inflate as it does the rest.
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
	ctx := context.Background()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		lats = make([][]time.Duration, len(clients)) // every operation's
		wlat = make([][]time.Duration, len(clients)) // the writes'
	)
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	for ci, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(ci), 14))
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				key := fmt.Sprintf("md5:%032x", rng.IntN(books)+1)
				t0 := time.Now()
				var err error
				op := rng.IntN(100)
				switch {
				case op < 35:
					_, err = c.Book(ctx, key)
					if isNotFound(err) { // deleted by another client: still an answer
						err = nil
					}
				case op < 60:
					_, err = c.SetPosition(ctx, key, i, 0.5, "")
				case op < 80:
					_, err = c.AddReadTime(ctx, key, 1000, "")
				case op < 85:
					_, err = c.Delete(ctx, key)
					if isNotFound(err) { // deleted and since collected: a device alone in its library keeps its tombstones for no one
						err = nil
					}
				case op < 92 || len(cursors) == 0:
					_, err = c.BooksPage(ctx, client.BooksQuery{Limit: 20})
				default:
					_, err = c.BooksPage(ctx, client.BooksQuery{Limit: 20, Cursor: cursors[rng.IntN(len(cursors))]})
				}
				lat := time.Since(t0)
				lats[ci] = append(lats[ci], lat)
				if op >= 35 && op < 85 {
					wlat[ci] = append(wlat[ci], lat)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	all, writes := slices.Concat(lats...), slices.Concat(wlat...)
	slices.Sort(all)
	slices.Sort(writes)
	if len(all) == 0 || len(writes) == 0 {
		return
	}
	pct := func(lats []time.Duration, p float64) float64 {
		return float64(lats[min(len(lats)-1, int(p*float64(len(lats))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(pct(all, 0.50), "p50-ms")
	b.ReportMetric(pct(all, 0.99), "p99-ms")
	b.ReportMetric(pct(writes, 0.99), "write-p99-ms")
	b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
	// Server and clients together: the clients' share (HTTP, JSON
	// decoding) is what reader apps would spend on the same cores.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-us/op")
}

func isNotFound(err error) bool {
	var e *client.APIError
	return errors.As(err, &e) && e.Status == 404
}
