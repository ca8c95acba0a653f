package bookkey

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"go.uber.org/goleak"
	"golang.org/x/text/encoding/simplifiedchinese"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func gbkEncode(b []byte) ([]byte, error) { return simplifiedchinese.GBK.NewEncoder().Bytes(b) }

// keyAllWays keys s as a string, as a stream in one read, and one byte per
// read, and fails unless all three agree with the reference.
func keyAllWays(t *testing.T, s string, opt Options) Result {
	t.Helper()
	want := refKey([]byte(s), opt)
	if got := String(s, opt); got != want {
		t.Fatalf("String(%q) = %+v, reference %+v", s, got, want)
	}
	for _, chunk := range []int{1, len(s) + 1} {
		got, err := Read(context.Background(), &chunkReader{r: bytes.NewReader([]byte(s)), n: chunk}, opt)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Read(%q) in %d-byte reads = %+v, reference %+v", s, chunk, got, want)
		}
	}
	return want
}

// TestGoldenValues are the values of seed 003; they must hold on every path.
func TestGoldenValues(t *testing.T) {
	tests := []struct {
		in, key string
	}{
		{"\uFEFF abc \r\n\r\n", "md5:900150983cd24fb0d6963f7d28e17f72"}, // md5("abc")
		{" \r\n\t ", "md5:d41d8cd98f00b204e9800998ecf8427e"},            // md5("")
		{"", "md5:d41d8cd98f00b204e9800998ecf8427e"},
		{" \u3000正文\u3000 ", refHash("\u3000正文\u3000", MD5)},   // rule 4 keeps U+3000
		{"正文" + strings.Repeat("\n", 300), refHash("正文", MD5)}, // 300 trailing LFs all go
		{" \uFEFFabc", refHash("\uFEFFabc", MD5)},              // rule 2: a BOM after a blank is text
		{"abc", "md5:900150983cd24fb0d6963f7d28e17f72"},
	}
	for _, tt := range tests {
		if got := keyAllWays(t, tt.in, Options{}); got.Key.String() != tt.key {
			t.Errorf("key(%q) = %s, want %s", tt.in, got.Key, tt.key)
		}
	}
	if got := String("abc", Options{Algo: SHA256}).Key.String(); got != "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("sha256 key of abc = %s", got)
	}
}

// TestRules checks each rule of the package documentation on the reference and
// every streaming path.
func TestRules(t *testing.T) {
	tests := []struct {
		rule, in, norm string
	}{
		{"2: BOM at byte 0 goes", "\uFEFFabc", "abc"},
		{"2: only once", "\uFEFF\uFEFFabc", "\uFEFFabc"},
		{"2: BOM after blanks is text", "\t\uFEFFabc", "\uFEFFabc"},
		{"2: BOM alone", "\uFEFF", ""},
		{"3: CRLF", "a\r\nb", "a\nb"},
		{"3: lone CR", "a\rb", "a\nb"},
		{"3: LFCR is two breaks", "a\n\rb", "a\n\nb"},
		{"3: CRCRLF", "a\r\r\nb", "a\n\nb"},
		{"3: CR at the end", "a\r", "a"},
		{"4: space tab LF at both ends", " \t\na b\t \n", "a b"},
		{"4: CR counts as LF when trimming", "\r\ra\r\r", "a"},
		{"4: U+3000 stays", "\u3000a\u3000", "\u3000a\u3000"},
		{"4: NBSP stays", "\u00A0a\u00A0", "\u00A0a\u00A0"},
		{"4: form feed and vertical tab stay", "\fa\v", "\fa\v"},
		{"4: NUL stays", "\x00a\x00", "\x00a\x00"},
		{"4: inner blank lines stay", "a\n\n \n\tb", "a\n\n \n\tb"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if got := refNormalize(tt.in); got != tt.norm {
				t.Fatalf("refNormalize(%q) = %q, want %q", tt.in, got, tt.norm)
			}
			res := keyAllWays(t, tt.in, Options{Encoding: UTF8})
			if res.Key.String() != refHash(tt.norm, MD5) || res.Bytes != int64(len(tt.norm)) {
				t.Fatalf("key(%q) = %+v, want the hash of %q", tt.in, res, tt.norm)
			}
		})
	}
}

