package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// Store is a device's durable library state. It is safe for concurrent use.
//
// Lock order. The seven mutexes below guard separate concerns and are held
// briefly; only one nesting exists: smu (the syncer) may take qmu (to read
// failed) and then stateMu (publish). Nothing takes smu while holding
// another, and mu, secMu, walMu and jmu are never held while taking any
// other lock (Close and updateSecrets release qmu before taking mu
// or secMu). Keep it so: a new nesting must be added here, in this order.
type Store struct {
	dir   string // the data directory, absolute
	dbDir string // badger's directory inside it
	opt   Options
	log   *slog.Logger
	lock  *os.File // locked (lockFile) for the Store's lifetime, across idle closes
	epoch uint64
	// delivered holds the delivered marks (delivered.go).
	delivered deliveredMarks

	// What the store serves from memory: the last durable sequence number,
	// the clock high-water mark, and the channel Watch hands out.
	stateMu sync.Mutex
	lastSeq uint64
	hw      crdt.Timestamp
	watch   chan struct{}
	loss    *Loss // the last loss of acknowledged changes found at open

	// The acknowledged journal (acked.go), its writes under jmu.
	jmu     sync.Mutex
	journal *ackJournal

	secMu   sync.Mutex
	secrets secrets

	// The database handle, opened on demand and closed when idle (handle.go).
	mu         sync.Mutex
	idle       *sync.Cond // signalled when users drops to 0, and when reopening ends
	db         *badger.DB
	users      int
	compactors bool        // db runs badger's compactors (compact.go)
	reopening  bool        // the writer waits to reopen db; acquire waits for it
	settle     *time.Timer // while db runs compactors (compact.go)
	settledAt  int64       // written at the last settle check
	timer      *time.Timer
	closed     bool
	opens      int                 // badger opens so far, for tests
	verified   map[tableCheck]bool // tables checked before badger opened them (damage.go)
	damage     error               // ErrCorrupt from a reopen; every later use fails with it (handle.go)
	deferredAt time.Time           // when settleCheck first put off closing for the compactors (compact.go)
	snaps      snapshots           // the read snapshot of the open handle (snapshot.go)

	// The write queue and the writer goroutine (commit.go).
	qmu        sync.Mutex
	queue      []*request
	closing    bool
	wake       chan struct{}
	writerDone chan struct{}
	failed     error  // set when a commit or sync failed; under qmu
	wseq       uint64 // the writer's last sequence number, ahead of lastSeq
	whw        crdt.Timestamp
	// wresidues: the database may hold a residue (purge.go). Until a purge
	// keeps one, a record the store has never seen costs no second read.
	wresidues bool

	// Committed groups waiting for a sync (sync.go).
	smu      sync.Mutex
	pending  []*group // in commit order
	groups   uint64   // groups committed so far; the last group's id
	covered  uint64   // the last group a started sync covers
	durable  uint64   // the last group a finished sync covers
	inflight int      // syncs running
	syncWG   sync.WaitGroup
	walMu    sync.Mutex
	lastMem  string // the newest memtable WAL a sync has seen

	syncs, synced atomic.Int64 // syncs started, batches made durable
	written       atomic.Int64 // bytes of keys and values committed so far
}

// Open opens the store in dir, creating dir (private to this user) and a
// new store, with a new random epoch, if it holds none. It fails with
// ErrLocked if another Store (in this or another process) has dir open,
// ErrNewerSchema if a newer danyue wrote it, and ErrCorrupt if what it
// holds cannot be read.
func Open(ctx context.Context, dir string, opt Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	s := &Store{
		dir:        abs,
		dbDir:      filepath.Join(abs, "db"),
		opt:        opt,
		log:        opt.Logger,
		watch:      make(chan struct{}),
		wake:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
	}
	s.idle = sync.NewCond(&s.mu)
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	if err := s.lockDir(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.lock.Close()
		}
	}()
	if s.secrets, err = readSecrets(s.dir, s.log); err != nil {
		return nil, err
	}
	start := time.Now()
	db, compactors, err := s.openPrepared()
	if err != nil {
		return nil, err
	}
	s.log.Debug("store opened", "dir", s.dir, "epoch", s.epoch, "last_seq", s.lastSeq, "took", time.Since(start))
	s.db, s.compactors, s.opens, ok = db, compactors, 1, true
	s.snaps.opened(db, s.lastSeq)
	s.wseq, s.whw = s.lastSeq, s.hw
	go s.writer()
	s.mu.Lock()
	if compactors {
		s.armSettleLocked()
	}
	s.armIdleLocked()
	s.mu.Unlock()
	return s, nil
}

// openPrepared opens the database and brings it up to date: its meta
// records, the acknowledged journal, the book indexes and the deleted
// count. It opens it without compactors (compact.go) unless the book
// indexes are to be built, a burst of writes that would fill level 0.
func (s *Store) openPrepared() (db *badger.DB, compactors bool, err error) {
	if db, err = s.openDB(false); err != nil {
		return nil, false, err
	}
	fail := func(err error) (*badger.DB, bool, error) {
		s.closeDB(db)
		return nil, false, err
	}
	if err := s.loadMeta(db); err != nil {
		return fail(err)
	}
	if err := s.checkAcked(db); err != nil {
		return fail(err)
	}
	stale, err := s.indexStale(db)
	if err != nil {
		return fail(err)
	}
	if stale {
		if err := s.closeDB(db); err != nil {
			return nil, false, ioErr(s.dir, "close the database to build the book index", err)
		}
		if db, err = s.openDB(true); err != nil {
			return nil, false, err
		}
		if err := s.buildIndex(db); err != nil {
			return fail(err)
		}
	}
	if err := s.ensureDeletedCount(db); err != nil {
		return fail(ioErr(s.dir, "count the deleted books", err))
	}
	if s.wresidues, err = holdsResidues(db); err != nil {
		return fail(ioErr(s.dir, "look for residues", err))
	}
	return db, stale, nil
}

