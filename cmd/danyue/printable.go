package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable returns s as a terminal may show it: what is not graphic
// (control characters, format characters such as bidi overrides) and bytes
// that are not UTF-8 are written as Go escapes (\x1b, \n, \u202e). Every
// text the CLI prints but did not check itself goes through it: titles and
// device names come from other devices, which may run an older version that
// let an escape sequence in, and one such title would otherwise run on the
// terminal of every device of the library.
func printable(s string) string {
	if !strings.ContainsFunc(s, notGraphic) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case notGraphic(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func notGraphic(r rune) bool { return !unicode.IsGraphic(r) }
