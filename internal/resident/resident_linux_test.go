package resident

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps the file at path privately, for reading (and writing, if
// write), and unmaps it when the test ends.
func mapFile(t *testing.T, path string, write bool) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), prot, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// mappingOf is this process's mapping that starts where b does.
func mappingOf(t *testing.T, b []byte) Mapping {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	for line := range strings.Lines(string(maps)) {
		if m, ok := ParseMapsLine(strings.TrimSuffix(line, "\n")); ok && m.Start == start {
			return m
		}
	}
	t.Fatalf("no mapping starts at %x", start)
	return Mapping{}
}

func residentOf(t *testing.T, m Mapping) (int64, bool) {
	t.Helper()
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pagemap.Close()
	n, fileOnly, err := residentFilePages(pagemap, m)
	if err != nil {
		t.Fatal(err)
	}
	return n, fileOnly
}

func touch(b []byte) (sum byte) {
	for i := 0; i < len(b); i += os.Getpagesize() {
		sum += b[i]
	}
	return sum
}

// A file's clean read-only mapping loses its resident pages, which read
// the same afterwards; a mapping where the process wrote a page before it
// made it read-only keeps the bytes it wrote.
func TestDropFileKeepsWrittenPages(t *testing.T) {
	page := os.Getpagesize()
	content := bytes.Repeat([]byte("danyue"), 8*page/6+1)[:8*page]
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}

	clean := mapFile(t, path, false)
	touch(clean)
	written := mapFile(t, path, true)
	touch(written)
	written[3*page] = 'X'
	if err := unix.Mprotect(written, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	cleanMap, writtenMap := mappingOf(t, clean), mappingOf(t, written)
	if cleanMap.Perms != "r--p" || writtenMap.Perms != "r--p" {
		t.Fatalf("mappings are %s and %s, want r--p both", cleanMap.Perms, writtenMap.Perms)
	}
	if n, fileOnly := residentOf(t, cleanMap); n != int64(len(content)) || !fileOnly {
		t.Fatalf("before: clean mapping has %d resident bytes (file pages only: %v), want %d", n, fileOnly, len(content))
	}
	if _, fileOnly := residentOf(t, writtenMap); fileOnly {
		t.Fatal("before: the written mapping holds only file pages")
	}

	e, err := openMapped(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if n, err := e.Resident(); err != nil || n != int64(len(content)) {
		t.Fatalf("counted %d resident bytes (%v), want the clean mapping's %d", n, err, len(content))
	}
	if n, _ := residentOf(t, cleanMap); n != int64(len(content)) {
		t.Fatalf("counting dropped pages: %d resident bytes left of %d", n, len(content))
	}
	dropped, err := e.Drop()
	if err != nil {
		t.Fatal(err)
	}
	if dropped != int64(len(content)) {
		t.Errorf("dropped %d bytes, want the clean mapping's %d", dropped, len(content))
	}
	if n, _ := residentOf(t, cleanMap); n != 0 {
		t.Errorf("after: clean mapping has %d resident bytes, want 0", n)
	}
	if !bytes.Equal(clean, content) {
		t.Error("after: the clean mapping does not read as the file")
	}
	if written[3*page] != 'X' || !bytes.Equal(written[:3*page], content[:3*page]) {
		t.Error("after: the written mapping lost what was written to it")
	}
}

func TestDropExecutable(t *testing.T) {
	exe, err := OpenExecutable()
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	before, err := exe.Resident()
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := exe.Drop()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary ran its package inits and the testing package: some
	// of its code is resident.
	if dropped <= 0 || before <= 0 {
		t.Fatalf("dropped %d bytes of the executable, %d resident before; want some", dropped, before)
	}
	// What counting maps again (its own code, the runtime's) is a small
	// part of what the test had mapped.
	after, err := exe.Resident()
	if err != nil {
		t.Fatal(err)
	}
	if after >= before {
		t.Errorf("%d bytes of the executable resident after dropping, %d before", after, before)
	}
}

// A file made as badger makes a memtable's log (truncated to its size,
// then written through a shared map) is resident up to its last page
// written, on either side of the pages eachPage reads at a time.
func TestResidentEnd(t *testing.T) {
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const pages = 1100
	if err := f.Truncate(int64(pages * page)); err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, pages*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	if err := unix.Madvise(data, unix.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	start := uint64(uintptr(unsafe.Pointer(&data[0])))
	m := Mapping{Start: start, End: start + uint64(pages*page), Path: path}
	for _, tt := range []struct {
		write int // a page to write, or -1
		want  uint64
	}{
		{-1, 0},
		{2, uint64(3 * page)},
		{9, uint64(10 * page)},
		{4, uint64(10 * page)},
		{511, uint64(512 * page)},
		{512, uint64(513 * page)},
		{pages - 1, uint64(pages * page)},
	} {
		if tt.write >= 0 {
			data[tt.write*page] = 1
		}
		got, err := ResidentEnd(m)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("after writing page %d: resident pages end at %d, want %d", tt.write, got, tt.want)
		}
	}
}

// cachedPages is how many of b's pages (a file's mapping) are in the page
// cache, mapped or not.
func cachedPages(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+os.Getpagesize()-1)/os.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatal("mincore:", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// vmFlags is the kernel's flags of this process's mapping at start, as
// /proc/self/smaps lists them ("rd", "mr", "rr", ...).
func vmFlags(t *testing.T, start uint64) []string {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for line := range strings.Lines(string(smaps)) {
		if m, ok := ParseMapsLine(strings.TrimSuffix(line, "\n")); ok {
			in = m.Start == start
			continue
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return strings.Fields(flags)
		}
	}
	t.Fatalf("no flags for the mapping at %x", start)
	return nil
}

// Evicting a file leaves none of its pages cached, and a later fault reads
// the page it needs and no more, where it would otherwise read ahead.
func TestEvictFile(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC {
		t.Skipf("%s keeps its files in memory, which nothing evicts", dir)
	}
	page := os.Getpagesize()
	content := bytes.Repeat([]byte("evicted!"), 64*page/8)
	path := filepath.Join(dir, "file")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Written back, so that its pages are clean: the kernel evicts no
	// dirty page.
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	b := mapFile(t, path, false)
	touch(b)
	if n := cachedPages(t, b); n != 64 {
		t.Fatalf("before: %d of 64 pages cached", n)
	}
	e, err := openMapped(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	dropped, err := e.evict(path)
	if err != nil {
		t.Fatal(err)
	}
	if dropped != int64(len(content)) {
		t.Errorf("dropped %d bytes, want the mapping's %d", dropped, len(content))
	}
	if n := cachedPages(t, b); n != 0 {
		t.Errorf("after: %d of 64 pages still cached", n)
	}
	if flags := vmFlags(t, mappingOf(t, b).Start); !slices.Contains(flags, "rr") {
		t.Errorf("after: the mapping's flags are %v, without rr (MADV_RANDOM)", flags)
	}
	if b[10*page] != content[10*page] {
		t.Fatal("after: page 10 does not read as the file")
	}
	if n := cachedPages(t, b); n != 1 {
		t.Errorf("reading one page after the eviction cached %d pages, want 1", n)
	}
	if !bytes.Equal(b, content) {
		t.Error("after: the mapping does not read as the file")
	}
}
