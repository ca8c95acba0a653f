package store

import (
	"reflect"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2/z"
)

// Table builders' buffers. badger writes every table (a memtable flush,
// each output of a compaction) into the buffers of an allocator it takes
// from a pool of up to eight, and puts it back, buffers and all, when the
// table is written. An allocator starts at twice the table size (1 MB) and
// grows to fit the table it builds: a memtable flush grows it to 3 MB.
// So after a burst the pool holds as many allocators as the burst ran
// builders at once, each as large as the largest table it ever built, and
// gives one back every two seconds once nobody has asked for one: 13 MB of
// a joining device's 24 MB of live heap, 16-22 MB of a flood's 29-34 MB
// (heap profiles, 100,000 books and a million-record flood). No badger
// option reaches the pool, so the store takes it out (unpoolBuilders):
// without one, badger gives each builder its own allocator and lets it go
// when the table is written, and the heap holds only the builders at work.
//
// Measured on a 2-core machine, alternating the builds within two hours:
//   - a flood of a million records (testnet/cmd/flood): peak RSS 80, 81,
//     86, 87, 88 and 95 MB without the pool, 99, 104, 104 and 152 MB with
//     it. Single-book GETs during it took 45-61 ms at the 99th percentile
//     without it (median 53) and 40-52 ms with it (median 46), as the
//     flood went in 6,700-10,200 records a second instead of 4,700-6,400:
//     the collector has less to mark and runs less often.
//   - 100,000 books (TestMeasurePhases): bulk API writes peaked at 43.2 and
//     45.9 MB without the pool, 49.9 MB with it; a joining device at 50.8
//     and 50.9 MB, 51.9 MB with it.

// unpoolBuilders takes the table builders' allocator pool out of db and
// returns it, or nil if this version of badger keeps it elsewhere (the
// test of this file fails then). The pool must stay usable until db is
// closed, since a builder that took an allocator before may return it;
// the caller releases it after closing db.
//
// The field is written while badger's goroutines may read it: each reads
// it once per table it builds, and a pointer is read or written whole, so
// a builder gets either the pool, which stays open until db is closed, or
// none, and both are valid.
func unpoolBuilders(db *badger.DB) *z.AllocatorPool {
	field := poolField(db)
	if field == nil {
		return nil
	}
	pool := *field
	*field = nil
	return pool
}

// poolField is where db keeps its table builders' allocator pool, or nil
// if this version of badger has no such field.
func poolField(db *badger.DB) **z.AllocatorPool {
	return dbField[*z.AllocatorPool](db, "allocPool")
}

// dbField is db's unexported field name, or nil if this version of badger
// has no such field of type T.
func dbField[T any](db *badger.DB, name string) *T {
	f := reflect.ValueOf(db).Elem().FieldByName(name)
	if !f.IsValid() || f.Type() != reflect.TypeFor[T]() {
		return nil
	}
	return (*T)(unsafe.Pointer(f.UnsafeAddr()))
}
