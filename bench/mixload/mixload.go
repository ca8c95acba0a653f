// Package mixload runs the load of many reader apps on a daemon's local
// API, each sending one request after the other, mixed as reader apps send
// them: 35% GET a book, 25% PUT its position, 20% add read time, 5% DELETE
// it and 15% a page of 20 books (the most recently read first, or a page
// from anywhere on the shelf in key order). Books are picked at random from
// books 1 to N of a shelf, as Key names them (Fill writes such a shelf).
//
// The measuring command (bench/cmd/measure, its write and apps phases)
// runs it against a daemon process, as the daemon is installed; its
// clients live in another process, so their garbage is not the daemon's.
package mixload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danyue/danyue/daemon/client"
)

// Key is the key of book i (from 1) of a shelf written by Fill.
func Key(i int) string { return fmt.Sprintf("md5:%032x", i) }

// Fill writes books 1 to n through c, from 16 requests at once.
func Fill(ctx context.Context, c *client.Client, n int) error {
	const writers = 16
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			var err error
			for i := w + 1; i <= n && err == nil; i += writers {
				_, err = c.SetPosition(ctx, Key(i), int64(i), 0.5, fmt.Sprintf("Book %d", i))
			}
			errs <- err
		}()
	}
	var errAll error
	for range writers {
		errAll = errors.Join(errAll, <-errs)
	}
	return errAll
}

// Cursors returns the cursor of every page of q after the first.
func Cursors(ctx context.Context, c *client.Client, q client.BooksQuery) ([]string, error) {
	var cursors []string
	for {
		p, err := c.BooksPage(ctx, q)
		if err != nil {
			return nil, err
		}
		if p.Next == "" {
			return cursors, nil
		}
		cursors = append(cursors, p.Next)
		q.Cursor = p.Next
	}
}

// Result is what a run measured.
type Result struct {
	Elapsed time.Duration
	All     []time.Duration // every request's latency, sorted
	Writes  []time.Duration // the writes' (PUT, read time, DELETE), sorted
}

// PerSecond is the requests answered a second.
func (r Result) PerSecond() float64 { return float64(len(r.All)) / r.Elapsed.Seconds() }

// Percentile returns the latency below which a fraction p of lats lie
// (lats sorted), or 0 if there are none.
func Percentile(lats []time.Duration, p float64) time.Duration {
	if len(lats) == 0 {
		return 0
	}
	return lats[min(len(lats)-1, int(p*float64(len(lats))))]
}

// Run sends ops requests, each client one after the other, on a shelf of
// books 1 to books, starting pages from cursors (Cursors of pages in key
// order; none: only first pages). A 404 is an answer: the book was deleted
// by another client, and may have been collected since (a device alone in
// its library keeps its tombstones for no one). A client stops at its first
// other error, which Run returns.
func Run(ctx context.Context, clients []*client.Client, books, ops int, cursors []string) (Result, error) {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		lats = make([][]time.Duration, len(clients))
		wlat = make([][]time.Duration, len(clients))
		errs = make([]error, len(clients))
	)
	start := time.Now()
	for ci, c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(ci), 14))
			for i := next.Add(1); i <= int64(ops); i = next.Add(1) {
				key := Key(rng.IntN(books) + 1)
				t0 := time.Now()
				var err error
				op := rng.IntN(100)
				switch {
				case op < 35:
					_, err = c.Book(ctx, key)
				case op < 60:
					_, err = c.SetPosition(ctx, key, i, 0.5, "")
				case op < 80:
					_, err = c.AddReadTime(ctx, key, 1000, "")
				case op < 85:
					_, err = c.Delete(ctx, key)
				case op < 92 || len(cursors) == 0:
					_, err = c.BooksPage(ctx, client.BooksQuery{Limit: 20})
				default:
					_, err = c.BooksPage(ctx, client.BooksQuery{Limit: 20, Cursor: cursors[rng.IntN(len(cursors))]})
				}
				lat := time.Since(t0)
				if err != nil && !isNotFound(err) {
					errs[ci] = fmt.Errorf("request %d: %w", i, err)
					return
				}
				lats[ci] = append(lats[ci], lat)
				if op >= 35 && op < 85 {
					wlat[ci] = append(wlat[ci], lat)
				}
			}
		})
	}
	wg.Wait()
	r := Result{Elapsed: time.Since(start), All: slices.Concat(lats...), Writes: slices.Concat(wlat...)}
	slices.Sort(r.All)
	slices.Sort(r.Writes)
	return r, errors.Join(errs...)
}

func isNotFound(err error) bool {
	var e *client.APIError
	return errors.As(err, &e) && e.Status == 404
}
