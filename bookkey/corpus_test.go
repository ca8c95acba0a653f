package bookkey

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/unicode"
)

var (
	update    = flag.Bool("update", false, "rewrite testdata/corpus.golden from the keys computed now")
	genCorpus = flag.Bool("gencorpus", false, "rewrite the files of testdata/corpus from corpusSpec")
)

// corpusSpec says what each file of testdata/corpus holds. The files, not
// this list, are what the tests read: -gencorpus rewrites them, and a diff in
// a binary file then shows the change.
func corpusSpec() map[string][]byte {
	gbk := func(s string) []byte { return mustEncode(simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))) }
	gb18030 := func(s string) []byte { return mustEncode(simplifiedchinese.GB18030.NewEncoder().Bytes([]byte(s))) }
	utf16le := func(s string) []byte {
		return mustEncode(unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewEncoder().Bytes([]byte(s)))
	}
	utf16be := func(s string) []byte {
		return mustEncode(unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM).NewEncoder().Bytes([]byte(s)))
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	b := func(s string) []byte { return []byte(s) }
	const chapter = "第一章 风起\r\n\r\n　　天色渐晚，他推开门。\r\n“你来了。”她说。\r\n"
	return map[string][]byte{
		// The golden values of seed 003.
		"golden_bom_abc.txt": b("\uFEFF abc \r\n\r\n"),
		"golden_blank.txt":   b(" \r\n\t "),
		"golden_u3000.txt":   b(" \u3000正文\u3000 "),
		"golden_300_lf.txt":  b("正文" + strings.Repeat("\n", 300)),
		// Rule 2: the byte-order mark.
		"empty.txt":           nil,
		"bom_only.txt":        b("\uFEFF"),
		"bom_after_space.txt": b(" \uFEFFabc"),
		"bom_twice.txt":       b("\uFEFF\uFEFFabc\r\n"),
		"bom_broken.txt":      b("\xEF\xBB abc"),
		"bom_blank_tail.txt":  b("\uFEFF \t\r\n"),
		// Rule 3: line ends, at every offset a chunk boundary can take.
		"cr_lf_mix.txt": b("a\rb\r\nc\n\rd\r\r\ne\n\n\rf\r"),
		"cr_runs.txt":   b("\r\r\r\n\r\n正\r\r\n\r文\r\r\r"),
		// Rule 4: what is trimmed and what is not.
		"blank_inner.txt": b("第一章\r\n\r\n  \t\r\n正文 \t \n\n结尾"),
		"not_trimmed.txt": b("\f\v\x00 a\u00A0\u3000\u2003\u0085 \f"),
		"nul_bytes.txt":   b("\x00a\x00\r\n\x00 \n"),
		// UTF-16 length: surrogate pairs and incomplete ends.
		"emoji.txt":                b("😀 hi 👍🏽\r\n表情🀄\uFE0E\r\n"),
		"truncated_tail.txt":       b("正文\xE6\xAD"),
		"truncated_tail_blank.txt": b("正文\xE6\xAD \r\n"),
		"truncated_4byte.txt":      b("hi \xF0\x9F\x98"),
		"invalid_mid.txt":          b("a\xE6\xADb\xFFc\xC0\xAFd\xED\xA0\x80e\xF4\x90\x80\x80f\x80g\xE6\xAD \r\nh\xF0\x9F"),
		// Other encodings.
		"gbk_crlf.txt":       gbk(chapter),
		"gb18030_4byte.txt":  gb18030("€ 😀 𠀀 正文 \u3000\r\n"),
		"gb18030_bom.txt":    gb18030("\uFEFF正文\r\n"),
		"gbk_truncated.txt":  cat(gbk("正文"), b("\xD5")),
		"gbk_late.txt":       cat(b(strings.Repeat("Chapter 1. It was late.\r\n", 4000)), gbk(chapter)),
		"utf8_then_bad.txt":  b(strings.Repeat("第一章 风起，天色渐晚。\r\n", 3000) + "\xFF"),
		"utf16le_bom.txt":    utf16le("\uFEFF 第一章\r\n😀\r\n\r\n  "),
		"utf16be_bom.txt":    utf16be("\uFEFF 第一章\r\n😀\r\n\r\n  "),
		"utf16le_nobom.txt":  utf16le("abc 正文\r\n"),
		"utf16le_odd.txt":    cat(utf16le("\uFEFFab"), b("\x00\x41\x42")),
		"utf16le_lone.txt":   cat(utf16le("\uFEFFa"), b("\x00\xD8"), utf16le("b"), b("\x00\xDC")),
		"utf16be_twobom.txt": utf16be("\uFEFF\uFEFFabc"),
		// Blank runs longer than a buffer, in the middle, at the end, at the start.
		"long_blank_mid.txt":  b("开始" + strings.Repeat(" \r\n\t", 25000) + "结束"),
		"long_blank_tail.txt": b("开始\r\n" + strings.Repeat(" \r\n\t", 25000)),
		"long_blank_head.txt": b(strings.Repeat("\r\n ", 30000) + "正文"),
		"novel_crlf.txt":      novelText(20 << 10),
	}
}