// TestUTF16Len checks the length rule, including the ill-formed UTF-8 a forced
// utf-8 may bring: one unit per maximal subpart, none for an incomplete end.
func TestUTF16Len(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"abc", 3},
		{"正文", 2},
		{"😀", 2},
		{"a😀b", 4},
		{"\u3000正文\u3000", 4},
		{"\xE6\xAD", 0},                 // incomplete at the very end
		{"正\xE6\xAD \r\n", 1},           // still the end once trimmed
		{"hi \xF0\x9F\x98", 3},          // incomplete four-byte sequence
		{"a\xE6\xADb", 3},               // E6 AD is one maximal subpart
		{"a\xE6\xAD b", 4},              // so is it before a blank
		{"\xFF", 1},                     // never valid
		{"\xC0\xAF", 2},                 // overlong: C0 cannot start anything
		{"\xED\xA0\x80", 3},             // surrogate: ED's second byte must be 80-9F
		{"\xE0\x80\x80", 3},             // overlong: E0's second byte must be A0-BF
		{"\xF4\x90\x80\x80", 4},         // above U+10FFFF
		{"\xF0\x80\x80", 3},             // overlong four-byte
		{"\x80\x80a", 3},                // stray continuation bytes
		{"\xF0\x9F\x98\x80\xF0\x9F", 2}, // a whole emoji, then an incomplete one
		{"\xEF\xBF\xBD", 1},             // a real U+FFFD
	}
	for _, tt := range tests {
		res := keyAllWays(t, tt.in, Options{Encoding: UTF8})
		if res.UTF16Len != tt.want {
			t.Errorf("UTF16Len(%q) = %d, want %d", tt.in, res.UTF16Len, tt.want)
		}
	}
}

func TestDetect(t *testing.T) {
	gbk, _ := gbkEncode([]byte("正文"))
	tests := []struct {
		name string
		in   []byte
		want Encoding
	}{
		{"ascii", []byte("abc"), UTF8},
		{"utf-8", []byte("正文"), UTF8},
		{"utf-8 cut short", []byte("正文\xE6\xAD\r\n"), UTF8},
		{"utf-8 BOM, then ill-formed", []byte("\xEF\xBB\xBFa\xFF"), UTF8},
		{"gbk", gbk, GB18030},
		{"gbk after ascii", append([]byte("chapter one\r\n"), gbk...), GB18030},
		{"utf-16le BOM", []byte("\xFF\xFEa\x00"), UTF16LE},
		{"utf-16be BOM", []byte("\xFE\xFF\x00a"), UTF16BE},
		{"utf-16 without BOM is not detected", []byte("a\x00b\x00"), UTF8},
		{"empty", nil, UTF8},
	}
	for _, tt := range tests {
		res := keyAllWays(t, string(tt.in), Options{})
		if res.Encoding != tt.want {
			t.Errorf("%s: encoding %v, want %v", tt.name, res.Encoding, tt.want)
		}
	}
	if got := String("\xFE\xFF\x00a", Options{Encoding: UTF16}); got.Encoding != UTF16BE {
		t.Errorf("utf-16 with a big-endian BOM decoded as %v", got.Encoding)
	}
	if got := String("a\x00", Options{Encoding: UTF16}); got.Encoding != UTF16LE || got.Key.String() != refHash("a", MD5) {
		t.Errorf("utf-16 without BOM = %+v, want little-endian \"a\"", got)
	}
}

// TestSameTextSameKey: a BOM is the encoding's, so the same text keys the same
// whatever encoding and line ends it arrives in.
func TestSameTextSameKey(t *testing.T) {
	const text = "\uFEFF第一章\r\n\r\n　　他推开门。\r\n"
	want := String(text, Options{}).Key.String()
	lf := String(strings.ReplaceAll(text, "\r\n", "\n"), Options{}).Key.String()
	gbk, _ := gbkEncode([]byte(strings.TrimPrefix(text, "\uFEFF")))
	for name, in := range map[string]string{
		"lf":       lf,
		"gbk":      String(string(gbk), Options{}).Key.String(),
		"utf-16le": String(string(utf16Encode(text, false)), Options{}).Key.String(),
		"utf-16be": String(string(utf16Encode(text, true)), Options{}).Key.String(),
	} {
		if in != want {
			t.Errorf("%s: key %s, want %s", name, in, want)
		}
	}
}

func utf16Encode(s string, bigEndian bool) []byte {
	var b []byte
	for _, r := range s {
		var u [2]uint16
		n := 1
		if r > 0xFFFF {
			r -= 0x10000
			u[0], u[1], n = uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)), 2
		} else {
			u[0] = uint16(r)
		}
		for _, c := range u[:n] {
			if bigEndian {
				b = append(b, byte(c>>8), byte(c))
			} else {
				b = append(b, byte(c), byte(c>>8))
			}
		}
	}
	return b
}

