package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// The book indexes: the orders a shelf is listed in, kept in the same
// transaction as the records, so that a page is a range scan however large
// the shelf is. This is the one place the store looks inside a record kind:
// a book's visibility, position time and title.
//
// Every book has exactly one entry in each order, under
//
//	'o' order scope position
//
// where order is an Order, scope is 'v' for a visible book and 'd' for a
// deleted one (so that the shelf is a scan of one scope, and the shelf with
// deleted books a merge of two), and position is the book's sort key
// followed by its id. The value is empty. A change rewrites an entry only
// when its key changes: a position write moves the book in OrderRecent, a
// delete or resurrection moves it between scopes.
const pOrder = 'o'

// Order is an order of the book indexes.
type Order byte

const (
	// OrderKey orders books by id: the binary BookKey.
	OrderKey Order = 'k'
	// OrderRecent puts the latest position write first; books never
	// positioned come last.
	OrderRecent Order = 'r'
	// OrderTitle orders by the lower-cased title (its first titleSortBytes
	// bytes), then by id; untitled books come last.
	OrderTitle Order = 't'
)

var orders = [...]Order{OrderKey, OrderRecent, OrderTitle}

const (
	scopeVisible = 'v'
	scopeDeleted = 'd'
)

// titleSortBytes is how much of a lower-cased title the title order
// compares: enough to order any shelf as a person reads it, small enough
// that the worst batch of index writes fits a transaction (MaxBatchEntries).
const titleSortBytes = 64

// recentBytes is the length of a sort key of OrderRecent.
const recentBytes = 20

func orderPrefix(o Order, scope byte) []byte { return []byte{pOrder, byte(o), scope} }

// indexKey returns the key of book b (id as made by AppendID) in order o.
func indexKey(o Order, id []byte, b *crdt.Book) []byte {
	scope := byte(scopeVisible)
	if !b.Visible() {
		scope = scopeDeleted
	}
	k := orderPrefix(o, scope)
	switch o {
	case OrderRecent:
		t := b.Position.At
		k = binary.BigEndian.AppendUint64(k, ^t.Wall)
		k = binary.BigEndian.AppendUint32(k, ^t.Logical)
		k = binary.BigEndian.AppendUint64(k, ^uint64(t.Device))
	case OrderTitle:
		k = appendTitleKey(k, b.Title.Value)
	}
	return append(k, id...)
}

// appendTitleKey appends the sort key of a title: 1, the lower-cased title
// cut to titleSortBytes at a rune boundary with each NUL escaped as 0 0xff,
// and a terminating 0; or 2 for no title. The id that follows starts with
// crdt.KindBook, never 0xff, so the terminator cannot be mistaken.
func appendTitleKey(k []byte, title string) []byte {
	if title == "" {
		return append(k, 2)
	}
	f := strings.ToLower(title)
	if len(f) > titleSortBytes {
		n := titleSortBytes
		for n > 0 && !utf8.RuneStart(f[n]) {
			n--
		}
		f = f[:n]
	}
	k = append(k, 1)
	for i := 0; i < len(f); i++ {
		k = append(k, f[i])
		if f[i] == 0 {
			k = append(k, 0xff)
		}
	}
	return append(k, 0)
}

// positionID returns the id at the end of a position of order o, or nil if
// the position is malformed.
func positionID(o Order, pos []byte) []byte {
	var id []byte
	switch o {
	case OrderKey:
		id = pos
	case OrderRecent:
		if len(pos) < recentBytes {
			return nil
		}
		id = pos[recentBytes:]
	case OrderTitle:
		switch {
		case len(pos) == 0:
			return nil
		case pos[0] == 2:
			id = pos[1:]
		case pos[0] == 1:
			for i := 1; i < len(pos)-1; i++ {
				if pos[i] != 0 {
					continue
				}
				if pos[i+1] == 0xff {
					i++
					continue
				}
				id = pos[i+1:]
				break
			}
		}
	default:
		return nil
	}
	if len(id) < 2 || id[0] != byte(crdt.KindBook) {
		return nil
	}
	if _, err := crdt.BookKeyFromBinary(id[1:]); err != nil {
		return nil
	}
	return id
}

// ValidPosition reports whether pos can be a position of order o, as a
// caller that got it from outside must check before passing it to Page.
func ValidPosition(o Order, pos []byte) bool { return positionID(o, pos) != nil }

// maxWrites is the most writes records and index make for r, so that
// records sizes a batch's writes once: it follows both.
func (r *rec) maxWrites() int {
	n := 2 // the record under its new sequence number, and its pointer to it
	if r.residue {
		n++
	}
	if r.prev != nil {
		n++ // the old sequence number's delete
	}
	if r.cur.Kind == crdt.KindBook {
		n += len(orders)
		if r.prev != nil {
			n += len(orders)
		}
	}
	return n
}

