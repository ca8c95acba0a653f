package store

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// SchemaVersion is the version of the key layout this build reads and
// writes. A store with a larger version is refused (ErrNewerSchema), never
// reset. Version 2 added the book indexes (index.go), which Open builds
// for a version 1 store.
const SchemaVersion = 2

// loadMeta reads the schema version, epoch, clock high-water mark and last
// sequence number, or initializes an empty database as a new store.
func (s *Store) loadMeta(db *badger.DB) error {
	var (
		schema []byte
		empty  bool
	)
	err := db.View(func(txn *badger.Txn) error {
		v, err := getValue(txn, keySchema)
		if err != nil || v != nil {
			schema = v
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		it.Rewind()
		empty = !it.Valid()
		return nil
	})
	if err != nil {
		return ioErr(s.dir, "read the schema version", err)
	}
	switch {
	case schema == nil && empty:
		return s.create(db)
	case schema == nil:
		return corruptf(s.dir, "the database holds data but no schema version, so it is not a danyue store")
	case len(schema) != 4:
		return corruptf(s.dir, "schema version of %d bytes", len(schema))
	}
	switch v := binary.BigEndian.Uint32(schema); {
	case v > SchemaVersion:
		return fmt.Errorf("%w: %s was written by a newer danyue (store schema %d; this build reads up to %d); upgrade danyue, or move the directory away to start over",
			ErrNewerSchema, s.dir, v, SchemaVersion)
	case v == 0:
		return corruptf(s.dir, "schema version 0")
	}
	return db.View(func(txn *badger.Txn) error {
		v, err := getValue(txn, keyEpoch)
		if err != nil {
			return ioErr(s.dir, "read the epoch", err)
		}
		if s.epoch, _ = parseU64(v); s.epoch == 0 {
			return corruptf(s.dir, "missing or malformed epoch (key %s)", keyName(keyEpoch))
		}
		if v, err = getValue(txn, keyHW); err != nil {
			return ioErr(s.dir, "read the clock high-water mark", err)
		}
		if v != nil {
			hw, ok := parseTimestamp(v)
			if !ok {
				return corruptf(s.dir, "malformed clock high-water mark (key %s)", keyName(keyHW))
			}
			s.hw = hw
		}
		if s.lastSeq, err = s.lastSeqIn(txn); err != nil {
			return err
		}
		return s.loadDelivered(txn, s.lastSeq)
	})
}

// create initializes an empty database: schema version and a new random
// epoch, synced before Open returns.
func (s *Store) create(db *badger.DB) error {
	epoch, err := newEpoch(0)
	if err != nil {
		return fmt.Errorf("create store %s: %w", s.dir, err)
	}
	s.epoch = epoch
	err = db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion)); err != nil {
			return err
		}
		if err := txn.Set(keyDelivered, u64(0)); err != nil {
			return err
		}
		return txn.Set(keyEpoch, u64(s.epoch))
	})
	if err == nil {
		err = s.syncWAL(db)
	}
	if err != nil {
		return ioErr(s.dir, "create the store", err)
	}
	s.delivered.reset(0, true)
	s.log.Info("created a new store", "dir", s.dir, "epoch", s.epoch)
	return nil
}

// lastSeqIn returns the largest sequence number in the index: every change
// keeps its index entry until a later change of the same record, so the
// newest entry is always the last change.
func (s *Store) lastSeqIn(txn *badger.Txn) (uint64, error) {
	it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte{pSeq}})
	defer it.Close()
	it.Seek(seqKey(^uint64(0)))
	if !it.Valid() {
		return 0, nil
	}
	k := it.Item().Key()
	seq, ok := parseU64(k[1:])
	if !ok {
		return 0, corruptf(s.dir, "malformed index key %s", keyName(k))
	}
	return seq, nil
}

// getValue returns a copy of key's value, or nil if it is absent.
func getValue(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v, err := item.ValueCopy(nil)
	if v == nil && err == nil {
		v = []byte{}
	}
	return v, err
}

// newEpoch returns a random epoch, never zero (no epoch) nor old.
func newEpoch(old uint64) (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		if e := binary.BigEndian.Uint64(b[:]); e != 0 && e != old {
			return e, nil
		}
	}
}
