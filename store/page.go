package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

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
	if !slices.Contains(orders[:], q.Order) {
		return fmt.Errorf("page of store %s: unknown order %q: %w", s.dir, byte(q.Order), crdt.ErrInvalid)
	}
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
			last = pos
			p.Items = append(p.Items, PageItem{ID: id})
		}
		if err := p.seqs(); err != nil {
			return err
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

// pointReads is the largest page whose records are read a point read
// each. A seek of an iterator positions it in every table that may hold
// the prefix (each level-0 table and one table of each level), while a
// point read finds a key that is in the memtable there and skips the tables
// whose bloom filter rules it out. An iterator pays off over many keys read
// in key order, in the same blocks: a page of hundreds, as a walk of the
// shelf reads. Apps reading a screenful, most recently read first, read
// books that are still in the memtable.
const pointReads = 32

// seqs reads the sequence numbers of the page's books: a point read each
// for a small page, else in id order with one forward-seeking iterator.
func (p *Page) seqs() error {
	if len(p.Items) <= pointReads {
		for i := range p.Items {
			key := recordKey(p.Items[i].ID)
			if err := p.value(key, "the book index holds %s, which has no record", p.setSeq(i, key)); err != nil {
				return err
			}
		}
		return nil
	}
	byID := make([]int, len(p.Items))
	for i := range byID {
		byID[i] = i
	}
	slices.SortFunc(byID, func(a, b int) int { return bytes.Compare(p.Items[a].ID, p.Items[b].ID) })
	it := p.txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pRecord, byte(crdt.KindBook)}})
	defer it.Close()
	key := []byte{pRecord}
	for _, i := range byID {
		key = append(key[:1], p.Items[i].ID...)
		it.Seek(key)
		if !it.Valid() || !bytes.Equal(it.Item().Key(), key) {
			return corruptf(p.s.dir, "the book index holds %s, which has no record", keyName(key))
		}
		if err := it.Item().Value(p.setSeq(i, key)); err != nil {
			return err
		}
	}
	return nil
}

// setSeq returns what sets item i's sequence number from the value of its
// record, under key.
func (p *Page) setSeq(i int, key []byte) func([]byte) error {
	return func(v []byte) error {
		seq, ok := parseU64(v)
		if !ok {
			return corruptf(p.s.dir, "malformed sequence number under key %s", keyName(key))
		}
		p.Items[i].Seq = seq
		return nil
	}
}

// eachChunk is how many records Each reads before decoding them: what it
// holds at once.
const eachChunk = 128

// Each calls fn with the books of the page in order, each decoded from the
// page's snapshot. It may be called only during the call to Page's fn.
//
// It reads a chunk of records in sequence order with one forward-seeking
// iterator, as Scan does, then decodes the chunk in page order.
func (p *Page) Each(fn func(crdt.Entry) error) error {
	if len(p.Items) <= pointReads {
		for _, item := range p.Items {
			var e crdt.Entry
			sk := seqKey(item.Seq)
			err := p.value(sk, "a record points to index entry %s, which is missing", func(v []byte) (err error) {
				e, err = p.decode(v, item)
				return err
			})
			if err != nil {
				return err
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
	it := p.txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pSeq}})
	defer it.Close()
	var (
		bySeq []int
		spans [][2]int
		buf   []byte
	)
	for start := 0; start < len(p.Items); start += eachChunk {
		chunk := p.Items[start:min(len(p.Items), start+eachChunk)]
		bySeq, spans, buf = bySeq[:0], spans[:0], buf[:0]
		for i := range chunk {
			bySeq = append(bySeq, i)
			spans = append(spans, [2]int{})
		}
		slices.SortFunc(bySeq, func(a, b int) int { return cmpU64(chunk[a].Seq, chunk[b].Seq) })
		for _, i := range bySeq {
			sk := seqKey(chunk[i].Seq)
			it.Seek(sk)
			if !it.Valid() || !bytes.Equal(it.Item().Key(), sk) {
				return corruptf(p.s.dir, "record %s points to index entry %d, which is missing", keyName(recordKey(chunk[i].ID)), chunk[i].Seq)
			}
			from := len(buf)
			if err := it.Item().Value(func(v []byte) error { buf = append(buf, v...); return nil }); err != nil {
				return ioErr(p.s.dir, "read a page", err)
			}
			spans[i] = [2]int{from, len(buf)}
		}
		for i, item := range chunk {
			e, err := p.decode(buf[spans[i][0]:spans[i][1]], item)
			if err != nil {
				return err
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// value calls fn with the value of key in the page's snapshot; a missing
// key is damage, described by missing with the key's name.
func (p *Page) value(key []byte, missing string, fn func([]byte) error) error {
	item, err := p.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return corruptf(p.s.dir, missing, keyName(key))
	}
	if err != nil {
		return ioErr(p.s.dir, "read a page", err)
	}
	return item.Value(fn)
}

// decode decodes the record of a page's item and checks that it is the
// book the index names.
func (p *Page) decode(v []byte, item PageItem) (crdt.Entry, error) {
	e, err := crdt.Decode(v)
	if err != nil {
		return e, corruptf(p.s.dir, "record under key %s does not decode: %v", keyName(seqKey(item.Seq)), err)
	}
	if !bytes.Equal(e.AppendID(nil), item.ID) {
		return e, corruptf(p.s.dir, "index entry %s holds another record than %s", keyName(seqKey(item.Seq)), keyName(recordKey(item.ID)))
	}
	return e, nil
}
