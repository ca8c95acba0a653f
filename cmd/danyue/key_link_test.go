package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// Issue 16: keying a file while the daemon runs links its KOReader
// document to the book, so `danyue books` lists KOReader's progress under
// the book's title (the file's name until the shelf has a title for it).
func TestKeyLinksKOReaderDocuments(t *testing.T) {
	addr := freePort(t)
	d := startDaemonProc(t, "nas", "--kosync", addr)
	if res := runCLIWith(t, nil, "pw\n", "kosync", "adduser", "alice", "--password-stdin", "--data", d.data); res.code != 0 {
		t.Fatalf("adduser: %q", res.stderr)
	}
	book := filepath.Join(t.TempDir(), "三体.txt")
	if err := os.WriteFile(book, []byte(strings.Repeat("汪淼觉得，来找他的这四个人是一个奇怪的组合。\n", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runCLIWith(t, nil, "", "key", "--json", book, "--data", d.data)
	var line keyLine
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &line) != nil {
		t.Fatalf("key: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stderr, "linked 1 KOReader document") {
		t.Errorf("key did not say it linked the document: %q", res.stderr)
	}
	push := `{"document":"` + line.KOReaderID + `","progress":"/body/p[3]","percentage":0.25,"device":"Kobo"}`
	if s := koreaderStatus(t, "PUT", "http://"+addr+"/syncs/progress", "alice", koreaderKey("pw"), push); s != http.StatusOK {
		t.Fatalf("push: %d", s)
	}
	var docs []api.KosyncProgress
	if res := d.cli(t, "books", "--kosync", "--json"); json.Unmarshal([]byte(res.stdout), &docs) != nil || len(docs) != 1 {
		t.Fatalf("books --kosync --json: %q", res.stdout)
	}
	if docs[0].BookKey != line.Key || docs[0].Title != "三体" {
		t.Errorf("the document is linked to %q %q, want %q %q", docs[0].BookKey, docs[0].Title, line.Key, "三体")
	}
	if res := d.cli(t, "books", "--kosync"); !strings.Contains(res.stdout, "三体") || strings.Contains(res.stdout, line.KOReaderID) {
		t.Errorf("books --kosync shows the id, not the title:\n%s", res.stdout)
	}
	// A title on the shelf wins over the file's name.
	c := client.New(daemon.DefaultSocket(d.data))
	defer c.Close()
	if _, err := c.SetPosition(t.Context(), line.Key, 10, 0.1, "The Three-Body Problem"); err != nil {
		t.Fatal(err)
	}
	if res := d.cli(t, "books", "--kosync"); !strings.Contains(res.stdout, "The Three-Body Problem") {
		t.Errorf("books --kosync does not show the shelf's title:\n%s", res.stdout)
	}
	// Without a daemon, keying says nothing about links.
	if res := runCLIWith(t, nil, "", "key", book, "--data", t.TempDir()); res.code != 0 || res.stderr != "" {
		t.Errorf("key without a daemon: exit %d, stderr %q", res.code, res.stderr)
	}
}
