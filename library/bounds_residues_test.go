package library

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/peer"
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

// A residue handed over again to a device that has collected that book
// since changes nothing there, and spends nothing of its sender's bound:
// else a handing would stall on the residues the receiver took and
// collected, each retry spending the bound on them before it reached the
// rest.
func TestCollectedResidueIsFree(t *testing.T) {
	l := openLibrary(t, "laptop", func(c *Config) {
		c.SummaryEvery, c.KeepDeleted = time.Hour, -1
		c.Bounds = Bounds{Residues: 1}
	})
	poll.Until(t, "the collection loop's round at the start", 10*time.Second, func() bool {
		return l.CollectionStats().Rounds > 0
	})
	ctx := ctxT(t)
	mustDo(l.SetPosition(ctx, collectKey(0), 1, 0.1, "gone"))(t)
	mustDo(l.DeleteBook(ctx, collectKey(0)))(t)
	l.purge(ctx, nil)
	res, ok := mustDo2(l.store.Residue(ctx, collectKey(0)))(t)
	if !ok {
		t.Fatal("the deleted book was not collected: nothing to test")
	}
	const sender = crdt.DeviceID(77)
	fresh := mustDo(crdt.Delete(collectKey(1), l.stamp()))(t)
	if err := l.applyFrom(ctx, sender, []crdt.Entry{fresh}, nil); err != nil {
		t.Fatalf("a first residue, within a bound of one: %v", err)
	}
	if err := l.applyFrom(ctx, sender, []crdt.Entry{crdt.BookEntry(res)}, nil); err != nil {
		t.Fatalf("a residue of a book collected here, with the bound spent: %v", err)
	}
	other := mustDo(crdt.Delete(collectKey(2), l.stamp()))(t)
	if err := l.applyFrom(ctx, sender, []crdt.Entry{other}, nil); !errors.Is(err, peer.ErrRecordsRefused) {
		t.Fatalf("a new residue past the bound: %v, want it refused", err)
	}
}
