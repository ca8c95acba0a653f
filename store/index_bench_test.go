package store

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// positions returns the positions after every 1000th book of order o, to
// start pages from all over the shelf.
func positions(b *testing.B, s *Store, o Order) [][]byte {
	var pos [][]byte
	q := PageQuery{Order: o, Limit: MaxPage}
	for {
		var next []byte
		if err := s.Page(context.Background(), q, func(p *Page) error { next = p.Next; return nil }); err != nil {
			b.Fatal(err)
		}
		if next == nil {
			return pos
		}
		pos = append(pos, next)
		q.After = next
	}
}

// BenchmarkPage reads one page of 100 books, decoded, from a place all over
// the shelf, on shelves of 1,000 and 100,000 books: the cost of a page must
// not grow with the shelf (compare B/op and allocs/op across sizes).
//
// DANYUE_BENCH_1M=1 adds a shelf of 1,000,000 books (a minute to make).
func BenchmarkPage(b *testing.B) {
	sizes := []int{1000, 100_000}
	if os.Getenv("DANYUE_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		for _, o := range orders {
			b.Run(fmt.Sprintf("books=%d/order=%c", n, o), func(b *testing.B) {
				s := openFixture(b, n)
				pos := append(positions(b, s, o), nil)
				b.ReportAllocs()
				b.ResetTimer()
				books := 0
				for i := range b.N {
					q := PageQuery{Order: o, Limit: 100, After: pos[i%len(pos)]}
					err := s.Page(context.Background(), q, func(p *Page) error {
						return p.Each(func(crdt.Entry) error { books++; return nil })
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				if books < b.N {
					b.Fatalf("%d books in %d pages", books, b.N)
				}
			})
		}
	}
}

// BenchmarkWalk100k reads the whole shelf of 100,000 books a page of 1,000
// at a time, decoded, in each order.
func BenchmarkWalk100k(b *testing.B) {
	for _, o := range orders {
		b.Run(fmt.Sprintf("order=%c", o), func(b *testing.B) {
			s := openFixture(b, 100_000)
			b.ReportAllocs()
			b.ResetTimer()
			books := 0
			for range b.N {
				q := PageQuery{Order: o, Limit: MaxPage}
				for {
					var next []byte
					err := s.Page(context.Background(), q, func(p *Page) error {
						next = p.Next
						return p.Each(func(crdt.Entry) error { books++; return nil })
					})
					if err != nil {
						b.Fatal(err)
					}
					if next == nil {
						break
					}
					q.After = next
				}
			}
			if books != b.N*100_000 {
				b.Fatalf("%d books in %d walks", books, b.N)
			}
			b.ReportMetric(float64(books)/b.Elapsed().Seconds(), "books/s")
		})
	}
}
