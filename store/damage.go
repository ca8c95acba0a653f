package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// Damage found before badger reads the files. badger parses its tables in
// goroutines of its own, where a damaged file panics the whole process (a
// table cut short reads past its end), and it drops or truncates some damage
// without a word: a table whose index fails its checksum is ignored, tables
// missing from the MANIFEST are deleted (all of them when the MANIFEST itself
// is missing), and an empty WAL fails with "Create a new file". So before
// every open the store looks at the files itself, on its own goroutine,
// where a panic can be recovered:
//
//   - a MANIFEST must exist if any table or WAL does, and must parse;
//   - every table the MANIFEST lists must exist and pass badger's own
//     checks (footer, index checksum, every block's checksum). Tables are
//     immutable, so each is verified once per process;
//   - a WAL or value log too short to hold its header, and a KEYREGISTRY
//     that does not read, are moved aside to DIR/damaged (a WAL's writes
//     are gone, and the acknowledged journal says which; the value log and
//     the registry hold nothing: every value is inline, nothing encrypted).
//
// Every refusal names the file and says what to do (repairAdvice).

const (
	manifestName = "MANIFEST"
	walHeader    = 20 // badger's WAL header: key id and IV
	damagedDir   = "damaged"
)

// tableCheck is what verifying one table found, keyed by name and size.
type tableCheck struct {
	name string
	size int64
}

// checkFiles runs before badger opens the database (see above).
func (s *Store) checkFiles() error {
	ents, err := os.ReadDir(s.dbDir)
	if err != nil {
		return ioErr(s.dir, "list the database directory", err)
	}
	var (
		manifest bool
		data     string // a table or WAL, if any
	)
	for _, e := range ents {
		name := e.Name()
		switch ext := filepath.Ext(name); {
		case name == manifestName:
			manifest = true
		case ext == ".sst" || (ext == ".mem" && data == ""):
			data = name // a table, if any, else a WAL
		}
		if ext := filepath.Ext(name); ext == ".mem" || ext == ".vlog" {
			if err := s.checkLog(name); err != nil {
				return err
			}
		}
	}
	if err := s.checkKeyRegistry(); err != nil {
		return err
	}
	if !manifest {
		if data != "" {
			return damagedFile(s.dir, manifestName, "is missing, and without it the tables cannot be read (%s is there)", data)
		}
		return nil // a new store
	}
	mf, err := s.readManifest()
	if err != nil {
		return err
	}
	verified := make(map[tableCheck]bool, len(mf.Tables))
	for id := range mf.Tables {
		key, err := s.checkTable(id)
		if err != nil {
			return err
		}
		verified[key] = true
	}
	s.verified = verified // only the tables of now: compactions replace them
	return nil
}

// readManifest parses badger's MANIFEST as badger would.
func (s *Store) readManifest() (mf badger.Manifest, err error) {
	f, err := os.Open(filepath.Join(s.dbDir, manifestName))
	if err != nil {
		return mf, ioErr(s.dir, "open the MANIFEST", err)
	}
	defer f.Close()
	defer func() {
		if v := recover(); v != nil {
			err = damagedFile(s.dir, manifestName, "does not parse: %s", firstLine(v))
		}
	}()
	mf, _, err = badger.ReplayManifestFile(f, 0, badger.Options{})
	if err != nil {
		return mf, damagedFile(s.dir, manifestName, "does not parse: %v", err)
	}
	return mf, nil
}

// checkTable verifies table id, unless it was verified at this size before
// in this process (tables are immutable), and returns its key in verified.
// verified is under mu, which openDB runs under (or before Open returns).
func (s *Store) checkTable(id uint64) (tableCheck, error) {
	name := table.IDToFilename(id)
	path := filepath.Join(s.dbDir, name)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Either the table was deleted, or the MANIFEST lost its last
		// changes (cut short), among them the compaction that removed the
		// table: name both files.
		return tableCheck{}, damagedFile(s.dir, name, "is missing, although the MANIFEST lists it (or %s lost the change that removed it)", filepath.Join(s.dbDir, manifestName))
	}
	if err != nil {
		return tableCheck{}, ioErr(s.dir, "look at "+name, err)
	}
	key := tableCheck{name, fi.Size()}
	if s.verified[key] {
		return key, nil
	}
	if err := verifyTable(path, id); err != nil {
		return tableCheck{}, damagedFile(s.dir, name, "%v", err)
	}
	return key, nil
}

