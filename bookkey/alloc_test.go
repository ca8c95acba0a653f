//go:build !race

// The race detector makes sync.Pool drop items at random, so allocations are
// only counted without it.

package bookkey

import (
	"bytes"
	"context"
	"io"
	"runtime/debug"
	"strings"
	"testing"
)

// limitedBlanks yields n bytes of " \t\r\n" repeated, without holding them.
type limitedBlanks struct{ n, off int64 }

func (l *limitedBlanks) Read(p []byte) (int, error) {
	if l.off == l.n {
		return 0, io.EOF
	}
	if int64(len(p)) > l.n-l.off {
		p = p[:l.n-l.off]
	}
	for i := range p {
		p[i] = " \t\r\n"[(l.off+int64(i))%4]
	}
	l.off += int64(len(p))
	return len(p), nil
}

// TestFixedMemory: keying allocates nothing, however long the text and
// however long its blank runs (which the seed buffered).
func TestFixedMemory(t *testing.T) {
	// A collection that starts between AllocsPerRun's warm-up call and its
	// counted one empties the keyers' pool, whose next Get allocates the
	// pool's per-P array again: an allocation of the collector's, not of
	// the call. With the collector off, every allocation counted is the
	// call's.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	text := novelText(8 << 20)
	Read(context.Background(), bytes.NewReader(text), Options{}) // warm the pool
	for _, tt := range []struct {
		name string
		r    func() io.Reader
	}{
		{"8 MiB novel", func() io.Reader { return bytes.NewReader(text) }},
		{"text then 32 MiB of blanks", func() io.Reader {
			return io.MultiReader(strings.NewReader("a"), &limitedBlanks{n: 32 << 20})
		}},
		{"text, 32 MiB of blanks, text", func() io.Reader {
			return io.MultiReader(strings.NewReader("a"), &limitedBlanks{n: 32 << 20}, strings.NewReader("b"))
		}},
	} {
		// AllocsPerRun calls f twice; the readers are made beforehand.
		readers := []io.Reader{tt.r(), tt.r()}
		allocs := testing.AllocsPerRun(1, func() {
			if _, err := Read(context.Background(), readers[0], Options{Encoding: UTF8}); err != nil {
				t.Fatal(err)
			}
			readers = readers[1:]
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per call, want none", tt.name, allocs)
		}
	}
	res, _ := Read(context.Background(), io.MultiReader(strings.NewReader("a"), &limitedBlanks{n: 32 << 20}, strings.NewReader("b")), Options{})
	if want := int64(32<<20/4*3 + 2); res.Bytes != want || res.UTF16Len != want { // CRLF is one byte
		t.Errorf("a, blanks, b: %+v", res)
	}
}
