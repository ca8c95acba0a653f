package library

import (
	"context"
	"errors"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/store"
)

// The local write path: every local write goes through a crdt operation and
// one durable store batch, then through changed (merge.go), as a batch from
// a peer does.

// ErrNotFound is returned for a book this device has no record of.
var ErrNotFound = errors.New("no such book")

// write applies one local write to a record durably. build makes the change
// from a timestamp: it runs first with a reading of the clock, so that bad
// input is refused before anything is written, and again inside the store's
// write if the record then holds a stamp at or past that reading (one the
// clock did not follow, because it was more than crdt.MaxAhead ahead): the
// write then takes the next reading after the record's latest stamp, so that
// a write made after this device saw another one to the record still wins.
// Reading the record inside the write keeps a concurrent write from slipping
// between the check and the write.
func (l *Library) write(ctx context.Context, build func(at crdt.Timestamp) (crdt.Entry, error)) (store.Result, error) {
	at := l.stamp()
	e, err := build(at)
	if err != nil {
		return store.Result{}, err
	}
	id := e.AppendID(nil)
	return l.apply(ctx, store.Batch{Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(id)
		if err != nil {
			return nil, err
		}
		if !ok {
			return []crdt.Entry{e}, nil
		}
		next := crdt.StampAfter(at, cur.MaxTimestamp())
		if next == at {
			return []crdt.Entry{e}, nil
		}
		later, err := build(next)
		if err != nil {
			return nil, err
		}
		return []crdt.Entry{later}, nil
	}})
}

// apply writes one local change durably.
func (l *Library) apply(ctx context.Context, b store.Batch) (store.Result, error) {
	res, err := l.store.Apply(ctx, b)
	if err != nil {
		return res, err
	}
	l.changed(res.Changed, false)
	return res, nil
}

// SetPosition moves the book to char/percent and, if title is not empty,
// names it, as one change, and returns the book's new state. Invalid input
// is an error wrapping crdt.ErrInvalid, and changes nothing.
func (l *Library) SetPosition(ctx context.Context, key crdt.BookKey, char uint64, percent float64, title string) (crdt.Book, error) {
	res, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
		e, err := crdt.SetPosition(key, at, char, percent)
		if err != nil || title == "" {
			return e, err
		}
		t, err := crdt.SetTitle(key, at, title)
		if err != nil {
			return crdt.Entry{}, err
		}
		e.Book.Merge(&t.Book)
		return e, nil
	})
	return l.bookAfter(ctx, key, res, err)
}

// AddReadTime adds ms of reading on this device. The new slot value is
// computed inside the store's write from the committed slot, so concurrent
// adds are never lost; dedup, if set, makes a retried request count once,
// and sum (a digest of the request) tells a retry from another request under
// the same key (store.ErrDedupMismatch).
func (l *Library) AddReadTime(ctx context.Context, key crdt.BookKey, ms uint64, dedup string, sum []byte) (crdt.Book, error) {
	id := bookID(key)
	b := store.Batch{
		Dedup:    dedup,
		DedupSum: sum,
		Daily:    &store.DailyAdd{Day: l.cfg.Now().Format(time.DateOnly), Ms: ms},
		Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
			cur, ok, err := get(id)
			if err != nil {
				return nil, err
			}
			var local *crdt.Book
			if ok {
				local = &cur.Book
			}
			e, err := crdt.AddReadTime(key, local, l.self, ms)
			if err != nil {
				return nil, err
			}
			return []crdt.Entry{e}, nil
		},
	}
	res, err := l.apply(ctx, b)
	if errors.Is(err, store.ErrDuplicate) {
		return l.Book(ctx, key)
	}
	return l.bookAfter(ctx, key, res, err)
}

// DeleteBook puts a tombstone on the book. Its read time is kept. A book
// this device has no record of is ErrNotFound, and nothing is written: a
// tombstone of a key no device knows would reach every device as an
// "(untitled)" deleted book. Records are never removed, so a book found here
// is still there when the tombstone is written.
func (l *Library) DeleteBook(ctx context.Context, key crdt.BookKey) (crdt.Book, error) {
	if _, err := l.Book(ctx, key); err != nil {
		return crdt.Book{}, err
	}
	res, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.Delete(key, at) })
	return l.bookAfter(ctx, key, res, err)
}

// Restore brings a deleted book back on every device: it writes the book's
// last position again, which is newer than the tombstone. A book on the
// shelf is left as it is.
func (l *Library) Restore(ctx context.Context, key crdt.BookKey) (crdt.Book, error) {
	book, err := l.Book(ctx, key)
	if err != nil || book.Visible() {
		return book, err
	}
	return l.SetPosition(ctx, key, book.Position.Char, book.Position.Percent.Float(), "")
}

// bookAfter returns the state of book key after a change to it.
func (l *Library) bookAfter(ctx context.Context, key crdt.BookKey, res store.Result, err error) (crdt.Book, error) {
	if err != nil {
		return crdt.Book{}, err
	}
	for _, c := range res.Changed {
		if c.Entry.Kind == crdt.KindBook && c.Entry.Book.Key == key {
			return c.Entry.Book, nil
		}
	}
	// Nothing changed (the change was already known): the stored state is
	// the answer.
	return l.Book(ctx, key)
}

// Book returns the stored record of key, or ErrNotFound.
func (l *Library) Book(ctx context.Context, key crdt.BookKey) (crdt.Book, error) {
	e, ok, err := l.store.Get(ctx, bookID(key))
	if err != nil {
		return crdt.Book{}, err
	}
	if !ok {
		return crdt.Book{}, ErrNotFound
	}
	return e.Book, nil
}

// bookID is the store id of book key's record.
func bookID(key crdt.BookKey) []byte {
	e := crdt.BookEntry(crdt.Book{Key: key})
	return e.AppendID(nil)
}
