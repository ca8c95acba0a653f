package resident

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// DropExecutable drops the resident pages of this process's executable
// that hold the file's own bytes (code and read-only data) from the
// process's mappings, and returns how many bytes it dropped. The pages stay
// in the page cache: the next access maps them again without a disk read.
func DropExecutable() (int64, error) {
	return executablePages(unix.MADV_DONTNEED)
}

// Executable returns how many bytes of this process's executable (code
// and read-only data) are resident in its mappings: what DropExecutable
// would drop.
func Executable() (int64, error) {
	return executablePages()
}

// EvictExecutable drops the executable's pages as DropExecutable does,
// and also evicts from the page cache those that no process maps any
// more, and has the kernel read the executable page by page from then on
// (MADV_RANDOM), without reading ahead. A fault maps the cached pages
// around the one it needs (fault-around, 64 KB), so what the kernel read
// ahead when the program started (every package's init touches most of
// the executable) keeps coming back into the process's RSS with each page
// it uses; evicted, only the pages it has used since are there to come
// back. Linux 6.18 still reads the code ahead, whatever the advice: with
// the whole executable evicted, writes through the API had all 10 MB of
// its code cached again within a second, while the cached read-only data
// grew from 0.7 to 1.6 MB, page by page. The cost is a disk read for each
// page first used again, and the pages other processes of the same
// executable read (a command run from the shell) are cached as before.
func EvictExecutable() (int64, error) {
	exe, err := executablePath()
	if err != nil {
		return 0, err
	}
	// /proc/self/exe opens the file the process runs, even if it was
	// replaced or removed since.
	return evictFile(exe, "/proc/self/exe")
}

func executablePages(advice ...int) (int64, error) {
	exe, err := executablePath()
	if err != nil {
		return 0, err
	}
	return filePages(exe, advice...)
}

// executablePath is this process's executable as /proc/self/maps names it.
func executablePath() (string, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return "", fmt.Errorf("find the executable: %w", err)
	}
	return exe, nil
}

// evictFile gives this process's mappings of path (as /proc/self/maps
// names it) the advice MADV_RANDOM and drops their pages (filePages), then
// evicts the file's pages that nothing maps from the page cache (name
// opens it). The kernel evicts no page that is mapped, dirty or being
// written back: those stay cached.
func evictFile(path, name string) (int64, error) {
	dropped, err := filePages(path, unix.MADV_RANDOM, unix.MADV_DONTNEED)
	f, openErr := os.Open(name)
	if openErr != nil {
		return dropped, errors.Join(err, openErr)
	}
	defer f.Close()
	if advErr := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); advErr != nil {
		err = errors.Join(err, fmt.Errorf("evict %s from the page cache: %w", path, advErr))
	}
	return dropped, err
}

// filePages returns the bytes of the resident pages of this process's
// private read-only mappings of path (as /proc/self/maps names it), and
// gives each such mapping each advice in turn (madvise), if any:
// MADV_DONTNEED drops its pages. Such a mapping may also hold pages the
// process wrote before it became read-only (the relocations a dynamic
// loader applies to a position-independent executable) or that a debugger
// or a uprobe wrote into it (breakpoints): dropping one of those would put
// the file's bytes back in its place, so a mapping holding any is left
// alone, and not counted.
func filePages(path string, advice ...int) (int64, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, err
	}
	defer pagemap.Close()
	var total int64
	var errs []error
	for line := range strings.Lines(string(maps)) {
		m, ok := ParseMapsLine(strings.TrimSuffix(line, "\n"))
		if !ok || m.Path != path || m.Perms[1] == 'w' || m.Perms[3] != 'p' {
			continue
		}
		resident, fileOnly, err := residentFilePages(pagemap, m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !fileOnly {
			continue
		}
		if err := advise(m, advice); err != nil {
			errs = append(errs, fmt.Errorf("%x-%x of %s: %w", m.Start, m.End, path, err))
			continue
		}
		total += resident
	}
	return total, errors.Join(errs...)
}

// advise gives m each advice in turn, stopping at the first the kernel
// refuses.
func advise(m Mapping, advice []int) error {
	for _, a := range advice {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.Start), uintptr(m.End-m.Start), uintptr(a)); errno != 0 {
			return fmt.Errorf("madvise %d: %w", a, errno)
		}
	}
	return nil
}

// Bits of a /proc/PID/pagemap entry (the kernel's
// Documentation/admin-guide/mm/pagemap.rst).
const (
	pagePresent = 1 << 63
	pageSwapped = 1 << 62
	pageFile    = 1 << 61 // a page of a file (or shared memory), not the process's own copy
)

// residentFilePages reads m's pagemap entries and returns the bytes of its
// resident pages, and whether every page it holds, resident or swapped, is
// a page of its file.
func residentFilePages(pagemap *os.File, m Mapping) (resident int64, fileOnly bool, err error) {
	fileOnly = true
	err = eachPage(pagemap, m, func(_, e uint64) bool {
		switch {
		case e&(pagePresent|pageSwapped) == 0:
		case e&pageSwapped != 0 || e&pageFile == 0:
			fileOnly = false
			return false
		default:
			resident += int64(os.Getpagesize())
		}
		return true
	})
	if err != nil || !fileOnly {
		return 0, false, err
	}
	return resident, true, nil
}

// ResidentEnd returns how far into m (from m.Start) its last resident page
// ends: 0 if none is.
func ResidentEnd(m Mapping) (uint64, error) {
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, err
	}
	defer pagemap.Close()
	var end uint64
	err = eachPage(pagemap, m, func(i, e uint64) bool {
		if e&pagePresent != 0 {
			end = (i + 1) * uint64(os.Getpagesize())
		}
		return true
	})
	return end, err
}

// eachPage calls fn with the index and pagemap entry of each page of m in
// order, until fn returns false. It reads the entries 512 at a time into a
// buffer on its stack: the store's trimmer calls it for the executable's
// mappings every 10 ms through a burst of writes, and a buffer sized for a
// whole mapping (8 bytes a page: 26 KB for the read-only data) was 3% of
// all a device joining 100,000 books allocated.
func eachPage(pagemap *os.File, m Mapping, fn func(i, entry uint64) bool) error {
	page := uint64(os.Getpagesize())
	first, n := m.Start/page, (m.End-m.Start)/page
	var buf [512 * 8]byte
	for i := uint64(0); i < n; {
		k := min(n-i, uint64(len(buf)/8))
		if _, err := pagemap.ReadAt(buf[:8*k], int64(8*(first+i))); err != nil {
			return fmt.Errorf("pagemap of %x-%x: %w", m.Start, m.End, err)
		}
		for j := range k {
			if !fn(i+j, binary.NativeEndian.Uint64(buf[8*j:])) {
				return nil
			}
		}
		i += k
	}
	return nil
}