// verifyTable runs badger's checks on a table (footer, index checksum, every
// block's checksum) on this goroutine, recovering their panics. The file is
// mapped at its current size, so a table cut short is read no further than
// its end.
func verifyTable(path string, id uint64) (err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Size() < 8 {
		return fmt.Errorf("%d bytes, too short for a table", fi.Size())
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("cut short or damaged: badger cannot parse it (%d bytes; %s)", fi.Size(), firstLine(v))
		}
		munmap(mf)
	}()
	// NoVerification: OpenTable would unmap the file itself when a block
	// fails (and not when the index does); VerifyChecksum below checks every
	// block all the same.
	t, err := table.OpenTable(mf, table.Options{ChkMode: options.NoVerification, Compression: options.None})
	if err != nil {
		return err
	}
	return t.VerifyChecksum() // not DecrRef: that would delete the file
}

// munmap releases a table mapped read-only, without badger's Close, which
// would sync it.
func munmap(mf *z.MmapFile) {
	_ = z.Munmap(mf.Data)
	_ = mf.Fd.Close()
}

// checkLog moves aside a WAL or value log too short to hold its header:
// badger refuses it ("Create a new file"), and it holds nothing. What a WAL
// held is lost; the acknowledged journal says which changes.
func (s *Store) checkLog(name string) error {
	fi, err := os.Stat(filepath.Join(s.dbDir, name))
	if err != nil {
		return ioErr(s.dir, "look at "+name, err)
	}
	if fi.Size() >= walHeader {
		return nil
	}
	return s.moveAside(name, fmt.Sprintf("a log was cut to %d bytes; the writes it held are lost", fi.Size()))
}

// checkKeyRegistry moves aside a KEYREGISTRY badger cannot read. The store
// uses no encryption, so it holds no key, and badger writes a new one.
func (s *Store) checkKeyRegistry() (err error) {
	if _, err := os.Stat(filepath.Join(s.dbDir, badger.KeyRegistryFileName)); err != nil {
		return nil // badger makes it, or says why it cannot
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s", firstLine(v))
		}
		if err != nil {
			err = s.moveAside(badger.KeyRegistryFileName, fmt.Sprintf("it does not read (%v); the store uses no encryption, so it held no key", err))
		}
	}()
	_, err = badger.OpenKeyRegistry(badger.KeyRegistryOptions{Dir: s.dbDir, ReadOnly: true})
	return err
}

// moveAside moves a damaged file of the database into DIR/damaged, logging
// why.
func (s *Store) moveAside(name, why string) error {
	path := filepath.Join(s.dbDir, name)
	aside := filepath.Join(s.dir, damagedDir, fmt.Sprintf("%s-%s", time.Now().UTC().Format("20060102T150405Z"), name))
	if err := os.MkdirAll(filepath.Dir(aside), 0o700); err != nil {
		return ioErr(s.dir, "make "+damagedDir, err)
	}
	if err := os.Rename(path, aside); err != nil {
		return ioErr(s.dir, "move "+name+" aside", err)
	}
	if err := syncDir(s.dbDir); err != nil {
		return ioErr(s.dir, "move "+name+" aside", err)
	}
	s.log.Error("store: a damaged file was moved aside", "file", path, "why", why, "moved_to", aside)
	return nil
}

// damagedFile reports a damaged file of the database, by name, with what to
// do.
func damagedFile(dir, name, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s; %s", ErrCorrupt, filepath.Join(dir, "db", name), fmt.Sprintf(format, args...), damaged(dir))
}

// firstLine renders a recovered panic value on one line, cut short.
func firstLine(v any) string {
	s := strings.TrimSpace(fmt.Sprint(v))
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
