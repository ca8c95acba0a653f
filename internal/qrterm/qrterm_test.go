package qrterm

import (
	"strings"
	"testing"

	qrcode "github.com/skip2/go-qrcode"
)

// unrender reads Render's output back into a module matrix (true = dark)
// of the given height.
func unrender(t *testing.T, s string, height int) [][]bool {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if want := (height + 1) / 2; len(lines) != want {
		t.Fatalf("%d lines, want %d for %d module rows", len(lines), want, height)
	}
	m := make([][]bool, 0, height)
	for _, line := range lines {
		top, bottom := []bool{}, []bool{}
		for _, r := range line {
			switch r {
			case both:
				top, bottom = append(top, false), append(bottom, false)
			case upper:
				top, bottom = append(top, false), append(bottom, true)
			case lower:
				top, bottom = append(top, true), append(bottom, false)
			case none:
				top, bottom = append(top, true), append(bottom, true)
			default:
				t.Fatalf("unexpected rune %q", r)
			}
		}
		m = append(m, top)
		if len(m) < height {
			m = append(m, bottom)
		} else if strings.ContainsRune(line, lower) || strings.ContainsRune(line, both) {
			t.Fatalf("last line draws below the code: %q", line)
		}
	}
	return m
}

func TestRender(t *testing.T) {
	for _, content := range []string{"7-crossover-clockwork", "danyue:pair/42-yucatan-zulu", strings.Repeat("x", 300)} {
		q, err := qrcode.New(content, qrcode.Medium)
		if err != nil {
			t.Fatal(err)
		}
		want := q.Bitmap()
		// Size: 17 + 4*version modules and a quiet zone of 4 on each side.
		n := 17 + 4*q.VersionNumber + 2*4
		if len(want) != n {
			t.Fatalf("%q: library bitmap %d rows, want %d", content, len(want), n)
		}
		s, err := Render(content)
		if err != nil {
			t.Fatal(err)
		}
		got := unrender(t, s, n)
		for y := range n {
			if len(got[y]) != n {
				t.Fatalf("%q: row %d has %d modules, want %d", content, y, len(got[y]), n)
			}
			for x := range n {
				quiet := x < 4 || y < 4 || x >= n-4 || y >= n-4
				if quiet && got[y][x] {
					t.Fatalf("%q: dark module (%d,%d) in the quiet zone", content, x, y)
				}
				if got[y][x] != want[y][x] {
					t.Fatalf("%q: module (%d,%d) = %v, library says %v", content, x, y, got[y][x], want[y][x])
				}
			}
		}
		// The finder pattern's corner, just inside the quiet zone, is dark.
		if !got[4][4] {
			t.Errorf("%q: no finder pattern at (4,4)", content)
		}
	}
}

func TestRenderTooLong(t *testing.T) {
	if _, err := Render(strings.Repeat("x", 5000)); err == nil {
		t.Error("Render accepted content no QR code can hold")
	}
}
