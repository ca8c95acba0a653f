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

// dropTablePages drops this process's mappings of the resident pages of
// the tables in dir. For the tables pinned says true of, which the caller
// guarantees stay mapped meanwhile, that is MADV_DONTNEED, which on a
// shared file mapping leaves the pages in the page cache (the next access
// maps them again). Any other table (every table if pinned is nil) may be
// unmapped and its range reused by other memory before the advice lands,
// so it gets MADV_PAGEOUT, which never discards anything: it writes the
// pages back if need be and lets the kernel reclaim them, at the cost of a
// read from disk when the table is read again. Kernels before 5.4 do not
// know it (EINVAL): with pinned nil that is errNoPageout, otherwise those
// tables stay resident until pinned.
func dropTablePages(dir string, pinned func(id uint64) bool) error {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		start, end, path, ok := parseMapsLine(sc.Text())
		if !ok || filepath.Dir(path) != dir {
			continue
		}
		id, ok := table.ParseFileID(path)
		if !ok || !strings.HasSuffix(path, ".sst") {
			continue
		}
		advice := unix.MADV_PAGEOUT
		if pinned != nil && pinned(id) {
			advice = unix.MADV_DONTNEED
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), uintptr(advice))
		switch {
		case errno == 0:
		case errno == unix.EINVAL && advice == unix.MADV_PAGEOUT:
			if pinned == nil {
				return errNoPageout
			}
		default:
			return errno
		}
	}
	return sc.Err()
}

// probePages is how many pages pageoutWorks maps: twice a per-CPU batch
// of pages not yet on the kernel's LRU lists (31), which the advice skips.
const probePages = 64

// pageoutWorks says whether MADV_PAGEOUT takes file pages out of this
// process's mappings here. It tries on a file of its own in dir (created
// and unlinked at once; dir has no symbolic link in it, as the maps name
// files by their resolved path), mapped shared as badger maps its tables,
// and reads back what is resident. A kernel before 5.4 refuses the advice
// (EINVAL); qemu's user-mode emulation accepts it and ignores it (it
// passes through only MADV_DONTNEED), which only the pages still resident
// show. Any page dropped is enough: on a real kernel the advice skips only
// the pages it cannot take at that moment.
func pageoutWorks(dir string) (bool, error) {
	f, err := os.CreateTemp(dir, ".pageout-probe-*")
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return false, err
	}
	// The maps name an unlinked file by its path and this suffix.
	mapped := f.Name() + " (deleted)"
	// A page a write: one write of them all may make one large folio of
	// them, which sits in the batch of the CPU that wrote it until that
	// batch fills, and the advice drains only the batch of its own CPU.
	page := make([]byte, os.Getpagesize())
	page[0] = 1
	for range probePages {
		if _, err := f.Write(page); err != nil {
			return false, err
		}
	}
	m, err := unix.Mmap(int(f.Fd()), 0, probePages*len(page), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return false, fmt.Errorf("map the probe: %w", err)
	}
	defer unix.Munmap(m)
	n := 0
	for i := 0; i < len(m); i += len(page) {
		n += int(m[i]) // faults the page in
	}
	if n != probePages {
		return false, fmt.Errorf("the probe's mapping reads %d pages of ones, want %d", n, probePages)
	}
	is := func(path string) bool { return path == mapped }
	before, err := residentKB(is)
	if err != nil {
		return false, err
	}
	if before == 0 {
		return false, fmt.Errorf("none of the probe's %d pages shows resident after reading them", probePages)
	}
	switch err := unix.Madvise(m, unix.MADV_PAGEOUT); {
	case errors.Is(err, unix.EINVAL):
		return false, nil
	case err != nil:
		return false, err
	}
	after, err := residentKB(is)
	if err != nil {
		return false, err
	}
	return after < before, nil
}

// residentKB is the resident size of this process's mappings of the files
// whose path match says true of, from /proc/self/smaps.
func residentKB(match func(path string) bool) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var kb int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Rss:"); ok {
			if in {
				n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("smaps: %q: %w", line, err)
				}
				kb += n
			}
			continue
		}
		// A mapping's first line; the fields of one have a name ending in
		// a colon.
		if f := strings.Fields(line); len(f) >= 5 && !strings.HasSuffix(f[0], ":") {
			_, _, path, _ := parseMapsLine(line)
			in = match(path)
		}
	}
	return kb, sc.Err()
}

// parseMapsLine reads "start-end perms offset dev inode path" from a line
// of /proc/self/maps; the path is the rest of the line, spaces and all. A
// deleted file's path ends in " (deleted)", which no table's name does.
func parseMapsLine(line string) (start, end uint64, path string, ok bool) {
	var f [5]string
	rest := line
	for i := range f {
		rest = strings.TrimLeft(rest, " ")
		f[i], rest, ok = strings.Cut(rest, " ")
		if !ok {
			return 0, 0, "", false
		}
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return 0, 0, "", false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return 0, 0, "", false
	}
	path = strings.TrimLeft(rest, " ")
	return start, end, path, path != ""
}
