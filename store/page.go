package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// MaxPage bounds PageQuery.Limit: what one page holds in memory is its ids
// and sequence numbers, never its records.
const MaxPage = 1000

// PageQuery asks for one page of books.
type PageQuery struct {
	Order Order
	// Deleted includes the books that are not visible (crdt Book.Visible).
	Deleted bool
	// After is the Next of the page before; nil for the first page.
	After []byte
	// Limit is the number of books, 1 to MaxPage.
	Limit int
}

// PageItem is one book of a page.
type PageItem struct {
	ID  []byte // as made by Entry.AppendID
	Seq uint64 // the book's current sequence number: it changes with the book
}

// Page is a page of books in an index order, read from one snapshot.
//
// A page starts right after the position After, and Next is the position of
// its last book. A position is a book's sort key and id, not an offset, so
// a walk from page to page stays valid while the library changes: a book
// that does not change during the walk is in exactly one page, whatever
// else is written; a book that changes may move ahead of the walk (and be
// missed) or behind it (and come again), as its new state says.
type Page struct {
	Items []PageItem
	// Next is the position to pass as After for the next page; nil if no
	// book follows this page.
	Next []byte

	s   *Store
	txn *badger.Txn
}

// Page reads the page q asks for and calls fn with it, in the snapshot the
// page was read from, so that fn can decode its books (Page.Each) after
// looking at Items.
func (s *Store) Page(ctx context.Context, q PageQuery, fn func(*Page) error) error {
	if q.Limit < 1 || q.Limit > MaxPage {
		return fmt.Errorf("page of store %s: limit %d out of 1..%d: %w", s.dir, q.Limit, MaxPage, crdt.ErrInvalid)
	}
	if q.After != nil && !ValidPosition(q.Order, q.After) {
		return fmt.Errorf("page of store %s: malformed position: %w", s.dir, crdt.ErrInvalid)
	}
	return s.view(ctx, func(txn *badger.Txn) error {
		scopes := []byte{scopeVisible}
		if q.Deleted {
			scopes = append(scopes, scopeDeleted)
		}
		m := merger{}
		for _, scope := range scopes {
			prefix := orderPrefix(q.Order, scope)
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			defer it.Close()
			if q.After == nil {
				it.Rewind()
			} else {
				it.Seek(append(append(prefix, q.After...), 0))
			}
			m.its = append(m.its, it)
		}
		p := &Page{s: s, txn: txn, Items: make([]PageItem, 0, min(q.Limit, 128))}
		var last []byte
		for pos := m.next(); pos != nil; pos = m.next() {
			if len(p.Items) == q.Limit {
				p.Next = last
				break
			}
			id := positionID(q.Order, pos)
			if id == nil {
				return corruptf(s.dir, "malformed book index key %s", keyName(pos))
			}
			v, err := getValue(txn, recordKey(id))
			if err != nil {
				return ioErr(s.dir, "read a page", err)
			}
			seq, ok := parseU64(v)
			if !ok {
				return corruptf(s.dir, "the book index holds %s, which has no record", keyName(recordKey(id)))
			}
			last = bytes.Clone(pos)
			p.Items = append(p.Items, PageItem{ID: bytes.Clone(id), Seq: seq})
		}
		return fn(p)
	})
}

// merger walks the positions of one or two index scopes in order.
type merger struct{ its []*badger.Iterator }

// next returns the smallest position among the iterators, advancing the one
// it came from, or nil when all are done. It is valid until the next call.
func (m *merger) next() []byte {
	var best *badger.Iterator
	for _, it := range m.its {
		if !it.Valid() {
			continue
		}
		if best == nil || bytes.Compare(it.Item().Key()[3:], best.Item().Key()[3:]) < 0 {
			best = it
		}
	}
	if best == nil {
		return nil
	}
	pos := best.Item().KeyCopy(nil)[3:]
	best.Next()
	return pos
}

// Each calls fn with the books of the page in order, each decoded from the
// page's snapshot. It may be called only during the call to Page's fn.
func (p *Page) Each(fn func(crdt.Entry) error) error {
	for _, it := range p.Items {
		sk := seqKey(it.Seq)
		item, err := p.txn.Get(sk)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return corruptf(p.s.dir, "record %s points to index entry %d, which is missing", keyName(recordKey(it.ID)), it.Seq)
		}
		if err != nil {
			return ioErr(p.s.dir, "read a page", err)
		}
		var e crdt.Entry
		if err := item.Value(func(v []byte) (err error) { e, err = crdt.Decode(v); return err }); err != nil {
			return corruptf(p.s.dir, "record under key %s does not decode: %v", keyName(sk), err)
		}
		if !bytes.Equal(e.AppendID(nil), it.ID) {
			return corruptf(p.s.dir, "index entry %s holds another record than %s", keyName(sk), keyName(recordKey(it.ID)))
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}
