package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/danyue/danyue/bookkey"
)

// Warnings for keys that are likely not what the user meant. A BookKey is a
// fingerprint of text: keying something that is not text, or text read in
// the wrong encoding, gives a key all the same, one that no other device
// computes for the book. What the warnings look at is a sample of the
// file's start, read apart from the keying (which reads only its reader).

// sniffSize is how much of a file's start the warnings look at.
const sniffSize = 64 << 10

// keyWarnings returns what is likely wrong with keying the file at path as
// res says it was keyed; forced is the --encoding given (Auto if none).
func keyWarnings(path string, res bookkey.Result, forced bookkey.Encoding) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil // keying read it; a warning is not worth an error
	}
	defer f.Close()
	head := make([]byte, sniffSize)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil
	}
	return sniffWarnings(head[:n], res, forced)
}

// sniffWarnings is keyWarnings on a file's first bytes.
func sniffWarnings(head []byte, res bookkey.Result, forced bookkey.Encoding) []string {
	if len(head) == 0 {
		return []string{"the file is empty: its key is the key of no text at all"}
	}
	var out []string
	utf16 := looksUTF16(head)
	switch {
	case utf16 == "little-endian" && res.Encoding != bookkey.UTF16LE:
		out = append(out, fmt.Sprintf("this looks like UTF-16 (%s) without a byte-order mark, but was read as %s: try --encoding utf-16 (which reads little-endian when there is no mark)", utf16, res.Encoding))
	case utf16 == "big-endian" && res.Encoding != bookkey.UTF16BE:
		out = append(out, fmt.Sprintf("this looks like UTF-16 (%s) without a byte-order mark, but was read as %s: try --encoding utf-16be", utf16, res.Encoding))
	case utf16 == "" && looksBinary(head):
		out = append(out, "this does not look like text (NUL or other control bytes): its key is unlikely to match the book's on other devices")
	}
	if forced != bookkey.Auto && utf16 == "" {
		if auto := guessEncoding(head); !sameEncoding(auto, forced) {
			out = append(out, fmt.Sprintf("read as %s as --encoding asked, but it looks like %s: the key differs from what other devices compute", forced, auto))
		}
	}
	return out
}

// looksUTF16 reports "little-endian" or "big-endian" if head reads as UTF-16
// text in that byte order without a byte-order mark, "" otherwise. Two
// signs count: every other byte mostly zero, as in UTF-16 of Latin script;
// or, for CJK text, whose code units have no zero byte, nearly every code
// unit in that order being a character of Chinese text (ideographs, CJK and
// fullwidth punctuation, printable ASCII, blanks) while the other order
// reads as much less of it. The second sign is what tells a Chinese UTF-16
// file from GBK, which GB18030 decodes without error: GBK's byte pairs
// read as UTF-16 land in those ranges far less often. The auto mode still
// does not guess either: a wrong guess there would change a good key.
func looksUTF16(head []byte) string {
	if len(head) < 16 {
		return ""
	}
	var zeros [2]int
	for i, b := range head {
		if b == 0 {
			zeros[i%2]++
		}
	}
	half := len(head) / 2
	switch {
	case zeros[1] > half*3/10 && zeros[0] < half/20:
		return "little-endian"
	case zeros[0] > half*3/10 && zeros[1] < half/20:
		return "big-endian"
	}
	le, be := chineseShare(head, false), chineseShare(head, true)
	switch {
	case le >= 90 && be < 70:
		return "little-endian"
	case be >= 90 && le < 70:
		return "big-endian"
	}
	return ""
}

// chineseShare is the percentage of head's UTF-16 code units, in the byte
// order bigEndian says, that are characters of Chinese text. A surrogate
// pair counts as one character of it (rare ideographs live there); an
// unpaired surrogate does not.
func chineseShare(head []byte, bigEndian bool) int {
	n := len(head) / 2
	if n == 0 {
		return 0
	}
	unit := func(i int) uint16 {
		if bigEndian {
			return uint16(head[2*i])<<8 | uint16(head[2*i+1])
		}
		return uint16(head[2*i+1])<<8 | uint16(head[2*i])
	}
	good := 0
	for i := 0; i < n; i++ {
		u := unit(i)
		switch {
		case u == '\t' || u == '\n' || u == '\r',
			u >= 0x20 && u < 0x7f,     // ASCII
			u >= 0x2000 && u < 0x2070, // general punctuation
			u >= 0x3000 && u < 0x3040, // CJK symbols and punctuation
			u >= 0x3400 && u < 0x4dc0, // CJK extension A
			u >= 0x4e00 && u < 0xa000, // CJK unified ideographs
			u >= 0xff00 && u < 0xfff0: // fullwidth forms
			good++
		case u >= 0xd800 && u < 0xdc00 && i+1 < n:
			if next := unit(i + 1); next >= 0xdc00 && next < 0xe000 {
				good += 2
				i++
			}
		}
	}
	return good * 100 / n
}

// sameEncoding reports whether a and b read text alike: utf-16 with a
// byte-order mark is utf-16le or utf-16be as the mark says.
func sameEncoding(a, b bookkey.Encoding) bool {
	utf16 := func(e bookkey.Encoding) bool {
		return e == bookkey.UTF16 || e == bookkey.UTF16LE || e == bookkey.UTF16BE
	}
	return a == b || utf16(a) && utf16(b)
}

// looksBinary reports whether head holds a NUL, or more than one byte in a
// hundred that is a control character other than the blanks of text.
func looksBinary(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	ctl := 0
	for _, b := range head {
		if b < 0x20 && b != '\t' && b != '\n' && b != '\r' && b != '\f' && b != 0x1a {
			ctl++
		}
	}
	return ctl*100 > len(head)
}

// guessEncoding is what the auto mode would take for a file starting with
// head: the BOM's encoding, else UTF-8 if valid (a sequence cut at the end
// of the sample does not count against it), else GB18030.
func guessEncoding(head []byte) bookkey.Encoding {
	switch {
	case bytes.HasPrefix(head, []byte{0xef, 0xbb, 0xbf}):
		return bookkey.UTF8
	case bytes.HasPrefix(head, []byte{0xff, 0xfe}), bytes.HasPrefix(head, []byte{0xfe, 0xff}):
		return bookkey.UTF16
	}
	for cut := 0; cut < utf8.UTFMax && cut < len(head); cut++ {
		if utf8.Valid(head[:len(head)-cut]) {
			return bookkey.UTF8
		}
		if len(head) < sniffSize {
			break // the whole file: nothing was cut
		}
	}
	return bookkey.GB18030
}
