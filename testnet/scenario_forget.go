package testnet

import (
	"context"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// ForgetOffline: three devices of one library on a LAN with mDNS. While
// node1 is stopped, node3 forgets node2 (`danyue forget`), which rotates
// the library secret. node1, back on the old secret, meets node3's node on
// that secret, is handed the new one without pairing again, and node1 and
// node3 sync both ways. node2 keeps the old secret: what it writes reaches
// nobody, and nothing reaches it; wiped and joined again with an invite
// code made before the forget (a new identity with its secret), it reaches
// nothing either.
func ForgetOffline(t TB, p Params, r *Report) {
	nt := New(t, 3)
	a, b, c := nt.Node(1), nt.Node(2), nt.Node(3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := c.CLI(ctx, "invite", "--long")
	if err != nil || res.Code != 0 {
		t.Fatalf("node3: danyue invite --long: %v, exit %d: %s", err, res.Code, res.Stderr)
	}
	oldCode := strings.TrimSpace(res.Stdout)

	a.Stop()
	res, err = c.CLI(ctx, "forget", b.Device())
	if err != nil || res.Code != 0 || !strings.Contains(res.Stdout, "secret has changed") {
		t.Fatalf("node3: danyue forget %s: %v, exit %d: %s%s", b.Device(), err, res.Code, res.Stdout, res.Stderr)
	}
	start := time.Now()
	a.Start()
	mine, theirs := BookKey("forget: node1's book"), BookKey("forget: node3's book")
	a.SetPosition(mine, 100, 0.1, "node1's book")
	c.SetPosition(theirs, 300, 0.3, "node3's book")
	has := func(b api.Book) bool { return b.Position != nil }
	took := nt.WaitBook(healTimeout, mine, "node1's book at node3", has, c)
	nt.WaitBook(healTimeout, theirs, "node3's book at node1", has, a)
	r.Healed(t, "a member offline during a forget, brought over to the new secret by mDNS", time.Since(start), 0)
	r.Note(t, "node1's first write after its restart reached node3 %v after node1 started", took.Round(time.Millisecond))

	// The forgotten device, and then a new identity with its secret.
	lost, copied := BookKey("forget: written by the forgotten device"), BookKey("forget: written by a copy")
	b.SetPosition(lost, 7, 0.01, "the forgotten device's book")
	b.Wipe()
	b.Start()
	logged := len(b.Logs())
	res, err = b.CLI(ctx, "join", oldCode)
	if err != nil || res.Code != 0 {
		t.Fatalf("node2: join with the old code: %v, exit %d: %s", err, res.Code, res.Stderr)
	}
	b.SetPosition(copied, 8, 0.01, "a copy's book")
	// It dials the old code's inviter (and whoever mDNS shows it), and is
	// refused at the handshake: it has a superseded secret.
	WaitFor(t, time.Minute, func() (bool, string) {
		for _, p := range b.Peers() {
			if p.Connected {
				return false, "node2 is connected to " + p.Device
			}
		}
		for _, l := range b.Logs()[logged:] {
			if strings.Contains(l, "handshake failed") {
				return true, ""
			}
		}
		return false, "node2 has not been refused at a handshake yet"
	})
	for _, n := range []*Node{a, c} {
		for _, bk := range n.Books() {
			if bk.Key == lost || bk.Key == copied {
				t.Errorf("%s received %q from the forgotten device or its copy", n, bk.Title)
			}
		}
	}
	for _, bk := range b.Books() {
		if bk.Key == mine || bk.Key == theirs {
			t.Errorf("the copy of the forgotten device received %q", bk.Title)
		}
	}
	r.Note(t, "the forgotten device's copy, joined with an invite code made before the forget, reached nobody")
	r.Moved(t, 3, nt.Traffic())
}
