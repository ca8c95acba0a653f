package daemon

import (
	"context"
	"fmt"
	"testing"

	"github.com/danyue/danyue/bench/mixload"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// BenchmarkListBooks lists the shelf through the unix socket: the whole
// shelf, as the unpaged answer and as a page walk, and one page of 100
// books from all over the shelf, on 1,000 and 100,000 books. A page costs the
// same on both (the daemon's B/op is in the server; the client's allocs are
// what -benchmem shows, and they too must not grow with the shelf).
func BenchmarkListBooks(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		d := startDaemon(b, quietDaemon)
		fillBooks(b, d, n)
		ctx := context.Background()
		cursors := pageCursors(b, d, client.BooksQuery{Limit: 100})
		b.Run(fmt.Sprintf("books=%d/walk=1000", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				got := 0
				if err := d.client.EachBook(ctx, client.BooksQuery{Limit: 1000}, func(api.Book) error { got++; return nil }); err != nil || got != n {
					b.Fatal(got, err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "books/s")
		})
		b.Run(fmt.Sprintf("books=%d/whole", n), func(b *testing.B) {
			b.ReportAllocs()
			var size int64
			for range b.N {
				var w byteCounter
				if err := d.client.DoRaw(ctx, "GET", "/v1/books", nil, nil, &w); err != nil {
					b.Fatal(err)
				}
				size = w.n
			}
			b.ReportMetric(float64(size)/1e6, "MB/answer")
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "books/s")
		})
		// Last, when the writes of the fill have long been compacted
		// (compaction allocates, and -benchmem counts the whole process).
		b.Run(fmt.Sprintf("books=%d/page=100", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				p, err := d.client.BooksPage(ctx, client.BooksQuery{Limit: 100, Cursor: cursors[i*7919%len(cursors)]})
				if err != nil || len(p.Books.Books) != 100 {
					b.Fatal(len(p.Books.Books), err)
				}
			}
		})
	}
}

// pageCursors walks the shelf a page of q at a time and returns the cursor
// after each page but the last, to start pages from all over the shelf.
func pageCursors(b *testing.B, d *testDaemon, q client.BooksQuery) []string {
	cursors, err := mixload.Cursors(context.Background(), d.client, q)
	if err != nil {
		b.Fatal(err)
	}
	return cursors
}

type byteCounter struct{ n int64 }

func (w *byteCounter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }
