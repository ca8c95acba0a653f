package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon/api"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Dream of the Red Chamber", "Dream of the Red Chamber"},
		{"红楼梦\u3000第一回", "红楼梦\u3000第一回"},
		{"\x1b[2Jgone", `\x1b[2Jgone`},
		{"a\nb\tc\r", `a\nb\tc\r`},
		{"\x00\x7f", `\x00\x7f`},
		{"\u009b31m", `\u009b31m`},
		{"\u202eevil", `\u202eevil`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"\xed\xa0\x80", `\xed\xa0\x80`},
		{"\x1b]0;title\x07", `\x1b]0;title\a`},
	}
	for _, tt := range tests {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// What other devices wrote is escaped in every table the CLI prints: books,
// peers (also under status) and KOReader documents.
func TestTablesEscapeWhatOthersWrote(t *testing.T) {
	evil := "x\x1b[31m\u009b\ny"
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out}
	tw := newTable(e.stdout)
	b := api.Book{Key: "md5:0", Title: evil, Position: &api.Position{DeviceName: evil}}
	tw.Write([]byte(bookTitle(b) + "\t" + lastDevice(b) + "\n"))
	tw.Flush()
	if err := printPeers(e, []api.Peer{{Name: evil, Device: "d", ClockWarning: evil}}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.ContainsAny(s, "\x1b\u009b") || strings.Count(s, "\n") != 4 {
		t.Fatalf("output holds raw control characters or extra lines:\n%q", s)
	}
}
