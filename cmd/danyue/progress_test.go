package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/client"
)

// Issue 49: danyue progress records a position (and read time) for a FILE,
// keyed as danyue key keys it, or for a KEY, with no API call of one's own.
func TestProgressCommand(t *testing.T) {
	a := startDaemonProc(t, "desk")
	book := filepath.Join(t.TempDir(), "book.txt")
	text := strings.Repeat("话说天下大势，分久必合，合久必分。\n", 100) // 18 code units a line
	if err := os.WriteFile(book, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	keyed := runCLI(t, nil, "key", "--no-link", book)
	key := strings.Fields(keyed.stdout)[0]

	res := runCLI(t, nil, "progress", "--data", a.data, book, "--percent", "0.5", "--title", "三国演义", "--read", "5m")
	if res.code != 0 || !strings.Contains(res.stdout, "at char 899, 50.0%") || !strings.Contains(res.stdout, "read 5m0s") {
		t.Fatalf("progress of a file: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	c := client.New(daemon.DefaultSocket(a.data))
	defer c.Close()
	b, err := c.Book(context.Background(), key)
	if err != nil {
		t.Fatalf("the book under danyue key's key %s: %v", key, err)
	}
	if b.Title != "三国演义" || b.Position == nil || b.Position.Char != 899 || b.ReadTime.ThisDeviceMs != 300000 {
		t.Errorf("book after progress: %+v", b)
	}

	res = runCLI(t, nil, "progress", "--data", a.data, key, "--char", "1200", "--percent", "0.67")
	if res.code != 0 || !strings.Contains(res.stdout, "at char 1200, 67.0%") {
		t.Errorf("progress of a key: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{key, "--char", "3"}, "give both --char and --percent"},
		{[]string{book}, "needs --char or --percent"},
		{[]string{book, "--percent", "42"}, "for 42% write 0.42"},
		{[]string{book, "--char", "99999"}, "past the end of the text"},
		{[]string{book, "--read", "5"}, "write 5s"},
		{[]string{"nosuch.txt", "--percent", "0.1"}, "neither a file nor a key"},
	} {
		res := runCLI(t, nil, append([]string{"progress", "--data", a.data}, tc.args...)...)
		if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("progress %q: exit %d, stderr %q, want a usage error saying %q", tc.args, res.code, res.stderr, tc.want)
		}
	}
}