// ensureDir creates the data directory, or tightens an existing one so that
// only this user can reach it (MakePrivateDir): it holds the device's
// secrets.
func (s *Store) ensureDir() error {
	if fi, err := os.Stat(s.dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("open store %s: not a directory; pass a directory for the data", s.dir)
	}
	tightened, err := MakePrivateDir(s.dir)
	if err != nil {
		return ioErr(s.dir, "create the data directory, private to this user", err)
	}
	if tightened {
		s.log.Warn("data directory was readable by others; made it private", "dir", s.dir)
	}
	return nil
}

// lockDir takes the store's own lock, held across idle closes of the
// database (badger's own lock is released when it closes).
func (s *Store) lockDir() error {
	f, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return ioErr(s.dir, "open the lock file", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errLockHeld) {
			return lockedErr(s.dir)
		}
		return ioErr(s.dir, "lock the data directory", err)
	}
	s.lock = f
	return nil
}

// openDB opens badger, with its compactors if compactors is set
// (compact.go), mapping its errors to the store's.
func (s *Store) openDB(compactors bool) (db *badger.DB, err error) {
	// badger (and the mmap files of ristretto under it) creates its files
	// 0666 less the umask and has no option for the mode; chmod after it
	// made them would leave a window and miss the files it makes later. So
	// the directory is what keeps other users out: 0700, tightened if an
	// older build or a restored backup left it open.
	if _, err := MakePrivateDir(s.dbDir); err != nil {
		return nil, ioErr(s.dir, "create the database directory", err)
	}
	if err := s.checkFiles(); err != nil {
		return nil, err
	}
	defer func() {
		if v := recover(); v != nil { // badger parsing a damaged file
			db, err = nil, corruptf(s.dir, "opening the database failed: %v", v)
		}
	}()
	opt := s.opt.badger(s.dbDir)
	if compactors {
		opt.NumCompactors = numCompactors
	}
	db, err = badger.Open(opt)
	switch {
	case err == nil:
		return db, nil
	case isLockErr(err):
		return nil, lockedErr(s.dir)
	case isDiskFull(err):
		return nil, diskFullErr(s.dir, err)
	case isChecksumErr(err): // a table damaged since it was verified
		return nil, corruptf(s.dir, "opening the database failed: %v", err)
	}
	return nil, fmt.Errorf("open store %s: %w; if this persists, %s", s.dir, err, damaged(s.dir))
}

// Close waits for queued writes and running reads, then closes the
// database and releases the directory. Calls after the first return nil.
func (s *Store) Close() error {
	s.qmu.Lock()
	if s.closing {
		s.qmu.Unlock()
		return nil
	}
	s.closing = true
	s.qmu.Unlock()
	s.signalWriter()
	<-s.writerDone
	s.syncWG.Wait() // every committed group is acknowledged

	s.mu.Lock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.settle != nil {
		s.settle.Stop()
	}
	for s.users > 0 {
		s.idle.Wait()
	}
	db := s.db
	s.db = nil
	s.snaps.drop()
	s.mu.Unlock()

	var err error
	if db != nil {
		if cerr := s.closeDB(db); cerr != nil {
			err = ioErr(s.dir, "close", cerr)
		}
	}
	s.stateMu.Lock()
	close(s.watch)
	s.stateMu.Unlock()
	if s.journal != nil {
		if cerr := s.journal.close(); cerr != nil && err == nil {
			err = ioErr(s.dir, "close "+ackedFile, cerr)
		}
	}
	if cerr := s.lock.Close(); cerr != nil && err == nil {
		err = ioErr(s.dir, "release the lock", cerr)
	}
	return err
}

// Dir returns the store's data directory.
func (s *Store) Dir() string { return s.dir }

// Epoch returns the random id made when the store was created. A wiped
// store has a new one, which voids every peer's cursor into it.
func (s *Store) Epoch() uint64 { return s.epoch }

// LastSeq returns the latest durable local change sequence number, 0 for
// an empty store.
func (s *Store) LastSeq() uint64 {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.lastSeq
}

// ClockHighWater returns the largest MaxTimestamp of every entry ever
// applied, so that the device's clock never goes back across restarts.
func (s *Store) ClockHighWater() crdt.Timestamp {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.hw
}

// Watch returns the current LastSeq and a channel that is closed when a
// later change is durable (or the store closes), so that a sync sender can
// wait for changes instead of polling.
func (s *Store) Watch() (last uint64, changed <-chan struct{}) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.lastSeq, s.watch
}

// publish makes a committed and synced group visible to LastSeq, Watch and
// Since.
func (s *Store) publish(seq uint64, hw crdt.Timestamp) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if hw.After(s.hw) {
		s.hw = hw
	}
	if seq > s.lastSeq {
		s.lastSeq = seq
		close(s.watch)
		s.watch = make(chan struct{})
	}
}
