package store

import (
	"bytes"
	"context"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// scanChunk is how many records Scan reads per round.
const scanChunk = 512

// Scan calls fn with every record of a kind, in id order, from one
// consistent snapshot. It stops at the first error, fn's or its own.
//
// Records are kept under their sequence number, so Scan reads the id keys
// of a chunk of records in id order, then their index entries in sequence
// order with one forward-seeking iterator (much cheaper than a point lookup
// each), then decodes the chunk in id order.
func (s *Store) Scan(ctx context.Context, kind crdt.Kind, fn func(crdt.Entry) error) error {
	return s.view(ctx, func(txn *badger.Txn) error {
		ids := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pRecord, byte(kind)}})
		defer ids.Close()
		index := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pSeq}})
		defer index.Close()
		c := scanner{s: s, index: index, fn: fn}
		n := 0
		var last []byte
		for ids.Rewind(); ids.Valid(); ids.Next() {
			item := ids.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return ioErr(s.dir, "scan", err)
			}
			seq, ok := parseU64(v)
			if !ok {
				return corruptf(s.dir, "malformed sequence number under key %s", keyName(item.Key()))
			}
			last = item.KeyCopy(nil)
			n++
			c.refs = append(c.refs, scanRef{key: last, seq: seq})
			if len(c.refs) == scanChunk {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := c.flush(); err != nil {
					return err
				}
			}
		}
		if err := c.flush(); err != nil {
			return err
		}
		if err := s.checkEnd(txn, []byte{pRecord, byte(kind)}, last); err != nil {
			return err
		}
		return s.checkCount(txn, n, kind)
	})
}

type scanRef struct {
	key []byte // the record key, 'r' + id
	seq uint64
}

type scanner struct {
	s     *Store
	index *badger.Iterator
	fn    func(crdt.Entry) error
	refs  []scanRef
	bySeq []int
	buf   []byte
}

// flush reads, decodes and hands over the records of the chunk.
func (c *scanner) flush() error {
	c.bySeq = c.bySeq[:0]
	for i := range c.refs {
		c.bySeq = append(c.bySeq, i)
	}
	slices.SortFunc(c.bySeq, func(a, b int) int { return cmpU64(c.refs[a].seq, c.refs[b].seq) })
	c.buf = c.buf[:0]
	spans := make([][2]int, len(c.refs))
	for _, i := range c.bySeq {
		r := &c.refs[i]
		sk := seqKey(r.seq)
		c.index.Seek(sk)
		if !c.index.Valid() || !bytes.Equal(c.index.Item().Key(), sk) {
			return corruptf(c.s.dir, "record %s points to index entry %d, which is missing", keyName(r.key), r.seq)
		}
		start := len(c.buf)
		err := c.index.Item().Value(func(v []byte) error { c.buf = append(c.buf, v...); return nil })
		if err != nil {
			return ioErr(c.s.dir, "scan", err)
		}
		spans[i] = [2]int{start, len(c.buf)}
	}
	for i := range c.refs {
		r := &c.refs[i]
		e, err := crdt.Decode(c.buf[spans[i][0]:spans[i][1]])
		if err != nil {
			return corruptf(c.s.dir, "record under key %s does not decode: %v", keyName(seqKey(r.seq)), err)
		}
		if !bytes.Equal(e.AppendID(nil), r.key[1:]) {
			return corruptf(c.s.dir, "index entry %s holds another record than %s", keyName(seqKey(r.seq)), keyName(r.key))
		}
		if err := c.fn(e); err != nil {
			return err
		}
	}
	c.refs = c.refs[:0]
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
