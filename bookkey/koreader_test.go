package bookkey

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// partialMD5 is KOReader's util.partialMD5 written out a second time, as the
// Lua does it: seek to lshift(1024, 2i) for i = -1..10, read up to 1024
// bytes, stop when the read finds nothing. The offsets come from an emulation
// of LuaJIT's 32-bit bit.lshift, not from the formula KOReaderID uses, so the
// two agree only if the quirk was understood.
func partialMD5(t *testing.T, f io.ReadSeeker) string {
	t.Helper()
	h := md5.New()
	for i := -1; i <= 10; i++ {
		if _, err := f.Seek(int64(luaLshift(1024, 2*i)), io.SeekStart); err != nil {
			t.Fatal(err)
		}
		sample := make([]byte, 1024)
		n, err := io.ReadFull(f, sample)
		if n == 0 { // Lua's file:read(1024) returns nil at end of file
			break
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			t.Fatal(err)
		}
		h.Write(sample[:n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// luaLshift is LuaJIT's bit.lshift: 32-bit operands, the count taken
// modulo 32.
func luaLshift(x int32, n int) int32 { return int32(uint32(x) << (uint(n) & 31)) }

// synthetic is a file of size bytes whose content is a formula of the
// offset, so that files past 1 GiB cost no memory or disk. Python's
// hashlib gave the pinned ids below for the same formula.
type synthetic int64

func syntheticByte(i int64) byte { return byte((i*i)>>7 ^ i) }

func (s synthetic) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(s) {
		return 0, io.EOF
	}
	n := min(int64(len(p)), int64(s)-off)
	for i := range n {
		p[i] = syntheticByte(off + i)
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

func syntheticBytes(n int) []byte {
	b := make([]byte, n)
	synthetic(n).ReadAt(b, 0)
	return b
}

func koreaderID(t *testing.T, r io.ReaderAt) string {
	t.Helper()
	id, err := KOReaderID(r)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func md5Hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

// Issue 8: the id against known values. An empty file is the MD5 of
// nothing, a file under 1 KiB the MD5 of the whole file.
func TestKOReaderIDKnownValues(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "d41d8cd98f00b204e9800998ecf8427e"},
		{"abc", []byte("abc"), "900150983cd24fb0d6963f7d28e17f72"},
		{"1000 bytes", syntheticBytes(1000), md5Hex(syntheticBytes(1000))},
		{"1023 bytes", syntheticBytes(1023), md5Hex(syntheticBytes(1023))},
		// Two samples, 0 and 1 KiB, that together are the whole file.
		{"exactly 1 KiB", syntheticBytes(1024), md5Hex(syntheticBytes(1024))},
		{"2 KiB", syntheticBytes(2048), md5Hex(syntheticBytes(2048))},
		// 4 KiB is at the end: the sample there is not taken, and 2-4 KiB
		// is never read.
		{"exactly 4 KiB", syntheticBytes(4096), md5Hex(syntheticBytes(2048))},
		{"4 KiB and 1 byte", syntheticBytes(4097), md5Hex(append(syntheticBytes(2048), syntheticByte(4096)))},
	}
	for _, tt := range tests {
		if got := koreaderID(t, bytes.NewReader(tt.in)); got != tt.want {
			t.Errorf("%s: KOReaderID = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// Every size around every sample boundary agrees with KOReader's algorithm
// as the Lua writes it: the samples stop at the end of the file.
func TestKOReaderIDAtSampleBoundaries(t *testing.T) {
	data := syntheticBytes(1<<20 + 2048)
	for i := 0; i <= 8; i++ {
		edge := 1024 << (2 * i)
		for _, size := range []int{edge - 1, edge, edge + 1, edge + 1023, edge + 1024, edge + 1025} {
			if size > len(data) {
				continue
			}
			r := bytes.NewReader(data[:size])
			if got, want := koreaderID(t, r), partialMD5(t, r); got != want {
				t.Errorf("size %d: KOReaderID = %s, KOReader's algorithm gives %s", size, got, want)
			}
		}
	}
}

// A generated multi-megabyte file on disk, read through *os.File as `danyue
// key` reads it, against the Lua transliteration and against the id
// Python's hashlib gives for the same bytes.
func TestKOReaderIDOfAFile(t *testing.T) {
	const size = 3<<20 + 333
	path := filepath.Join(t.TempDir(), "book.epub")
	if err := os.WriteFile(path, syntheticBytes(size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := koreaderID(t, f)
	if want := partialMD5(t, f); got != want {
		t.Errorf("KOReaderID = %s, KOReader's algorithm gives %s", got, want)
	}
	if want := "a3367698e7ad5fb69c1b69873086163b"; got != want {
		t.Errorf("KOReaderID = %s, hashlib gives %s", got, want)
	}
}

// Past 1 GiB the last sample, at 1 GiB, is taken; at exactly 1 GiB it is at
// the end and is not. No sample is read past 1 GiB, however large the file.
func TestKOReaderIDOfHugeFiles(t *testing.T) {
	for _, tt := range []struct {
		size int64
		want string
	}{
		{1<<30 + 700, "7300f7525df9683f7bbea9b0eff9a314"},
		{1 << 30, "0904bc84ac59881b7b6708e36fb2dc59"},
	} {
		s := synthetic(tt.size)
		got := koreaderID(t, s)
		if want := partialMD5(t, io.NewSectionReader(s, 0, tt.size)); got != want {
			t.Errorf("size %d: KOReaderID = %s, KOReader's algorithm gives %s", tt.size, got, want)
		}
		if got != tt.want {
			t.Errorf("size %d: KOReaderID = %s, hashlib gives %s", tt.size, got, tt.want)
		}
	}
	reads := &countingReader{ReaderAt: synthetic(1 << 40)}
	koreaderID(t, reads)
	if reads.n != 12 {
		t.Errorf("a 1 TiB file took %d reads, want 12 samples", reads.n)
	}
}

type countingReader struct {
	io.ReaderAt
	n int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.n++
	return c.ReaderAt.ReadAt(p, off)
}

// A read error is returned, wrapped, with no id.
func TestKOReaderIDReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	id, err := KOReaderID(failingReader{boom})
	if !errors.Is(err, boom) || id != "" {
		t.Fatalf("KOReaderID = %q, %v; want no id and the read error", id, err)
	}
}

type failingReader struct{ err error }

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off > 0 {
		return 0, f.err
	}
	return len(p), nil
}
