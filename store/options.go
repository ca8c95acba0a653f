package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Options configures a Store. The zero value is right for a daemon on a
// phone; every field is optional.
type Options struct {
	// Logger receives the store's own messages and badger's, badger's info
	// and debug lines at debug level. Nil discards them.
	Logger *slog.Logger

	// IdleClose is how long the store stays open with nothing to do before
	// it closes the database (keeping its lock and everything it serves from
	// memory) so that an idle daemon has no timers at all; the next call
	// reopens it. Zero means DefaultIdleClose; a negative value keeps the
	// database open until Close.
	IdleClose time.Duration

	// DedupTTL is how long a Batch.Dedup key is remembered. Zero means
	// DefaultDedupTTL.
	DedupTTL time.Duration

	// MinFreeBytes is the free space below which Apply refuses to write
	// (ErrDiskFull) instead of letting the database fail mid-write. Zero
	// means DefaultMinFreeBytes; a negative value disables the check.
	MinFreeBytes int64

	// Unexported knobs for tests.
	l0Compact int                 // L0 tables that trigger a compaction; 0: defaultL0Compact
	freeSpace func(string) uint64 // free bytes on the device of a directory; nil: the OS's (sys.go)
	syncErr   func() error        // if set, called before every sync; an error fails it
}

const (
	// DefaultIdleClose is the idle time after which the database is closed.
	DefaultIdleClose = time.Minute
	// DefaultDedupTTL is how long an idempotency key is remembered.
	DefaultDedupTTL = 48 * time.Hour
	// DefaultMinFreeBytes leaves room for a memtable flush and a compaction
	// of a library of a few hundred thousand books.
	DefaultMinFreeBytes = 64 << 20

	defaultL0Compact = 10
)

// Badger tuning for a small background process. Records are a few hundred
// bytes and a library of 100,000 books is about 25 MB, so:
//
//   - 4 MB memtables, NumMemtables 1: besides the memtable being written
//     and the one its single flusher is writing out, badger queues up to
//     NumMemtables full ones, so a burst holds up to three arenas of 5.2 MB,
//     each a fresh allocation in the Go heap; badger's default of five
//     64 MB ones would dominate the footprint. With two queued, a device
//     joining 100,000 books from two others peaked at 41.6-42.8 MB instead
//     of 39.7-40.9 and bulk writes at 37.6-44.9 MB instead of 37.2-39.4
//     (TestMeasureScale, four alternating runs each); what two bought was
//     speed: joins of 2.6-2.7 s in three of the four runs against 3.0-3.5,
//     and a flood of a million records going in at 16,100 records a
//     second instead of 14,500 (testnet/cmd/flood, one run each, peaking
//     at 96 MB instead of 88). None queued (0) makes the queue an
//     unbuffered channel, which badger's writer only tries once each time
//     the flusher wakes it, so it could wait for ever.
//   - every value stays in the LSM tree (ValueThreshold above the largest
//     record, crdt.MaxEncodedSize); the value log stays empty, needs no GC and
//     its files are small.
//   - no compression, no block or index cache: blocks are read straight from
//     the memory-mapped tables, which the page cache already caches, and each
//     ristretto cache would add a goroutine waking every 2.5 s.
//   - 512 KB tables on every level (TableSizeMultiplier 1): each of the
//     two compactors keeps up to a dozen tables in flight while they are
//     written out, each in a buffer of twice the table size, so badger's
//     growing sizes (8 MB tables on the last level of a store of a million
//     records) put 100 MB in builders alone. 1 MB tables, for half the
//     files (a store of a million records has about 550 tables, each an
//     open file), put 40 MB more in the heap during a flood while badger
//     pooled its builders; without the pool a flood peaked
//     no higher with them (79-81 MB against 82-89, testnet/cmd/flood), but
//     a restart at 100,000 books peaked at 61 and 44 MB against 28-33
//     (TestMeasurePhases, two runs; the first mapped 19 MB of tables).
//     Smaller tables gain
//     nothing: badger allocates a 3 MB buffer for the index of every table
//     it writes, whatever its size, which is a third of all the daemon
//     allocates during a flood at 512 KB (2.3 GB of 7.2 GB for 400,000
//     records), and 256 KB tables measured no lower.
//   - badger's own leveled compaction, with its minimum of two compactor
//     goroutines, and small levels: a base level of 4 MB and each level 5
//     times the one above. A compaction of level 0 merges every level-0
//     table with the whole base level (book keys are hashes, so every table
//     spans the whole key range), and a compaction below it one table with
//     the 5 or 6 it overlaps below; so no compaction touches more than a
//     few tens of MB, whatever the size of the store, and each byte is
//     rewritten about as often as with badger's defaults. (Compacting the
//     whole tree into one level whenever level 0 filled up, as the store
//     did before, rewrote the whole store every 20 MB written: a flood of a
//     million records slowed down as the store grew and every read stalled
//     behind it.) The compactors tick every 50 ms, but only while the
//     database is open: the idle close stops them.
//   - level 0 compacted when it holds 10 tables (defaultL0Compact), not
//     badger's 5: each compaction of it merges twice as many flushed
//     memtables into the base level, so the base level is rewritten, and
//     its builders held, half as often. A device joining 100,000 books
//     from one other peaked at 36.9-39.5 MB (17 runs) instead of 35.3-41.6
//     (17 runs, 3 of them above 40), in a median of 2.8 s instead of 3.1
//     (36.6-39.3 against 37.1-46.5, 13 and 23 runs, in a build that
//     sampled its memory). Bulk API writes (35.0-36.2 MB against
//     35.4-36.0) and 64 reader apps (4,790-6,747 operations a second, p99
//     30-44 ms, against 4,671-6,528 and 29-45 ms) measured the same. A
//     million books joined at 60.1-74.3 MB against 58.6-77.5 (five runs
//     each), in 60-65 s against 63-69. A flood of a million records
//     (testnet/cmd/flood) went in at 19,200 records a second instead of
//     15,600 and peaked at 86-89 MB instead of 74-77 (two runs each), its
//     larger level-0 compactions holding more builders at once. All
//     alternating the builds on a 2-core machine. A point read consults
//     the bloom filters of up to 10 more tables, and an iterator seeks in
//     them.
//   - level 0 compacted into the base level on close (CompactL0OnClose),
//     which flushes the memtable first: deleted keys and the versions they
//     shadow are dropped when nothing lies below, so the space a purge
//     (purge.go) frees is on disk again after the next close (the idle
//     close or a shutdown) rather than whenever level 0 next fills up,
//     which a small library may take months to do. It is bounded like any
//     level-0 compaction: closeIdle waits until level 0 is not full.
//   - no conflict detection: one goroutine writes.
//   - no metrics.
//   - block checksums verified on every read (OnBlockRead), so a damaged
//     block fails a point read instead of returning garbage. Not at open
//     (OnTableRead, OnTableAndBlockRead): in v4.9.6 Table.VerifyChecksum
//     dereferences a nil block when a block fails to read, crashing the
//     process in a badger goroutine. Iterators end or skip silently on a
//     damaged block, so full scans check the end of their key range and
//     the record counts (checkEnd, checkCount), and every record read is
//     decoded and validated.
const (
	memTableSize        = 4 << 20
	numMemtables        = 1
	valueThreshold      = 128 << 10
	valueLogFileSize    = 1 << 20
	baseTableSize       = 512 << 10
	levelZeroStall      = 20
	numCompactors       = 2
	baseLevelSize       = 4 << 20
	levelSizeMultiplier = 5
)