func TestNotSeekable(t *testing.T) {
	gbk, _ := gbkEncode([]byte("正文"))
	_, err := Read(context.Background(), iotest.OneByteReader(bytes.NewReader(gbk)), Options{})
	if !errors.Is(err, ErrNotSeekable) {
		t.Fatalf("gbk from a pipe: err = %v, want ErrNotSeekable", err)
	}
	res, err := Read(context.Background(), iotest.OneByteReader(bytes.NewReader(gbk)), Options{Encoding: GB18030})
	if err != nil || res.Key.String() != refHash("正文", MD5) {
		t.Fatalf("gbk from a pipe, forced: %+v, %v", res, err)
	}
	res, err = Read(context.Background(), iotest.OneByteReader(strings.NewReader("正文")), Options{})
	if err != nil || res.Encoding != UTF8 {
		t.Fatalf("utf-8 from a pipe: %+v, %v", res, err)
	}
}

// TestSecondPassStartsWhereReaderWas: the GB18030 pass seeks back to where r
// was when Read was called, not to the start of the file.
func TestSecondPassStartsWhereReaderWas(t *testing.T) {
	gbk, _ := gbkEncode([]byte("正文"))
	r := bytes.NewReader(append([]byte("HEADER"), gbk...))
	r.Seek(6, io.SeekStart)
	res, err := Read(context.Background(), r, Options{})
	if err != nil || res.Key.String() != refHash("正文", MD5) || res.Encoding != GB18030 {
		t.Fatalf("Read = %+v, %v; want gb18030 %q", res, err, "正文")
	}
}

// errAfter yields data, then fails.
type errAfter struct {
	data []byte
	err  error
}

func (e *errAfter) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

// TestReadError: the reader's error comes back as is, with no result, after
// the worker started for a long text has been joined (goleak checks).
func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	for _, n := range []int{0, 10, 3 * defaultBufSize} {
		for _, enc := range []Encoding{Auto, UTF8, GB18030, UTF16} {
			res, err := Read(context.Background(), &errAfter{data: novelText(n), err: boom}, Options{Encoding: enc})
			if err != boom || res != (Result{}) {
				t.Errorf("%d bytes then an error, %v: %+v, %v", n, enc, res, err)
			}
		}
	}
}

// endless yields spaces forever, calling cancel after limit bytes.
type endless struct {
	n, limit int
	cancel   func()
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	if e.n += len(p); e.n > e.limit && e.cancel != nil {
		e.cancel()
	}
	return len(p), nil
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Read(ctx, io.MultiReader(strings.NewReader("text"), &endless{limit: 8 * defaultBufSize, cancel: cancel}), Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestOptions(t *testing.T) {
	if _, err := Read(context.Background(), strings.NewReader(""), Options{Algo: 9}); err == nil {
		t.Error("unknown algo accepted")
	}
	if _, err := Read(context.Background(), strings.NewReader(""), Options{Encoding: 9}); err == nil {
		t.Error("unknown encoding accepted")
	}
	for _, s := range []string{"auto", "utf-8", "UTF8", "utf-16", "utf-16le", "utf-16be", "gb18030", "GBK"} {
		e, err := ParseEncoding(s)
		if err != nil {
			t.Errorf("ParseEncoding(%q): %v", s, err)
		}
		if back, _ := ParseEncoding(e.String()); back != e {
			t.Errorf("ParseEncoding(%q).String() = %q does not parse back", s, e)
		}
	}
	if _, err := ParseEncoding("latin1"); err == nil {
		t.Error("ParseEncoding(latin1) succeeded")
	}
	if a, err := ParseAlgo("sha256"); err != nil || a != SHA256 {
		t.Errorf("ParseAlgo(sha256) = %v, %v", a, err)
	}
	if _, err := ParseAlgo("crc32"); err == nil {
		t.Error("ParseAlgo(crc32) succeeded")
	}
}

func TestFileMissing(t *testing.T) {
	if _, err := File(context.Background(), "testdata/no such file", Options{}); err == nil {
		t.Error("File on a missing file succeeded")
	}
}

// TestConcurrentReads: calls share the pool and the worker hand-off, never
// state.
func TestConcurrentReads(t *testing.T) {
	texts := [][]byte{novelText(1 << 20), novelText(300 << 10), []byte("short"), append(novelText(200<<10), 0xFF)}
	want := make([]Result, len(texts))
	for i, text := range texts {
		want[i] = refKey(text, Options{})
	}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func() {
			for i := range texts {
				j := (i + g) % len(texts)
				got, err := Read(context.Background(), bytes.NewReader(texts[j]), Options{})
				if err == nil && got != want[j] {
					err = fmt.Errorf("text %d: got %+v, want %+v", j, got, want[j])
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
