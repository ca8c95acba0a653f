package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4/table"
	"golang.org/x/sys/unix"

	"github.com/danyue/danyue/internal/resident"
)

// mappedFileBytes is the process's resident pages that map files (statm's
// "shared": file and shared-memory pages), which is where badger's tables
// show.
func mappedFileBytes() (int64, bool) {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// logTail is how much of the end of a memtable's log dropMappedPages
// leaves mapped.
const logTail = 64 << 10

// dropMappedPages drops this process's resident pages of the tables in
// dir, the first length bytes of each as drop says (none if 0). Those of a
// pinned table, which the caller guarantees stays mapped meanwhile, lose
// only their mapping (MADV_DONTNEED): on a shared file mapping the pages
// stay in the page cache, and the next access maps them again. Any other
// table may be unmapped and its range reused by other memory before the
// advice lands, so it gets MADV_PAGEOUT, which never discards anything: it
// writes the pages back if need be and lets the kernel reclaim them, at
// the cost of a read from disk when they are read again. Kernels before
// 5.4 do not know it (EINVAL): there those tables stay resident until they
// are pinned. Such a table may also be gone by the time its advice lands,
// a compaction having replaced it since the list was read (ENOMEM: nothing
// is mapped there, or something else is for part of the range): it has
// nothing left to drop, and the others are dropped all the same.
//
// The memtables' logs in dir are paged out as well, but for their last
// logTail: badger writes them through their maps and reads them only to
// replay them when it opens, and a memtable being flushed is no more
// pinned by an iterator than a table being written, so they too get
// MADV_PAGEOUT. A log is written from its start on, so its resident pages
// end where badger writes next, and the next write into a page that went
// out would read it back from the disk first, the writer waiting.
func dropMappedPages(dir string, drop func(id uint64, path string) (length uint64, pinned bool)) error {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		m, ok := resident.ParseMapsLine(sc.Text())
		if !ok || filepath.Dir(m.Path) != dir {
			continue
		}
		var n uint64
		pinned := false
		switch {
		case strings.HasSuffix(m.Path, ".mem"):
			end, err := resident.ResidentEnd(m)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(m.Path), err))
				continue
			}
			n = end - min(end, logTail)
		case strings.HasSuffix(m.Path, ".sst"):
			id, ok := table.ParseFileID(m.Path)
			if !ok {
				continue
			}
			n, pinned = drop(id, m.Path)
		default:
			continue
		}
		if n == 0 {
			continue
		}
		start, end := m.Start, m.Start+min(n, m.End-m.Start)
		advice := unix.MADV_PAGEOUT
		if pinned {
			advice = unix.MADV_DONTNEED
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), uintptr(advice))
		if errno != 0 && (pinned || errno != unix.EINVAL && errno != unix.ENOMEM) {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(m.Path), errno))
		}
	}
	return errors.Join(append(errs, sc.Err())...)
}
