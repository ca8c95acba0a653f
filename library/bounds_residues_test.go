package library

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// holdsDelete reports whether l holds the delete of book key: its deleted
// record, or what is left of it once collected.
func holdsDelete(ctx context.Context, t *testing.T, l *Library, key crdt.BookKey) bool {
	t.Helper()
	if e, ok := mustDo2(l.store.Get(ctx, bookID(key)))(t); ok {
		return !e.Book.Deleted.IsZero()
	}
	_, ok := mustDo2(l.store.Residue(ctx, key))(t)
	return ok
}

// Honest members hand a device that joins more residues than its bound
// takes at once (the founder and the device it added, which on the
// joiner share the founder's unit): what the bound refuses is handed over
// again with the joiner's later summaries, and taken as its bound refills,
// so the joiner ends with every delete.
func TestRefusedResiduesAreHandedAgain(t *testing.T) {
	const (
		books = 12
		bound = 5
	)
	a, b := openLibrary(t, "A", quick), openLibrary(t, "B", quick)
	joinByCode(t, b, a)
	ctx := ctxT(t)
	for i := range books {
		mustDo(a.SetPosition(ctx, collectKey(i), uint64(i+1), 0.1, fmt.Sprintf("book %d", i)))(t)
	}
	poll.Until(t, "B to have every book", time.Minute, func() bool {
		visible, _ := b.Counts()
		return visible == books
	})
	for i := range books {
		mustDo(a.DeleteBook(ctx, collectKey(i)))(t)
	}
	for _, l := range []*Library{a, b} {
		poll.Until(t, l.Name()+" to collect every deleted book", time.Minute, func() bool {
			_, deleted := mustDo2(l.store.BookCounts(ctx))(t)
			return deleted == 0
		})
	}

	// C's clock starts a day behind and moves an hour at a time, each a
	// bucket of residues refilled.
	var offset atomic.Int64
	offset.Store(int64(-24 * time.Hour))
	logs := newWarnLog(testLogger(t).With("device", "C").Handler())
	c := openLibrary(t, "C", func(cfg *Config) {
		quick(cfg)
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		cfg.Bounds = Bounds{Residues: bound}
		cfg.Logger = slog.New(logs)
	})
	joinByCode(t, c, a)
	i := 0
	poll.Until(t, "C to hold every delete", 2*time.Minute, func() bool {
		for k := range books {
			if !holdsDelete(ctx, t, c, collectKey(k)) {
				if len(logs.matching("refused residues")) > 0 {
					// Refused: time passes at C, and a write on A
					// changes C's summary, which A answers with the
					// residues again.
					offset.Add(int64(time.Hour))
					i++
					mustDo(a.SetPosition(ctx, collectKey(books+i), 1, 0.1, ""))(t)
				}
				return false
			}
		}
		return true
	})
	if len(logs.matching("refused residues")) == 0 {
		t.Fatalf("C refused no residue: the bound of %d did not hold %d books back", bound, books)
	}
}
