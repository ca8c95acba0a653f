package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentKB returns the Rss of the mapping that starts at b, from
// /proc/self/smaps.
func residentKB(t *testing.T, b []byte) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&b[0])))
	in := false
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasSuffix(f[0], ":") {
			in = strings.HasPrefix(line, start) // a mapping's header line
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no mapping at %s in /proc/self/smaps", start)
	return 0
}

// mapFile writes a file of size bytes, durably as badger writes a table,
// maps it and reads every page.
func mapFile(t *testing.T, path string, size int) []byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	sum := 0
	for i := 0; i < size; i += os.Getpagesize() {
		sum += int(b[i])
	}
	if sum != 0 {
		t.Fatal("read back what was not written")
	}
	return b
}

// The tables of the store's directory leave the process's resident set;
// its other files, and tables of other directories, stay.
func TestPageOutMapped(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	const size = 256 << 10
	table := mapFile(t, filepath.Join(dir, "000001.sst"), size)
	wal := mapFile(t, filepath.Join(dir, "00001.mem"), size)
	elsewhere := mapFile(t, filepath.Join(other, "000001.sst"), size)
	if residentKB(t, table) == 0 {
		t.Skip("a mapped file read through is not resident; nothing to tell")
	}
	if err := pageOutMapped(dir, ".sst"); err != nil {
		if err == unix.EINVAL {
			t.Skip("this kernel has no MADV_PAGEOUT")
		}
		t.Fatal(err)
	}
	if kb := residentKB(t, table); kb != 0 {
		t.Errorf("%d kB of the table still resident", kb)
	}
	if kb := residentKB(t, wal); kb == 0 {
		t.Errorf("the .mem file was paged out too")
	}
	if kb := residentKB(t, elsewhere); kb == 0 {
		t.Errorf("a table of another directory was paged out too")
	}
}
