package main

import (
	"strings"
	"testing"
)

// Columns line up on a terminal whatever script the cells are in: a CJK
// character takes two cells, a combining accent none.
func TestTableAlignsByCells(t *testing.T) {
	var b strings.Builder
	tw := newTable(&b)
	for _, row := range [][]string{
		{"TITLE", "AT", "KEY"},
		{"红楼梦", "12.5%", "md5:1"},
		{"Cafe\u0301 au lait", "3.0%", "md5:2"},
		{"ＡＢＣ", "100.0%", "md5:3"},
	} {
		tw.Write([]byte(strings.Join(row, "\t") + "\n"))
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines:\n%s", len(lines), b.String())
	}
	// Every row's last column starts at the same terminal cell.
	want := -1
	for _, line := range lines {
		at := cellWidth(line[:strings.LastIndex(line, "  ")+2])
		if want == -1 {
			want = at
		}
		if at != want {
			t.Errorf("last column of %q starts at cell %d, want %d:\n%s", line, at, want, b.String())
		}
	}
	for _, tc := range []struct {
		s    string
		want int
	}{{"abc", 3}, {"红楼梦", 6}, {"Cafe\u0301", 4}, {"ＡＢＣ", 6}, {"", 0}} {
		if got := cellWidth(tc.s); got != tc.want {
			t.Errorf("cellWidth(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}
