package store

import (
	"context"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// CountSince returns how many records have their last change after
// sequence number after: how many records Since(after) would call its
// function with, as of now. From 0 it reads the record counts; from later
// it counts the keys of the sequence index, with no values read, which
// costs a scan of that part of the index: a sync that reports its progress
// pays it once per catch-up, not per batch.
func (s *Store) CountSince(ctx context.Context, after uint64) (uint64, error) {
	if after >= s.LastSeq() {
		return 0, ctx.Err()
	}
	var n uint64
	err := s.view(ctx, func(txn *badger.Txn) error {
		if after == 0 {
			for _, kind := range crdt.Kinds() {
				v, err := getValue(txn, countKey(kind))
				if err != nil {
					return ioErr(s.dir, "read a record count", err)
				}
				c, ok := parseU64(v)
				if v != nil && !ok {
					return corruptf(s.dir, "malformed record count under key %s", keyName(countKey(kind)))
				}
				n += c
			}
			return nil
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pSeq}})
		defer it.Close()
		for it.Seek(seqKey(after + 1)); it.Valid(); it.Next() {
			if n%4096 == 4095 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			n++
		}
		return nil
	})
	return n, err
}
