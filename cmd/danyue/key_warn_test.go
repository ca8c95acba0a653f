package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/danyue/danyue/bookkey"
)

// Issue 16: `danyue key` warns when the key is likely not what the user
// meant, and only then.
func TestKeyWarnings(t *testing.T) {
	utf16le := func(s string) []byte {
		var b []byte
		for _, r := range s {
			b = append(b, byte(r), byte(r>>8))
		}
		return b
	}
	utf16be := func(s string) []byte {
		var b []byte
		for _, r := range s {
			b = append(b, byte(r>>8), byte(r))
		}
		return b
	}
	text := "It was the best of times, it was the worst of times.\n"
	tests := []struct {
		name   string
		head   []byte
		read   bookkey.Encoding // what keying read it as
		forced bookkey.Encoding
		want   string // a substring of the one warning, "" for none
	}{
		{"plain text", []byte(text), bookkey.UTF8, bookkey.Auto, ""},
		{"chinese", []byte("你好，世界。\n"), bookkey.UTF8, bookkey.Auto, ""},
		{"gbk, auto", []byte{0xc4, 0xe3, 0xba, 0xc3, 0x0a}, bookkey.GB18030, bookkey.Auto, ""},
		{"empty", nil, bookkey.UTF8, bookkey.Auto, "empty"},
		{"utf-16le without a BOM", utf16le(text), bookkey.UTF8, bookkey.Auto, "UTF-16 (little-endian)"},
		{"utf-16be read as le", utf16be(text), bookkey.UTF16LE, bookkey.UTF16, "UTF-16 (big-endian)"},
		{"utf-16le read as le", utf16le(text), bookkey.UTF16LE, bookkey.UTF16, ""},
		{"binary", append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...), bookkey.UTF8, bookkey.Auto, "does not look like text"},
		{"control bytes", []byte(strings.Repeat("ab\x01\x02\x03", 20)), bookkey.UTF8, bookkey.Auto, "does not look like text"},
		{"utf-8 forced as gb18030", []byte("你好，世界。\n"), bookkey.GB18030, bookkey.GB18030, "looks like utf-8"},
		{"gbk forced as utf-8", []byte{0xc4, 0xe3, 0xba, 0xc3, 0x0a}, bookkey.UTF8, bookkey.UTF8, "looks like gb18030"},
		{"utf-8 forced as utf-8", []byte(text), bookkey.UTF8, bookkey.UTF8, ""},
	}
	for _, tc := range tests {
		got := sniffWarnings(tc.head, bookkey.Result{Encoding: tc.read}, tc.forced)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s: warned %q", tc.name, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%s: warnings %q, want one saying %q", tc.name, got, tc.want)
		}
	}
}

// A UTF-8 sample cut inside a character is still UTF-8.
func TestGuessEncodingCutSample(t *testing.T) {
	head := []byte(strings.Repeat("汉", sniffSize/3+1))[:sniffSize]
	if got := guessEncoding(head); got != bookkey.UTF8 {
		t.Errorf("a cut UTF-8 sample guessed as %v", got)
	}
}

func TestKeyEmptyDirectorySaysSo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# no"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runCLIWith(t, nil, "", "key", "--no-link", dir)
	if !strings.Contains(res.stderr, "no .txt file in it") || res.stdout != "" {
		t.Errorf("key of a directory without text: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}
