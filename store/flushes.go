package store

import (
	"reflect"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Memtable flushes. badger writes into one memtable and, once it is full,
// queues it for its single flusher (up to NumMemtables of them, options.go)
// and starts the next, each an arena of 5.2 MB allocated whole in the Go
// heap. So a writer that fills memtables faster than the flusher writes
// them out holds three arenas at once (the one being written out, one
// queued and the new one) with the flush's table builder and its 3 MB
// index buffer on top. They are most of the live heap of a device joining
// 100,000 books: at its peak RSS, two arenas (10.4 MB), the flush's
// builder and index buffer (6 MB), the record provenance of
// peer/knowledge.go (3 MB) and 2 MB besides (heap profiles).
//
// So the writer also waits (Store.acquireWrite) while a full memtable has
// not been written out: the memtable it fills is at most the second in
// memory. Measured at 100,000 books on 2 cores, alternating the builds
// (TestMeasureScale, two holders), a joining device's peak RSS (VmHWM)
// was 38.1-42.4 MB with the wait (median 40.0, 9 of 18 runs at 40 or
// less) and 38.9-45.1 MB without (median 42.4, 2 of 9), joining as fast
// (2.3-3.1 s either way). Bulk API writes, whose memtables the flusher
// keeps up with, peaked the same (median 39.0 MB against 38.3). 64 reader
// apps lost nothing (two runs each of testnet/cmd/mixed: 7,300-8,300
// operations a second with a p99 of 23-28 ms, against 7,100-7,800 and
// 26-31 ms); a flood of a million records went in at 15,600 records a
// second instead of 17,900 (one run each), peaking at 87 MB instead of 93.

// flushQueue returns a function that reports how many full memtables of
// db wait for the flusher or are being written out, or nil if this
// version of badger keeps them elsewhere (the test of this file fails
// then). badger exports neither the count nor the lock that guards it: the
// function reads the slice of full memtables under that lock, as badger's
// writer and flusher change it, through the unexported fields.
func flushQueue(db *badger.DB) func() int {
	mu := dbField[sync.RWMutex](db, "lock")
	// A slice of badger's unexported memTable: its length is all that is read.
	imm := reflect.ValueOf(db).Elem().FieldByName("imm")
	if mu == nil || !imm.IsValid() || imm.Kind() != reflect.Slice {
		return nil
	}
	return func() int {
		mu.RLock()
		defer mu.RUnlock()
		return imm.Len()
	}
}
