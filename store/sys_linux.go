package store

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// datasync is fdatasync (Linux and Android): the data and the metadata
// needed to read it back (the size), not the timestamps; the kernel also
// flushes the disk's write cache.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

func diskAvail(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// pageOutMapped asks the kernel to reclaim the pages of dir's files whose
// names end in suffix that are mapped into this process (badger maps every
// table), so that they leave its resident set. MADV_PAGEOUT keeps the data
// (dirty pages are written back first, and the next read faults them in
// again), so a mapping that went away between reading the map and the call,
// its addresses perhaps reused by another mapping, is never harmed: at
// worst those pages are paged out too. Kernels before 5.4 refuse the advice
// (EINVAL); their tables stay resident, as before.
func pageOutMapped(dir, suffix string) error {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	for line := range strings.Lines(string(maps)) {
		fields := strings.Fields(line)
		if len(fields) < 6 {
			continue
		}
		// A table deleted by a compaction stays mapped while an iterator
		// still reads it.
		path := strings.TrimSuffix(strings.Join(fields[5:], " "), " (deleted)")
		if !strings.HasPrefix(path, prefix) || !strings.HasSuffix(path, suffix) {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); e != 0 && e != unix.ENOMEM {
			return e // ENOMEM: unmapped meanwhile
		}
	}
	return nil
}
