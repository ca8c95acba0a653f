package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/client"
)

// A device alone whose WAL lost its tail in a crash says which books it
// lost (danyue status); a store missing its MANIFEST makes the daemon refuse
// with the file and the advice, and danyue repair moves the store aside,
// keeping the device.
func TestCLIDamageAndRepair(t *testing.T) {
	a := startDaemonProc(t, "solo")
	c := client.New(daemon.DefaultSocket(a.data))
	defer c.Close()
	ctx := context.Background()
	before, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const books = 30
	for i := range books {
		if _, err := c.SetPosition(ctx, fmt.Sprintf("md5:%032x", i+1), int64(i*10), 0.1, "Book"); err != nil {
			t.Fatal(err)
		}
	}
	// A crash, and the newest WAL loses the second half of what it held.
	_ = a.cmd.Process.Kill()
	<-a.done
	db := filepath.Join(a.data, "store", "db")
	mems, _ := filepath.Glob(filepath.Join(db, "*.mem"))
	slices.Sort(mems)
	data, err := os.ReadFile(mems[len(mems)-1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(mems[len(mems)-1], int64(len(bytes.TrimRight(data, "\x00"))/2)); err != nil {
		t.Fatal(err)
	}

	b := startDaemonProcAt(t, a.data, "solo")
	res := runCLI(t, nil, "status", "--data", a.data)
	last := fmt.Sprintf("lost: book md5:%032x", books)
	if res.code != 0 || !strings.Contains(res.stdout, "error: ") || !strings.Contains(res.stdout, last) {
		t.Fatalf("status after losing acknowledged writes: exit %d, want an error naming %q; stdout:\n%s", res.code, last, res.stdout)
	}
	b.stop(t)
	// Issue 49: a store that opens (its loss is being dealt with by the
	// peers) is not moved aside without --force.
	res = runCLI(t, nil, "repair", "--data", a.data)
	if res.code == 0 || !strings.Contains(res.stderr, "healthy") || !strings.Contains(res.stderr, "--force") {
		t.Fatalf("repair of a store that opens: exit %d, stdout %q, stderr %q; want a refusal naming --force", res.code, res.stdout, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(a.data, "store", "damaged")); err == nil {
		t.Fatal("repair moved a healthy store aside")
	}

	if err := os.Remove(filepath.Join(db, "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, nil, "daemon", "--data", a.data, "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0")
	if res.code != 1 || !strings.Contains(res.stderr, filepath.Join(db, "MANIFEST")) || !strings.Contains(res.stderr, "danyue repair") {
		t.Fatalf("daemon on a store without MANIFEST: exit %d, stderr %q", res.code, res.stderr)
	}
	res = runCLI(t, nil, "repair", "--data", a.data)
	if res.code != 0 || !strings.Contains(res.stdout, filepath.Join(a.data, "store", "damaged")) {
		t.Fatalf("repair: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	r := startDaemonProcAt(t, a.data, "") // no --name: it keeps its own
	if res := runCLI(t, nil, "repair", "--data", a.data); res.code != 1 || !strings.Contains(res.stderr, "another danyue daemon") {
		t.Errorf("repair with the daemon running: exit %d, stderr %q", res.code, res.stderr)
	}
	after, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Device.Name != "solo" {
		t.Errorf("after repair the device is named %q, want solo (its name, not the hostname)", after.Device.Name)
	}
	if after.Device.ID != before.Device.ID || after.Library.ID != before.Library.ID || after.Counts.Books != 0 || after.StoreLoss != nil {
		t.Errorf("after repair: device %s library %s, %d books, loss %v; want device %s library %s, a new empty store",
			after.Device.ID, after.Library.ID, after.Counts.Books, after.StoreLoss, before.Device.ID, before.Library.ID)
	}
	r.stop(t)
}