// index adds the index writes of a changed record: for each order whose
// key changed, a delete of the old entry and a write of the new one. A
// stored record has the kind of its id (readRecord), so r.prev, if any, is
// a book too.
func (p *plan) index(r *rec) {
	if r.cur.Kind != crdt.KindBook {
		return
	}
	wasDeleted := r.prev != nil && !r.prev.Book.Visible()
	switch isDeleted := !r.cur.Book.Visible(); {
	case isDeleted && !wasDeleted:
		p.deletedDelta++
	case !isDeleted && wasDeleted:
		p.deletedDelta--
	}
	for _, o := range orders {
		nk := indexKey(o, r.id, &r.cur.Book)
		if r.prev != nil {
			ok := indexKey(o, r.id, &r.prev.Book)
			if bytes.Equal(ok, nk) {
				continue
			}
			p.writes = append(p.writes, write{key: ok, del: true})
		}
		p.writes = append(p.writes, write{key: nk, val: []byte{}})
	}
}

// indexSchema is the first schema version whose stores have the book
// indexes.
const indexSchema = 2

// indexStale reports whether the store was written before the book
// indexes existed (schema 1), so that buildIndex must build them before
// the store serves anything.
func (s *Store) indexStale(db *badger.DB) (bool, error) {
	var v uint32
	err := db.View(func(txn *badger.Txn) error {
		b, err := getValue(txn, keySchema)
		if len(b) == 4 {
			v = binary.BigEndian.Uint32(b)
		}
		return err
	})
	if err != nil {
		return false, ioErr(s.dir, "read the schema version", err)
	}
	return v < indexSchema, nil
}

// buildIndex builds the book indexes of a store written before they
// existed, once, and then records the new schema version. An interrupted
// build starts over at the next open.
func (s *Store) buildIndex(db *badger.DB) error {
	start := time.Now()
	if err := s.clearPartialIndex(db); err != nil {
		return err
	}
	n, err := s.writeIndex(db)
	if errors.Is(err, ErrCorrupt) {
		return err
	}
	if err == nil {
		err = db.Update(func(txn *badger.Txn) error {
			return txn.Set(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion))
		})
	}
	if err == nil {
		err = s.syncWAL(db)
	}
	if err != nil {
		return ioErr(s.dir, "build the book index", err)
	}
	s.log.Info("built the book index", "dir", s.dir, "books", n, "schema", SchemaVersion, "took", time.Since(start))
	return nil
}

// clearPartialIndex drops what an interrupted build left. DropPrefix
// rewrites every table whose key range covers the prefix, which costs
// memory and time: only a build that was interrupted needs it.
func (s *Store) clearPartialIndex(db *badger.DB) error {
	var partial bool
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pOrder}})
		defer it.Close()
		it.Rewind()
		partial = it.Valid()
		return nil
	})
	if err != nil {
		return ioErr(s.dir, "read the book index", err)
	}
	if partial {
		if err := db.DropPrefix([]byte{pOrder}); err != nil {
			return ioErr(s.dir, "clear a partial book index", err)
		}
	}
	return nil
}

// writeIndex writes the index keys of every book and returns how many
// books it indexed. It writes a chunk at a time, one transaction after the
// other: a WriteBatch commits many at once and holds them all in memory.
func (s *Store) writeIndex(db *badger.DB) (n int, err error) {
	var keys [][]byte
	flush := func() error {
		err := db.Update(func(txn *badger.Txn) error {
			for _, k := range keys {
				if err := txn.Set(k, []byte{}); err != nil {
					return err
				}
			}
			return nil
		})
		keys = keys[:0]
		return err
	}
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pSeq}, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			var e crdt.Entry
			err := item.Value(func(v []byte) (err error) { e, err = crdt.Decode(v); return err })
			if err != nil {
				return corruptf(s.dir, "record under key %s does not decode: %v", keyName(item.Key()), err)
			}
			if e.Kind != crdt.KindBook {
				continue
			}
			id := e.AppendID(nil)
			for _, o := range orders {
				keys = append(keys, indexKey(o, id, &e.Book))
			}
			if n++; len(keys) >= 3*MaxBatchEntries {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return n, err
}

// ensureDeletedCount counts the deleted books of a store written before
// the count was kept, once: a keys-only scan of the deleted scope of one
// index.
func (s *Store) ensureDeletedCount(db *badger.DB) error {
	return db.Update(func(txn *badger.Txn) error {
		v, err := getValue(txn, keyDeletedBooks)
		if err != nil || v != nil {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: orderPrefix(OrderKey, scopeDeleted)})
		defer it.Close()
		var n uint64
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return txn.Set(keyDeletedBooks, u64(n))
	})
}

// BookCounts returns how many books are on the shelf and how many are
// deleted, from the counts the store keeps: no scan.
func (s *Store) BookCounts(ctx context.Context) (visible, deleted uint64, err error) {
	err = s.view(ctx, func(txn *badger.Txn) error {
		var books uint64
		for _, c := range []struct {
			key []byte
			n   *uint64
		}{{countKey(crdt.KindBook), &books}, {keyDeletedBooks, &deleted}} {
			v, err := getValue(txn, c.key)
			if err != nil {
				return ioErr(s.dir, "read a book count", err)
			}
			n, ok := parseU64(v)
			if v != nil && !ok {
				return corruptf(s.dir, "malformed count under key %s", keyName(c.key))
			}
			*c.n = n
		}
		if deleted > books {
			return corruptf(s.dir, "%d deleted books counted of %d books", deleted, books)
		}
		visible = books - deleted
		return nil
	})
	return visible, deleted, err
}
