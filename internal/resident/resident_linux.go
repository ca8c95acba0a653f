package resident

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenExecutable lists this process's private read-only mappings of its
// executable (its code and read-only data) and opens its pagemap, for
// Resident and Drop to use for the life of the process: the runtime never
// maps the executable again. Reading /proc/self/maps at each call was most
// of what a call cost, for the store calls them every 10 ms through a
// burst, with 600 mappings of its own at a million books: while a device
// joined a million books, counting took a median of 0.95 ms a call and
// dropping 3.3 ms; with the mappings read once, 0.21 and 0.80 ms.
func OpenExecutable() (*Executable, error) {
	exe, err := executablePath()
	if err != nil {
		return nil, err
	}
	return openMapped(exe)
}

// openMapped lists this process's private read-only mappings of path (as
// /proc/self/maps names it) and opens its pagemap.
func openMapped(path string) (*Executable, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	e := &Executable{path: path}
	for line := range strings.Lines(string(maps)) {
		m, ok := ParseMapsLine(strings.TrimSuffix(line, "\n"))
		if ok && m.Path == path && m.Perms[1] != 'w' && m.Perms[3] == 'p' {
			e.maps = append(e.maps, m)
		}
	}
	if e.pagemap, err = os.Open("/proc/self/pagemap"); err != nil {
		return nil, err
	}
	return e, nil
}

// Close closes the pagemap.
func (e *Executable) Close() error { return e.pagemap.Close() }

// Drop drops the resident pages of the executable that hold the file's own
// bytes from the process's mappings, and returns how many bytes it
// dropped. The pages stay in the page cache: the next access maps them
// again without a disk read.
func (e *Executable) Drop() (int64, error) { return e.pages(unix.MADV_DONTNEED) }

// Resident returns how many bytes of the executable are resident in the
// process's mappings: what Drop would drop.
func (e *Executable) Resident() (int64, error) { return e.pages() }

// EvictExecutable drops the executable's pages as Executable.Drop does,
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
	e, err := OpenExecutable()
	if err != nil {
		return 0, err
	}
	defer e.Close()
	// /proc/self/exe opens the file the process runs, even if it was
	// replaced or removed since.
	return e.evict("/proc/self/exe")
}

// evict gives e's mappings the advice MADV_RANDOM and drops their pages,
// then evicts the file's pages that nothing maps from the page cache (name
// opens it). The kernel evicts no page that is mapped, dirty or being
// written back: those stay cached.
func (e *Executable) evict(name string) (int64, error) {
	dropped, err := e.pages(unix.MADV_RANDOM, unix.MADV_DONTNEED)
	f, openErr := os.Open(name)
	if openErr != nil {
		return dropped, errors.Join(err, openErr)
	}
	defer f.Close()
	if advErr := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); advErr != nil {
		err = errors.Join(err, fmt.Errorf("evict %s from the page cache: %w", e.path, advErr))
	}
	return dropped, err
}

// executablePath is this process's executable as /proc/self/maps names it.
func executablePath() (string, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return "", fmt.Errorf("find the executable: %w", err)
	}
	return exe, nil
}

// pages returns the bytes of the resident pages of the executable's
// mappings, and gives each mapping each advice in turn (madvise), if any:
// MADV_DONTNEED drops its pages. Such a mapping may also hold pages the
// process wrote before it became read-only (the relocations a dynamic
// loader applies to a position-independent executable) or that a debugger
// or a uprobe wrote into it (breakpoints): dropping one of those would put
// the file's bytes back in its place, so a mapping holding any is left
// alone, and not counted.
func (e *Executable) pages(advice ...int) (int64, error) {
	var total int64
	var errs []error
	for _, m := range e.maps {
		resident, fileOnly, err := residentFilePages(e.pagemap, m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !fileOnly {
			continue
		}
		if err := advise(m, advice); err != nil {
			errs = append(errs, fmt.Errorf("%x-%x of %s: %w", m.Start, m.End, e.path, err))
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
