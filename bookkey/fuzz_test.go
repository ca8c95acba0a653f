package bookkey

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// varyingReader returns reads of varying sizes, from 1 to max bytes, drawn
// from seed. It seeks, so Auto mode can read twice.
type varyingReader struct {
	r    *bytes.Reader
	seed uint32
	max  int
}

func (v *varyingReader) Read(p []byte) (int, error) {
	v.seed = v.seed*1664525 + 1013904223
	n := 1 + int(v.seed>>16)%v.max
	if len(p) > n {
		p = p[:n]
	}
	return v.r.Read(p)
}

func (v *varyingReader) Seek(off int64, whence int) (int64, error) { return v.r.Seek(off, whence) }

// FuzzStream: for any bytes, encoding option, buffer size and pattern of read
// sizes, the streaming path gives the whole-string model's result.
func FuzzStream(f *testing.F) {
	for _, s := range []string{"\uFEFF abc \r\n\r\n", " \r\n\t ", " \u3000正文\u3000 ", "a\r", "\xE6\xAD \r\n", "\xFF\xFEa\x00\r\x00"} {
		f.Add([]byte(s), uint8(0), uint32(1), uint8(1))
	}
	entries, _ := os.ReadDir(filepath.Join("testdata", "corpus"))
	for i, e := range entries {
		if data, err := os.ReadFile(filepath.Join("testdata", "corpus", e.Name())); err == nil && len(data) < 4096 {
			f.Add(data, uint8(i), uint32(i), uint8(i))
		}
	}
	// Keyers of their own, so that a GC emptying the pool does not make the
	// fuzzer allocate full-size buffers over and over.
	keyers := []*keyer{newKeyer(16), newKeyer(64), newKeyer(defaultBufSize)}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8, seed uint32, maxRead uint8) {
		opt := Options{Encoding: corpusOptions[int(mode)%len(corpusOptions)]}
		want := refKey(data, opt)
		r := &varyingReader{r: bytes.NewReader(data), seed: seed, max: 1 + int(maxRead)}
		got, err := keyers[int(mode/8)%len(keyers)].read(context.Background(), r, opt)
		if err != nil {
			t.Fatalf("%v: %v", opt, err)
		}
		if got != want {
			t.Fatalf("%q %v:\n got %+v\nwant %+v", data, opt, got, want)
		}
	})
}

// TestStreamProperty draws texts from the pieces the rules are about, which
// random bytes rarely line up, and checks the stream against the model.
func TestStreamProperty(t *testing.T) {
	pieces := []string{"\r", "\n", "\r\n", " ", "\t", "\uFEFF", "\xEF\xBB", "a", "正", "😀", "\u3000", "\x00",
		"\xE6", "\xAD", "\xF0\x9F", "\xFF", "\xED\xA0\x80", "\xC0"}
	k := newKeyer(16)
	rapid.Check(t, func(t *rapid.T) {
		text := strings.Join(rapid.SliceOf(rapid.SampledFrom(pieces)).Draw(t, "pieces"), "")
		opt := Options{Encoding: rapid.SampledFrom(corpusOptions).Draw(t, "encoding")}
		r := &varyingReader{r: bytes.NewReader([]byte(text)), seed: rapid.Uint32().Draw(t, "seed"), max: rapid.IntRange(1, 20).Draw(t, "max")}
		got, err := k.read(context.Background(), r, opt)
		if err != nil {
			t.Fatal(err)
		}
		if want := refKey([]byte(text), opt); got != want {
			t.Fatalf("%q %v:\n got %+v\nwant %+v", text, opt, got, want)
		}
	})
}
