package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
)

// holdsAll reports whether the daemon of p knows that device name holds
// all of p's changes: with no undo window, p's deleted books would go.
func holdsAll(t *testing.T, p *daemonProc, name string) bool {
	t.Helper()
	var devices []api.Member
	res := p.cli(t, "devices", "--json")
	if err := json.Unmarshal([]byte(res.stdout), &devices); err != nil {
		t.Fatalf("devices --json: %v\n%s%s", err, res.stdout, res.stderr)
	}
	for _, d := range devices {
		if d.Name == name {
			c := d.Collection
			return c != nil && c.Summary && !c.Holding && c.Behind == 0
		}
	}
	return false
}

// Issue 49: a book deleted 10 minutes ago, with both devices online and
// holding the delete, is listed by books --deleted with the end of its
// undo window and comes back on both with danyue restore. The desk's clock
// runs 10 minutes behind the pocket's, so that its delete is 10 minutes
// old for the pocket that restores it.
func TestCLIRestoreTenMinutesLater(t *testing.T) {
	t.Setenv("DANYUE_CLOCK_OFFSET", "-10m")
	a := startDaemonProc(t, "desk")
	t.Setenv("DANYUE_CLOCK_OFFSET", "")
	b := startDaemonProc(t, "pocket")
	code := strings.TrimSpace(a.cli(t, "invite").stdout)
	if res := b.cli(t, "join", code); res.code != 0 {
		t.Fatalf("join: exit %d, %s", res.code, res.stderr)
	}
	const key = "md5:900150983cd24fb0d6963f7d28e17f72"
	ca := client.New(daemon.DefaultSocket(a.data))
	defer ca.Close()
	ctx := context.Background()
	if res := a.cli(t, "progress", key, "--char", "500", "--percent", "0.25", "--title", "The Story of the Stone"); res.code != 0 {
		t.Fatalf("progress: exit %d, %s", res.code, res.stderr)
	}
	if _, err := ca.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "both to hold the delete, and know the other does", time.Minute, func() bool {
		return strings.Contains(b.cli(t, "books", "--deleted").stdout, "[deleted") && holdsAll(t, a, "pocket") && holdsAll(t, b, "desk")
	})
	res := b.cli(t, "books", "--deleted")
	until := func(ago time.Duration) string {
		return "restorable until " + time.Now().Add(daemon.DefaultKeepDeleted-ago).Local().Format(time.DateOnly)
	}
	if !strings.Contains(res.stdout, until(10*time.Minute)) && !strings.Contains(res.stdout, until(11*time.Minute)) || !strings.Contains(res.stdout, key) {
		t.Fatalf("books --deleted lacks %q or the key:\n%s", until(10*time.Minute), res.stdout)
	}
	res = b.cli(t, "restore", key)
	if res.code != 0 || !strings.Contains(res.stdout, "Back on the shelf") || !strings.Contains(res.stdout, "at char 500") {
		t.Fatalf("restore: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	poll.Until(t, "the desk to have the book back", time.Minute, func() bool {
		bk, err := ca.Book(ctx, key)
		return err == nil && !bk.Deleted && bk.Position != nil && bk.Position.Char == 500
	})
	if res := b.cli(t, "restore", key); res.code != 0 || !strings.Contains(res.stdout, "Already on the shelf") {
		t.Errorf("restore of a book on the shelf: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if res := b.cli(t, "restore", "md5:00000000000000000000000000000001"); res.code == 0 || !strings.Contains(res.stderr, "no book") {
		t.Errorf("restore of an unknown book: exit %d, %q", res.code, res.stderr)
	}
	if res := b.cli(t, "restore", "Stone"); res.code != 2 || !strings.Contains(res.stderr, "not a key") {
		t.Errorf("restore of a title: exit %d, %q", res.code, res.stderr)
	}
}
