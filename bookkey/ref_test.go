package bookkey

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/unicode"
)

// refKey is the whole-string model of the package contract, written to be
// obviously right rather than fast. It shares no code with the streaming
// path: each checks the other.
func refKey(raw []byte, opt Options) Result {
	enc := opt.Encoding
	switch {
	case enc == Auto && bytes.HasPrefix(raw, []byte("\xEF\xBB\xBF")):
		enc = UTF8
	case (enc == Auto || enc == UTF16) && bytes.HasPrefix(raw, []byte("\xFF\xFE")):
		enc = UTF16LE
	case (enc == Auto || enc == UTF16) && bytes.HasPrefix(raw, []byte("\xFE\xFF")):
		enc = UTF16BE
	case enc == UTF16:
		enc = UTF16LE
	case enc == Auto:
		// UTF-8 if the normalized text is well-formed, but for an
		// incomplete character at its very end.
		if _, wellFormed := refUTF16Len(refNormalize(string(raw))); wellFormed {
			enc = UTF8
		} else {
			enc = GB18030
		}
	}

	var text string
	switch enc {
	case UTF8:
		text = string(raw)
	case UTF16LE:
		text = mustDecode(unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewDecoder().Bytes(raw))
	case UTF16BE:
		text = mustDecode(unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM).NewDecoder().Bytes(raw))
	case GB18030:
		text = mustDecode(simplifiedchinese.GB18030.NewDecoder().Bytes(raw))
	}
	norm := refNormalize(text)
	n, _ := refUTF16Len(norm)
	return Result{Key: refDigest(norm, opt.algo()), Encoding: enc, UTF16Len: n, Bytes: int64(len(norm))}
}

func mustDecode(b []byte, err error) string {
	if err != nil {
		panic(err)
	}
	return string(b)
}

// refNormalize applies rules 2 to 4.
func refNormalize(s string) string {
	s = strings.TrimPrefix(s, "\uFEFF")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Trim(s, " \t\n")
}

// refDigest is refHash as a Key, which the reference path builds from the
// digest it computes itself.
func refDigest(s string, a Algo) Key {
	if a == SHA256 {
		sum := sha256.Sum256([]byte(s))
		return makeKey(a, sum[:])
	}
	sum := md5.Sum([]byte(s))
	return makeKey(a, sum[:])
}

func refHash(s string, a Algo) string {
	if a == SHA256 {
		sum := sha256.Sum256([]byte(s))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	sum := md5.Sum([]byte(s))
	return "md5:" + hex.EncodeToString(sum[:])
}

// refUTF16Len decodes s as .NET's UTF8Encoding decoder does without a final
// flush: each maximal subpart of an ill-formed sequence becomes one U+FFFD, and
// an incomplete sequence at the very end is dropped. It reports whether s was
// well-formed but for that end.
func refUTF16Len(s string) (n int64, wellFormed bool) {
	var runes []rune
	b := []byte(s)
	wellFormed = true
	for len(b) > 0 {
		if r, size := utf8.DecodeRune(b); r != utf8.RuneError || size > 1 {
			runes = append(runes, r)
			b = b[size:]
			continue
		}
		k := 1 // the maximal subpart: the longest prefix some character starts with
		for k < len(b) && k < 3 && isProperPrefix(b[:k+1]) {
			k++
		}
		if k == len(b) && isProperPrefix(b) {
			break
		}
		runes = append(runes, utf8.RuneError)
		wellFormed = false
		b = b[k:]
	}
	return int64(len(utf16.Encode(runes))), wellFormed
}

// isProperPrefix reports whether p is the beginning, but not the whole, of the
// UTF-8 encoding of some character, by trying every continuation: only the
// second byte has a restricted range, so later ones may as well be 0x80.
func isProperPrefix(p []byte) bool {
	if len(p) >= utf8.UTFMax {
		return false
	}
	for c := 0x80; c <= 0xBF; c++ {
		var buf [utf8.UTFMax]byte
		n := copy(buf[:], p)
		buf[n] = byte(c)
		for q := buf[:n+1]; ; q = append(q, 0x80) {
			if utf8.FullRune(q) {
				r, size := utf8.DecodeRune(q)
				if r != utf8.RuneError && size == len(q) {
					return true
				}
				break
			}
		}
	}
	return false
}
