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
	return executablePages(true)
}

// Executable returns how many bytes of this process's executable (code
// and read-only data) are resident in its mappings: what DropExecutable
// would drop.
func Executable() (int64, error) {
	return executablePages(false)
}

func executablePages(drop bool) (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("find the executable: %w", err)
	}
	return filePages(exe, drop)
}

// filePages returns the bytes of the resident pages of this process's
// private read-only mappings of path (as /proc/self/maps names it), and
// drops them if drop is set. Such a mapping may also hold pages the
// process wrote before it became read-only (the relocations a dynamic
// loader applies to a position-independent executable) or that a debugger
// or a uprobe wrote into it (breakpoints): dropping one of those would put
// the file's bytes back in its place, so a mapping holding any is left
// alone, and not counted.
func filePages(path string, drop bool) (int64, error) {
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
		if !fileOnly || resident == 0 {
			continue
		}
		if !drop {
			total += resident
			continue
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.Start), uintptr(m.End-m.Start), unix.MADV_DONTNEED)
		if errno != 0 {
			errs = append(errs, fmt.Errorf("drop %x-%x of %s: %w", m.Start, m.End, path, errno))
			continue
		}
		total += resident
	}
	return total, errors.Join(errs...)
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
// order, until fn returns false.
func eachPage(pagemap *os.File, m Mapping, fn func(i, entry uint64) bool) error {
	page := uint64(os.Getpagesize())
	first, n := m.Start/page, (m.End-m.Start)/page
	buf := make([]byte, 8*min(n, 4096))
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