func mustEncode(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// corpusOptions are the encodings every corpus file is keyed with.
var corpusOptions = []Encoding{Auto, UTF8, UTF16, UTF16LE, UTF16BE, GB18030}

// readCorpus returns the files of testdata/corpus by name, writing them
// first with -gencorpus.
func readCorpus(t testing.TB) map[string][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "corpus")
	for name := range corpusSpec() {
		if windowsReserved(name) {
			t.Fatalf("corpus file %s: Windows opens that name as a device, not a file; rename it", name)
		}
	}
	if *genCorpus {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range corpusSpec() {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string][]byte)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	if len(files) < len(corpusSpec()) {
		t.Fatalf("testdata/corpus has %d files, corpusSpec %d: run go test -gencorpus", len(files), len(corpusSpec()))
	}
	return files
}

// windowsReserved reports whether Windows takes a file of this name for a
// device (NUL, CON, COM1 ...), whatever its extension: a checkout on Windows
// would read the device instead of the file.
func windowsReserved(name string) bool {
	base, _, _ := strings.Cut(strings.ToUpper(name), ".")
	base = strings.TrimRight(base, " ")
	switch base {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(base) == 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) {
		return base[3] >= '0' && base[3] <= '9'
	}
	return false
}

func TestWindowsReserved(t *testing.T) {
	for name, want := range map[string]bool{
		"nul.txt": true, "NUL": true, "con.tar.gz": true, "com1.txt": true, "lpt9": true, "aux .txt": true,
		"nul_bytes.txt": false, "null.txt": false, "com.txt": false, "com10.txt": false, "console.txt": false,
	} {
		if got := windowsReserved(name); got != want {
			t.Errorf("windowsReserved(%q) = %v, want %v", name, got, want)
		}
	}
}

// chunkSizes are the most bytes one Read returns, in the boundary tests.
var chunkSizes = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 4 << 10, 64 << 10, 256 << 10}

// TestStreamMatchesReference checks the streaming path against the
// whole-string model for every corpus file, encoding option, chunk size and
// buffer size, so that read boundaries and buffer boundaries fall on every
// CR, LF, byte-order mark and multi-byte character of the corpus.
func TestStreamMatchesReference(t *testing.T) {
	files := readCorpus(t)
	bufSizes, chunks := []int{16, 100, defaultBufSize}, chunkSizes
	if testing.Short() {
		// Every way a character of up to four bytes can straddle a read,
		// and whole blocks, in both buffers: the race tier runs this.
		bufSizes, chunks = []int{16, defaultBufSize}, []int{1, 2, 3, 4, 5, 4 << 10}
	}
	for name, data := range files {
		for _, enc := range corpusOptions {
			for _, algo := range []Algo{MD5, SHA256} {
				opt := Options{Algo: algo, Encoding: enc}
				want := refKey(data, opt)
				for _, bufSize := range bufSizes {
					k := newKeyer(bufSize)
					for _, chunk := range chunks {
						if algo == SHA256 && chunk > 1 && chunk < 16 {
							continue // the hash is not what chunking tests
						}
						got, err := k.read(context.Background(), &chunkReader{r: bytes.NewReader(data), n: chunk, eofWithData: chunk%2 == 0}, opt)
						if err != nil {
							t.Fatalf("%s %v chunk %d buf %d: %v", name, opt, chunk, bufSize, err)
						}
						if got != want {
							t.Fatalf("%s %v chunk %d buf %d:\n got %+v\nwant %+v", name, opt, chunk, bufSize, got, want)
						}
					}
				}
			}
		}
	}
}

// TestCorpusGolden pins the key of every corpus file and option, so a change
// to the normalization rules, in both paths alike, cannot slip through.
// go test -update rewrites the file; commit only a diff you understand.
func TestCorpusGolden(t *testing.T) {
	files := readCorpus(t)
	var lines []string
	for name, data := range files {
		for _, enc := range corpusOptions {
			res, err := File(context.Background(), filepath.Join("testdata", "corpus", name), Options{Encoding: enc})
			if err != nil {
				t.Fatal(err)
			}
			if ref := refKey(data, Options{Encoding: enc}); res != ref {
				t.Errorf("%s %v: File = %+v, reference %+v", name, enc, res, ref)
			}
			lines = append(lines, fmt.Sprintf("%s %v %s %d %d %v", name, enc, res.Key, res.UTF16Len, res.Bytes, res.Encoding))
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join("testdata", "corpus.golden")
	if *update {
		header := "# file option key utf16Len bytes encoding; rewrite with go test -update\n"
		if err := os.WriteFile(golden, []byte(header+got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	wantLines := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(want))
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			wantLines[l] = true
		}
	}
	for _, l := range lines {
		if !wantLines[l] {
			t.Errorf("not in %s: %s", golden, l)
		}
		delete(wantLines, l)
	}
	for l := range wantLines {
		t.Errorf("in %s but not computed: %s", golden, l)
	}
}

// chunkReader returns at most n bytes per Read. It seeks, so that Auto mode
// can read non-UTF-8 input twice.
type chunkReader struct {
	r           *bytes.Reader
	n           int
	eofWithData bool // return io.EOF with the last bytes rather than after them
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	if err == nil && c.eofWithData && c.r.Len() == 0 {
		err = io.EOF
	}
	return n, err
}

func (c *chunkReader) Seek(off int64, whence int) (int64, error) { return c.r.Seek(off, whence) }
