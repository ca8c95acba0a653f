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
	case utf16 == "little-endian" && res.Encoding != bookkey.UTF16LE,
		utf16 == "big-endian" && res.Encoding != bookkey.UTF16BE:
		out = append(out, fmt.Sprintf("this looks like UTF-16 (%s) without a byte-order mark, but was read as %s: try --encoding utf-16 (which reads little-endian when there is no mark)", utf16, res.Encoding))
	case utf16 == "" && looksBinary(head):
		out = append(out, "this does not look like text (NUL or other control bytes): its key is unlikely to match the book's on other devices")
	}
	if forced != bookkey.Auto && utf16 == "" {
		if auto := guessEncoding(head); auto != forced {
			out = append(out, fmt.Sprintf("read as %s as --encoding asked, but it looks like %s: the key differs from what other devices compute", forced, auto))
		}
	}
	return out
}

// looksUTF16 reports "little-endian" or "big-endian" if every other byte of
// head is mostly zero, as in UTF-16 text of Latin script, "" otherwise.
// (UTF-16 of CJK text has no such pattern; without a BOM nothing tells it
// from other bytes, which is why the auto mode does not guess it.)
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
	return ""
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
