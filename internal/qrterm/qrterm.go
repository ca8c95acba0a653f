// Package qrterm draws a QR code in a terminal with Unicode half blocks, so
// that `danyue invite` can show its code to a phone's camera.
package qrterm

import (
	"fmt"
	"strings"

	qrcode "github.com/skip2/go-qrcode"
)

// Half blocks draw two module rows per line of text: the upper half of a
// character cell is one row, the lower half the next.
const (
	both  = '█'
	upper = '▀'
	lower = '▄'
	none  = ' '
)

// Matrix returns the modules of content's QR code at recovery level M,
// quiet zone included: m[y][x] is true for a dark module.
func Matrix(content string) ([][]bool, error) {
	q, err := qrcode.New(content, qrcode.Medium)
	if err != nil {
		return nil, fmt.Errorf("qr code: %w", err)
	}
	return q.Bitmap(), nil
}

// Render returns content as a QR code, one string of lines ending in '\n'.
// It draws the light modules and leaves the dark ones blank, as `qrencode -t
// UTF8` does: on the usual terminal, light text on a dark background, the
// code then shows dark on light, the right way round, and its quiet zone is
// drawn too. Phone cameras also read the inverse, so a light-background
// terminal still works with most of them.
func Render(content string) (string, error) {
	m, err := Matrix(content)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for y := 0; y < len(m); y += 2 {
		for x := range m[y] {
			top := !m[y][x]
			// Below the last row is the terminal's own background: dark.
			bottom := y+1 < len(m) && !m[y+1][x]
			switch {
			case top && bottom:
				b.WriteRune(both)
			case top:
				b.WriteRune(upper)
			case bottom:
				b.WriteRune(lower)
			default:
				b.WriteRune(none)
			}
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}
