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
	memTable  int64               // memtable size; 0: memTableSize
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

// Badger tuning for a small background process whose records are a few
// hundred bytes. What a burst of writes holds lives in the Go heap (the
// memtable arenas and the table builders: anonymous memory, what a phone
// kills a process for), while the tables are read through memory maps that
// the page cache holds and the kernel reclaims; so each choice below trades
// the heap a burst holds against how fast the burst goes in:
//
//   - Small memtables, NumMemtables 1. A burst holds the memtable being
//     written, up to NumMemtables full ones waiting for the single flusher
//     and the one it is writing out, each an arena allocated whole. Larger
//     or more memtables take a burst in with fewer flushes and fewer
//     level-0 tables and hold that much more heap for as long as it lasts;
//     badger's defaults would dominate the process. None waiting (0) is not
//     an option: the queue becomes an unbuffered channel, which badger's
//     writer tries once each time the flusher wakes it, so it could wait for
//     ever.
//   - Every value in the LSM tree (ValueThreshold above the largest record,
//     crdt.MaxEncodedSize): the value log stays empty, needs no GC and its
//     files stay small.
//   - No compression and no block or index cache: blocks are read straight
//     from the mapped tables, which the page cache already holds; a cache
//     would keep a second copy in the heap and add a goroutine that wakes
//     every few seconds.
//   - Small tables on every level (TableSizeMultiplier 1). A table is built
//     in a buffer of about twice its size and the compactors keep several
//     in flight, so badger's growing sizes on the deep levels of a large
//     store would put most of the heap in builders. Smaller tables mean more
//     files, each an open file and a mapping, and save little heap below
//     this size: badger allocates an index buffer for every table it
//     writes, whatever its size.
//   - Leveled compaction with small levels (a base level of baseLevelSize,
//     each level levelSizeMultiplier times the one above). A compaction of
//     level 0 merges every level-0 table with the base level (book keys are
//     hashes, so every table spans the whole key range), and one below it
//     merges a table with the few it overlaps below: no compaction touches
//     more than a few tens of MB however large the store, and each byte is
//     rewritten about as often as with badger's defaults. Compacting the
//     whole tree into one level (db.Flatten) whenever level 0 fills would
//     need no compactor goroutines, but it rewrites the whole store each
//     time, so a large store takes writes ever more slowly as it grows, and
//     reads stall behind it.
//   - The compactors run only through a burst (compact.go): the database
//     opens with none (NumCompactors 0) and the writer reopens it with
//     numCompactors, badger's minimum of two, once level 0 holds l0Reopen
//     tables. Each compactor wakes every 50 ms while the database is open,
//     idle or not, and no option sets the period, so running them always
//     would keep a reader's device awake for as long as the store stays open
//     after each page turn. The cost is a reopen at the start of each burst,
//     during which reads wait (the close compacts level 0 into the base
//     level first), and one after it.
//   - Level 0 compacted at defaultL0Compact tables rather than badger's 5:
//     each compaction of level 0 merges that many flushed memtables into the
//     base level, so the base level is rewritten, and its builders held,
//     less often, and larger compactions hold more builders at once; a
//     point read consults the bloom filter of every level-0 table.
//   - Level 0 compacted into the base level on close (CompactL0OnClose),
//     which flushes the memtable first: deleted keys and the versions they
//     shadow are dropped when nothing lies below, so the space a purge
//     (purge.go) frees is on disk again after the next close (the idle
//     close or a shutdown) rather than whenever level 0 next fills up,
//     which a small library may take months to do. It is bounded like any
//     level-0 compaction: a database with compactors is closed only once
//     they have caught up (closeIdle).
//   - No conflict detection: one goroutine writes. No metrics.
//   - Block checksums verified on every read (OnBlockRead), so a damaged
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
// level 0 holds admitL0 tables (twice the compaction threshold, as many as
// make badger stall the flushes that would add more), looking again every
// admitPoll, for at most admitWait, after which it goes ahead and badger's
// own stall rules. Without it a flood goes in at least as fast and holds
// more heap, the memtables badger cannot flush filling up while the
// compactors catch up. A shorter poll lets the writer on sooner and wakes
// the process more often while compaction is behind, which only a flood
// makes it.
const (
	admitPoll = 5 * time.Millisecond
	admitWait = 2 * time.Second
)

// Compactors (compact.go): the writer reopens the database with them once
// level 0 holds l0Reopen tables; every settleClose, a database with them is
// closed if the writer committed less than a quietShare of a memtable since
// the last check and they have caught up.
const (
	l0Reopen    = 1
	settleClose = 2 * time.Second
	quietShare  = 16
)

// quietBytes is what the writer commits in settleClose, at most, once a
// burst is over.
func (o Options) quietBytes() int64 { return o.memTable / quietShare }

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
	if o.memTable <= 0 {
		o.memTable = memTableSize
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
	b.MemTableSize = o.memTable
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
	b.NumCompactors = 0 // until a burst needs them (compact.go)
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