// Admission of group commits (Store.acquireWrite): a group waits while
// level 0 holds twice the tables that start its compaction (as many as
// make badger stall the flushes that would add more), polling every admitPoll for
// at most admitWait, after which it goes ahead and badger's own stall
// rules.
const (
	admitPoll = 5 * time.Millisecond
	admitWait = 2 * time.Second
)

func (o Options) admitL0() int { return 2 * o.l0Compact }

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.IdleClose == 0 {
		o.IdleClose = DefaultIdleClose
	}
	if o.DedupTTL <= 0 {
		o.DedupTTL = DefaultDedupTTL
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
	if o.l0Compact <= 0 {
		o.l0Compact = defaultL0Compact
	}
	if o.freeSpace == nil {
		o.freeSpace = freeSpace
	}
	return o
}

func (o Options) badger(dir string) badger.Options {
	b := badger.DefaultOptions(dir)
	b.Logger = badgerLogger{o.Logger}
	b.SyncWrites = false // Apply syncs once per group commit
	b.DetectConflicts = false
	b.MetricsEnabled = false
	b.MemTableSize = memTableSize
	b.NumMemtables = numMemtables
	b.ValueThreshold = valueThreshold
	b.ValueLogFileSize = valueLogFileSize
	b.BaseTableSize = baseTableSize
	b.TableSizeMultiplier = 1
	b.BaseLevelSize = baseLevelSize
	b.LevelSizeMultiplier = levelSizeMultiplier
	b.Compression = options.None
	b.BlockCacheSize = 0
	b.IndexCacheSize = 0
	b.NumCompactors = numCompactors
	b.NumLevelZeroTables = o.l0Compact
	b.NumLevelZeroTablesStall = max(levelZeroStall, 2*o.l0Compact)
	b.CompactL0OnClose = true
	b.NumGoroutines = 2
	b.ChecksumVerificationMode = options.OnBlockRead
	return b
}

// badgerLogger routes badger's log lines to slog: its info lines (table
// counts, replay progress, compaction steps) are debug material for a
// daemon.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) log(level slog.Level, format string, args []any) {
	if !b.l.Enabled(context.Background(), level) {
		return
	}
	b.l.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}

func (b badgerLogger) Errorf(f string, a ...any)   { b.log(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }
func (b badgerLogger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug-4, f, a) }
