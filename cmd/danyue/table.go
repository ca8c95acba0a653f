package main

import (
	"bytes"
	"io"
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

// table lays out tab-separated lines in columns, as text/tabwriter does,
// but measures cells in terminal cells rather than runes: a CJK title takes
// two cells a character, and tabwriter would misalign every column after
// it. Write cells separated by '\t', lines ended by '\n', then Flush.
type table struct {
	w   io.Writer
	buf bytes.Buffer
}

func newTable(w io.Writer) *table { return &table{w: w} }

func (t *table) Write(p []byte) (int, error) { return t.buf.Write(p) }

// columnGap is the space between two columns.
const columnGap = 2

// Flush writes the lines with every cell but each line's last padded to its
// column's widest.
func (t *table) Flush() error {
	lines := strings.SplitAfter(t.buf.String(), "\n")
	t.buf.Reset()
	rows := make([][]string, 0, len(lines))
	var widths []int
	for _, line := range lines {
		if line == "" {
			continue
		}
		cells := strings.Split(line, "\t")
		rows = append(rows, cells)
		for i, c := range cells[:len(cells)-1] {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], cellWidth(c))
		}
	}
	var out strings.Builder
	for _, cells := range rows {
		for i, c := range cells {
			out.WriteString(c)
			if i < len(cells)-1 {
				out.WriteString(strings.Repeat(" ", widths[i]-cellWidth(c)+columnGap))
			}
		}
	}
	_, err := io.WriteString(t.w, out.String())
	return err
}

// cellWidth is how many terminal cells s takes: two for East Asian wide and
// fullwidth characters, none for combining marks and other zero-width ones.
func cellWidth(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		case width.LookupRune(r).Kind() == width.EastAsianWide, width.LookupRune(r).Kind() == width.EastAsianFullwidth:
			n += 2
		default:
			n++
		}
	}
	return n
}
