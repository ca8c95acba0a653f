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
// badger is tuned for a background process through its options alone
// (options.go, which states each trade-off): small memtables, every value in
// the LSM tree, no caches, no compression, small tables and leveled
// compaction with small levels, so that no compaction touches more than a
// few tens of MB however large the store, and none rewrites the whole tree.
//
// What a flood of writes costs is bounded three ways:
//
//   - Stalls. When compaction falls behind (level 0 at twice its
//     threshold), the writer waits before it commits (Store.acquireWrite)
//     rather than fill memtables badger cannot flush, which slows the sync
//     stream, and through its acknowledgements the sender, to what
//     compaction sustains.
//   - Reads. Reads share a read transaction the writer opens right after
//     each commit (snapshot.go), so a GET waits for no commit in progress;
//     Since reads the one of the last acknowledged group, so that what it
//     lists up to LastSeq is the state LastSeq published.
//   - Memory. What the store holds is badger's: memtable arenas and table
//     builders in the Go heap, hence the small memtables and tables. Table
//     pages are mapped from their files and belong to the page cache, which
//     the kernel reclaims before anything else. The store sets no
//     process-wide policy: the collector lets garbage grow to the size of
//     the live heap again unless the process sets a memory limit
//     (runtime/debug.SetMemoryLimit), which the daemon's command does and an
//     embedding app may (package mobile's Config.MemoryLimit).
//
// # Wakeups
//
// badger's compactors each wake every 50 ms while the database is open,
// busy or not, so they run only through a burst of writes: the database
// opens without them, the writer reopens it with them when a memtable
// flush reaches level 0, and a settle check closes it once the burst is
// over and they have caught up (compact.go). badger keeps other timers
// while open (a 2-second allocator pool ticker, two 1-minute tickers) that
// no option removes, so after Options.IdleClose with nothing to do the
// store closes the database, keeping its directory lock and what it
// answers from memory, and reopens it on the next call: an idle daemon has
// no timers from the store at all.
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
