package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/danyue/danyue/bookkey"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"
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
	chinese := "第一章　范进中举\r\n\r\n　　话说山东兖州府汶上县有个乡村，叫做薛家集。这集上有百十来人家，都是务农为业。村口一个观音庵，殿宇三间之外，另还有十几间空房子，后门临着水次。\r\n"
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
		// Issue 49: Chinese UTF-16 has no zero bytes to tell it by.
		{"chinese utf-16le without a BOM", utf16le(chinese), bookkey.GB18030, bookkey.Auto, "try --encoding utf-16 "},
		{"chinese utf-16be without a BOM", utf16be(chinese), bookkey.GB18030, bookkey.Auto, "try --encoding utf-16be"},
		{"chinese utf-16le forced", utf16le(chinese), bookkey.UTF16LE, bookkey.UTF16, ""},
		{"chinese utf-16be forced", utf16be(chinese), bookkey.UTF16BE, bookkey.UTF16BE, ""},
		{"chinese gbk", gbk(t, chinese), bookkey.GB18030, bookkey.Auto, ""},
		{"chinese gbk forced", gbk(t, chinese), bookkey.GB18030, bookkey.GB18030, ""},
		{"utf-16le with a BOM forced as utf-16le", append([]byte{0xff, 0xfe}, utf16le(chinese)...), bookkey.UTF16LE, bookkey.UTF16LE, ""},
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

// gbk encodes s in GBK.
func gbk(t *testing.T, s string) []byte {
	t.Helper()
	b, _, err := transform.Bytes(simplifiedchinese.GBK.NewEncoder(), []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Issue 49: forcing --encoding utf-16 on a Chinese UTF-16 file without a
// BOM keys it as the UTF-8 copy is keyed, and warns of nothing.
func TestKeyChineseUTF16WithoutBOM(t *testing.T) {
	chinese := strings.Repeat("话说山东兖州府汶上县有个乡村，叫做薛家集。\n", 20)
	var le []byte
	for _, r := range chinese {
		le = append(le, byte(r), byte(r>>8))
	}
	dir := t.TempDir()
	u8, u16 := filepath.Join(dir, "utf8.txt"), filepath.Join(dir, "utf16.txt")
	if err := os.WriteFile(u8, []byte(chinese), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u16, le, 0o644); err != nil {
		t.Fatal(err)
	}
	want := runCLIWith(t, nil, "", "key", "--no-link", u8)
	auto := runCLIWith(t, nil, "", "key", "--no-link", u16)
	if !strings.Contains(auto.stderr, "try --encoding utf-16") {
		t.Errorf("auto on Chinese UTF-16LE: stderr %q, want the hint", auto.stderr)
	}
	forced := runCLIWith(t, nil, "", "key", "--no-link", "--encoding", "utf-16", u16)
	if forced.stderr != "" || forced.code != 0 {
		t.Errorf("forced utf-16: exit %d, stderr %q, want no warning", forced.code, forced.stderr)
	}
	if k, w := strings.Fields(forced.stdout), strings.Fields(want.stdout); len(k) == 0 || len(w) == 0 || k[0] != w[0] {
		t.Errorf("forced utf-16 keyed %q, the UTF-8 copy %q", forced.stdout, want.stdout)
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
