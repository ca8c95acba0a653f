// Package store keeps a device's library state durably on disk (badger),
// with the local change sequence and the peer cursors that make sync
// incremental. It is generic over crdt.Entry: it looks inside records only
// through Entry.AppendID, Merge, Encode, MaxTimestamp, Clone, Validate and
// crdt.Decode, so new record kinds need no change here. The one exception is
// the book indexes (index.go), which order books by key, by the time of
// their last position and by title, so that a shelf is listed a page at a
// time (Page) however large it is.
//
// # What it keeps
//
// Every record, the local change sequence, the store epoch, the peer cursors,
// the clock high-water mark, the schema version, local daily reading
// statistics, request idempotency keys and per-kind record counts live in
// badger, under DIR/db (key layout in keys.go).
// Every change that alters a record (a local write, or a merge of a remote
// record that changed something) takes the next local sequence number in the
// same transaction; a merge that changes nothing takes none. Each record is
// stored once, under its current sequence number, and the key of its id
// points there: the index has exactly one entry per record, a change deletes
// the entry it supersedes, and "everything since N" (Since) is one range scan
// that yields each record's current state once, in sequence order, as the
// stored bytes a sync sender ships unchanged.
//
// The epoch is a random number made when the store is created; a wiped store
// has a new one, which tells peers that their cursors into it are void. A
// cursor is, for one remote device, that device's epoch and the last of its
// sequence numbers merged here; it moves in the same transaction as the
// entries it came with, only forward within an epoch.
//
// The device identity and the library secret are kept in DIR/secrets, mode
// 0600, replaced atomically: badger creates its files 0666 less the umask
// and cannot be told otherwise. DIR itself is 0700, so nothing in it is
// readable by other users either way. On Windows, where modes mean nothing,
// DIR gets a protected DACL granting only this user, SYSTEM and
// Administrators, which every file in it inherits (MakePrivateDir).
//
// # Durability
//
// When Apply returns nil, the batch is on disk: a kill -9 or a power cut
// after that loses nothing. A batch is atomic: all of its changes with its
// cursor, dedup key and statistic, or none. Writes are group-committed: one
// writer goroutine applies every batch queued so far in one transaction,
// and a sync that starts after the commit acknowledges them; several syncs
// may run at once, each covering everything committed before it started.
// LastSeq, Watch and Since advance only past synced changes, so a peer is
// never sent a change that a power cut could take back.
//
// What "synced" means is the strongest flush each platform offers for the
// badger WAL file the batch went to, and for the directory when a new WAL
// appears or the secrets file is replaced:
//
//   - Linux and Android: fdatasync of the file, fsync of the directory. The
//     kernel flushes the drive's write cache too, so an acknowledged batch
//     survives a kill -9 and a power cut.
//   - macOS and iOS: fcntl F_FULLFSYNC, which also flushes the drive's
//     cache (a plain fsync there does not, and a power cut can lose what it
//     "synced"); where the filesystem refuses it (SMB mounts), fsync, which
//     survives a kill -9 but not surely a power cut. Directories likewise.
//   - FreeBSD and the other BSDs: fsync of the file and the directory;
//     whether it reaches past the drive's cache is the filesystem's choice
//     (ZFS flushes it).
//   - Windows: FlushFileBuffers of the file, which writes the file system
//     cache and asks the drive to flush its own. Directories are not synced:
//     NTFS journals its metadata. badger writes its WAL through a memory map
//     and does not flush the mapped view itself (its msync is a no-op on
//     Windows), and Windows documents FlushViewOfFile before
//     FlushFileBuffers for mapped writes, so an acknowledged batch surely
//     survives a crash of danyue (the pages belong to the system cache), but
//     a power cut right after the acknowledgement may lose it.
//
// # Damage
//
// A damaged disk or file never loses data silently and never panics the
// process. Beside badger's WAL the store keeps DIR/acked, a preallocated
// ring of the last 16384 acknowledged changes (sequence number and record
// id, each slot with a checksum), written and synced beside the WAL in every
// group commit (acked.go). At open, if the database holds fewer changes than
// the journal says were acknowledged (badger replays a damaged or cut WAL up
// to the damage and drops the rest without a word), the store logs an error
// naming the lost records, keeps the report (Loss), starts a new epoch (so
// that every peer pulls all of it again: a record changed since the copy
// is back at an older number) while its sequence continues after the last
// acknowledged change, and forgets its cursors into its peers, so that they
// send everything again (loss.go). Before every open of the
// database it checks the files badger would otherwise parse in goroutines
// where a panic cannot be recovered: the MANIFEST, and every table it lists
// (badger's checks of footer, index and block checksums, once per table per
// process); a WAL cut to nothing is moved aside to DIR/damaged (damage.go).
// What cannot be read is refused with ErrCorrupt naming the file, and Repair
// moves the database aside so that a new one starts, keeping DIR/secrets.
//
// # Footprint
//
// badger is tuned for a background process (options.go): 4 MB memtables,
// up to three of them in memory (the one written, one queued and the one
// being flushed), every value in the LSM tree, no caches, no compression,
// 512 KB tables and badger's own leveled compaction with small levels (a
// 4 MB base, each level 5 times the one above), so that no compaction
// touches more than a few tens of MB however large the store, and none
// rewrites the whole tree.
//
// What a flood of writes costs is bounded four ways:
//
//   - Mapped tables. badger reads and writes its tables through memory
//     maps, so every page it touched would stay in the resident set: after
//     a million records, the whole 270 MB database. While the database is
//     open, a trimmer (mapped.go) drops the process's mappings of the
//     tables' data pages when they have grown by 1 MB, checked every 10 ms
//     while they grow and every 400 ms while they do not. The pages stay in
//     the page cache, so reads do not go to the disk, and each table's
//     index and bloom filter stay mapped (10 MB at a million records). On
//     Linux and Android only; elsewhere the OS has no list of a process's
//     mappings to find them.
//   - Stalls. Every badger read waits for every commit that has taken its
//     timestamp, so a commit that badger stalls (level 0 full) stalls every
//     read. The writer instead waits before it commits while level 0 is
//     twice its compaction threshold (Store.acquireWrite), which slows the
//     sync stream, and through its acknowledgements the sender, to what
//     compaction sustains.
//   - Reads. Reads share a read transaction the writer opens right after
//     each commit (snapshot.go), so a GET waits for no commit in progress.
//   - Memory. Table builders take a buffer of twice the table size each,
//     hence the small tables. The rest of the heap's peak is garbage (each
//     table a compaction writes allocates a 3 MB index buffer), which the
//     Go collector lets grow to the live heap again unless the process sets
//     a memory limit; the daemon's command does (cmd/danyue, 28 MiB), an
//     embedding app chooses its own.
//
// testnet/cmd/flood measures it: a member offering a million records, the
// daemon's peak RSS and its single-book GET latency meanwhile. On a shared
// 2-core Linux machine the peak is 106-116 MB: 53-56 MB of Go heap (mostly
// badger's table builders, their 3 MB index buffers and the memtables; the
// record provenance of peer/knowledge.go, 12 MB of it then, is 3 MB now),
// 10-20 MB of table pages and 25 MB of the program's own text; 103-106 MB
// once the program's text was 20 MB (peer/host.go); 100-109 MB at 7.8-8.1k
// records a second (118 MB the same hour before) once a trimmer pass no
// longer ended at the first table a compaction had deleted since the pass
// listed the mappings, and 106-123 MB later that day, when the machine took
// 12.8-15.9k a second. At the peak 18-48 MB of tables are still mapped,
// mostly one compaction's output: a pass then takes 200-700 ms, as the
// trimmer shares the two cores with the compactions. A build that peaked at
// 106-114 MB there peaked at 91-93 MB on an earlier day, when the machine's
// disk synced about four times faster; the likely reason is that the
// builders a compaction keeps in flight wait for their tables to sync
// (206-246 MB before the snapshot reads and the daemon's process settings;
// 435 MB before the trimmer).
// GETs take 40-42 ms at the 99th percentile and 2.1 ms at the median, and
// the flood goes at 7.8-8.6k records a second (47-50 ms, 3.7-3.9 ms and
// 4.1-4.3k paging the tables out, mapped.go). flood -control shows where a
// GET's time goes: one that reads nothing from the store took 17-29 ms at
// the 99th percentile in the same flood.
//
// While open, badger keeps timers (a 2-second allocator pool ticker, two
// 1-minute tickers and the compactors' 50 ms tickers) that no option
// removes, and the trimmer ticks too, so after Options.IdleClose with
// nothing to do and level 0 compacted, the store closes the database,
// keeping its directory lock and what it answers from memory, and reopens
// it on the next call: an idle daemon has no timers from the store at all.
//
// Once a burst of work is over (the trimmer trimmed and the mapped pages
// have not grown for 2 s since; the first seconds after an open, which
// follow the process's start-up; an idle close), the store hands back
// what the burst left the process holding (releaseMemory, mapped.go): the
// Go heap's free memory, which the runtime would otherwise return over
// minutes, and the pages of the program's own executable that the work
// mapped, most of its 23 MB of code and read-only data (internal/resident).
// An idle daemon with 10,000 books and one peer (TestMeasureIdle in
// cmd/danyue) then holds 15.1 MB instead of 29.6 MB; at 100,000 books
// (TestMeasurePhases) 15.3-19.0 MB ten seconds after a restart instead of
// 47.9-53.8 MB, 9.0-9.5 MB once the database is closed instead of
// 25.3-25.8 MB, and a device that has just joined 29.4-32.6 MB 30 s later
// instead of 63.5 MB. A flood has no pause that long, so its peak is the
// same.
//
// # Errors
//
// Errors name the data directory and say what to do. ErrLocked: another
// daemon has the directory. ErrNewerSchema: a newer danyue wrote it; it is
// never reset. ErrCorrupt: a stored value does not decode, or a full scan
// (Scan, Since from 0) finds fewer records than the store counts, which is
// how a damaged table shows (badger's iterators skip what they cannot read);
// never a panic, never a silent reset. ErrDiskFull: Apply refuses to write
// with less than Options.MinFreeBytes free, before badger could fail
// mid-write. ErrDuplicate, ErrTooBig, ErrClosed, and ErrFailed once a commit
// or sync has failed, after which the store refuses writes until it is
// reopened.
package store
