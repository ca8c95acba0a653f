package peer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// refusingStore is a memStore that refuses one book until told to take it,
// as a store refuses the records of a writer over its bounds: it merges the
// rest of the batch and moves no cursor.
type refusingStore struct {
	*memStore
	refuse  crdt.BookKey
	take    atomic.Bool
	refused atomic.Int64
}

func (s *refusingStore) ApplyRemote(ctx context.Context, from crdt.DeviceID, epoch, seq uint64, entries []crdt.Entry) error {
	if s.take.Load() {
		return s.memStore.ApplyRemote(ctx, from, epoch, seq, entries)
	}
	kept := make([]crdt.Entry, 0, len(entries))
	for _, e := range entries {
		if e.Kind == crdt.KindBook && e.Book.Key == s.refuse {
			continue
		}
		kept = append(kept, e)
	}
	if len(kept) == len(entries) {
		return s.memStore.ApplyRemote(ctx, from, epoch, seq, entries)
	}
	s.refused.Add(1)
	ep, cur, _ := s.memStore.Cursor(ctx, from)
	if err := s.memStore.ApplyRemote(ctx, from, ep, cur, kept); err != nil {
		return err
	}
	return fmt.Errorf("one record: %w", ErrRecordsRefused)
}

// A batch with a refused record is taken but for that record; the stream
// goes on (later writes arrive) while claiming nothing: the cursor stays
// before that batch, and no knowledge of the sender is noted. Once the
// store takes it, the record arrives on the next pull, and the cursor
// catches up (refused.go).
func TestRefusedRecordsRetried(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	if err := a.store.fill(1500); err != nil {
		t.Fatal(err)
	}
	rs := &refusingStore{memStore: b.store, refuse: bookKey(900)}
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs(), func(c *Config) { c.Store, c.Reoffer = rs, 20*time.Millisecond })
	poll.Until(t, "B to take all but the refused book", 20*time.Second, func() bool {
		return b.store.len() == 1499 && rs.refused.Load() > 0
	})
	if _, ok := b.store.book(bookKey(900)); ok {
		t.Fatal("B holds the refused book")
	}
	if err := a.store.setPosition(bookKey(5000), 1); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "A's later write to reach B while the stream is held", 10*time.Second, func() bool {
		_, ok := b.store.book(bookKey(5000))
		return ok
	})
	last, _ := a.store.Watch()
	epoch, cursor, _ := b.store.Cursor(t.Context(), DeviceIDOf(a.id))
	if epoch != a.store.Epoch() || cursor >= last-600 {
		t.Errorf("B's cursor into A is %d of %d, want it held before the batch of the refused book", cursor, last)
	}
	if m, ok := b.node.kn.cursor(DeviceIDOf(a.id)); ok && m.seq > cursor {
		t.Errorf("B notes A's changes merged up to %d, past its held cursor %d", m.seq, cursor)
	}
	rs.take.Store(true)
	poll.Until(t, "B to take the refused book on a pull again, and its cursor to catch up", 20*time.Second, func() bool {
		_, cur, _ := b.store.Cursor(t.Context(), DeviceIDOf(a.id))
		return converged(a.store, b.store) && cur == last
	})
}

// The delay before a stream that refused records is pulled again doubles
// with each such stream of the peer in a row, up to maxReoffer.
func TestReofferAfter(t *testing.T) {
	for _, c := range []struct {
		base   time.Duration
		inARow int
		want   time.Duration
	}{
		{time.Minute, 0, time.Minute},
		{time.Minute, 1, 2 * time.Minute},
		{time.Minute, 5, 32 * time.Minute},
		{time.Minute, 6, time.Hour},
		{time.Minute, 1000, time.Hour},
		{50 * time.Millisecond, 2, 200 * time.Millisecond},
		{2 * time.Hour, 3, 2 * time.Hour},
	} {
		if got := reofferAfter(c.base, c.inARow); got != c.want {
			t.Errorf("reofferAfter(%v, %d) = %v, want %v", c.base, c.inARow, got, c.want)
		}
	}
}
