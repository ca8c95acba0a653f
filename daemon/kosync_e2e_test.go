package daemon

import (
	"net/http"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
)

// Issue 8: two daemons of one library. An account created on A
// authenticates on B, and a KOReader device pushing to A and another
// pulling from B agree.
func TestKosyncTwoDaemons(t *testing.T) {
	a := startDaemon(t, withKosync(func(c *Config) { c.Name = "laptop" }))
	b := startDaemon(t, withKosync(func(c *Config) { c.Name = "nas" }))
	ctx := ctxT(t)
	joinLibrary(t, a, b)

	if _, err := a.client.KosyncAddUser(ctx, "alice", aliceKey); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to authenticate the account created on A", 10*time.Second, func() bool {
		status, _ := koreaderReq(t, b, "GET", "/users/auth", "alice", aliceKey, "")
		return status == http.StatusOK
	})
	if status, _ := koreaderReq(t, b, "GET", "/users/auth", "alice", "0123456789abcdef0123456789abcdef", ""); status != http.StatusUnauthorized {
		t.Fatalf("B accepted a wrong key: %d", status)
	}

	const xp = "/body/DocFragment[20]/body/p[22]/text().17"
	put := pushProgress(t, a, "alice", aliceKey, kobo, xp, 0.3242)
	var got map[string]any
	poll.Until(t, "B to serve the position pushed to A", 10*time.Second, func() bool {
		got = pullProgress(t, b, "alice", aliceKey, kobo)
		return got["progress"] == xp
	})
	if got["percentage"] != 0.3242 || got["device"] != "Kobo Libra 2" || got["document"] != kobo || got["timestamp"] != put["timestamp"] {
		t.Fatalf("B serves %v; A took the push at %v", got, put["timestamp"])
	}

	// And back: a push to B reaches A.
	pushProgress(t, b, "alice", aliceKey, kobo, "/body/DocFragment[21]/body/p[1]/text().0", 0)
	poll.Until(t, "A to serve the position pushed to B", 10*time.Second, func() bool {
		got = pullProgress(t, a, "alice", aliceKey, kobo)
		return got["progress"] == "/body/DocFragment[21]/body/p[1]/text().0" && got["percentage"] == 0.0
	})
	list, err := a.client.KosyncProgress(ctx)
	if err != nil || len(list) != 1 || list[0].DaemonName != "nas" {
		t.Fatalf("A lists %+v, %v; want the write B took", list, err)
	}
}

// Issue 8: the newest write wins by causal time, not by arrival. B, cut off
// from A (here: not yet in A's library) and with a clock an hour behind,
// holds an older position; when it joins, its write arrives at A after A's
// newer one, and A's stays on both.
func TestKosyncStaleWriteAfterPartition(t *testing.T) {
	a := startDaemon(t, withKosync(func(c *Config) { c.Name = "laptop" }))
	b := startDaemon(t, withKosync(func(c *Config) { c.Name = "phone"; c.ClockOffset = -time.Hour }))
	ctx := ctxT(t)
	for _, d := range []*testDaemon{a, b} {
		if _, err := d.client.KosyncAddUser(ctx, "alice", aliceKey); err != nil {
			t.Fatal(err)
		}
	}
	pushProgress(t, b, "alice", aliceKey, kobo, "page 10", 0.1)
	pushProgress(t, b, "alice", aliceKey, "only-on-b", "page 3", 0.03)
	pushProgress(t, a, "alice", aliceKey, kobo, "page 90", 0.9)

	joinLibrary(t, a, b)
	// Once A has B's other document, it has had all of B's records.
	poll.Until(t, "A to receive B's records", 10*time.Second, func() bool {
		return pullProgress(t, a, "alice", aliceKey, "only-on-b")["progress"] == "page 3"
	})
	poll.Until(t, "B to take A's newer position", 10*time.Second, func() bool {
		return pullProgress(t, b, "alice", aliceKey, kobo)["progress"] == "page 90"
	})
	if got := pullProgress(t, a, "alice", aliceKey, kobo)["progress"]; got != "page 90" {
		t.Fatalf("A serves %v after B's older write arrived; want page 90", got)
	}
	// Both accounts had the same key: whichever wins, it still opens both.
	for _, d := range []*testDaemon{a, b} {
		if status, _ := koreaderReq(t, d, "GET", "/users/auth", "alice", aliceKey, ""); status != http.StatusOK {
			t.Fatalf("%s: the merged account refuses its key", d.cfg.Name)
		}
	}
}

// joinLibrary puts b into a's library and waits until they are connected.
func joinLibrary(t *testing.T, a, b *testDaemon) {
	t.Helper()
	ctx := ctxT(t)
	code := mustDo(a.client.Invite(ctx))(t)
	mustDo(b.client.Join(ctx, code))(t)
	poll.Until(t, "the daemons to connect", 15*time.Second, func() bool {
		peers, err := a.client.Peers(ctx)
		return err == nil && len(peers) == 1 && peers[0].Connected
	})
}

// Issue 16: a link made on one device (B keyed the file) names the
// document on another (A, which took KOReader's push).
func TestKosyncLinkReachesOtherDevices(t *testing.T) {
	a := startDaemon(t, withKosync(func(c *Config) { c.Name = "nas" }))
	b := startDaemon(t, func(c *Config) { c.Name = "laptop" })
	ctx := ctxT(t)
	if _, err := a.client.KosyncAddUser(ctx, "alice", aliceKey); err != nil {
		t.Fatal(err)
	}
	pushProgress(t, a, "alice", aliceKey, kobo, "page 7", 0.07)
	joinLibrary(t, a, b)
	const key = "md5:9cc2ae8a1ba7a93da39b46fc1019c481"
	if err := b.client.KosyncLink(ctx, kobo, key, "Kobo book"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "A to name the document", 10*time.Second, func() bool {
		docs, err := a.client.KosyncProgress(ctx)
		return err == nil && len(docs) == 1 && docs[0].BookKey == key && docs[0].Title == "Kobo book"
	})
	// Bad links change nothing.
	for _, bad := range []struct{ doc, key string }{{kobo, "md5:xyz"}, {kobo, ""}, {"a\x00b", key}} {
		if err := b.client.KosyncLink(ctx, bad.doc, bad.key, ""); err == nil {
			t.Errorf("link %q -> %q accepted", bad.doc, bad.key)
		}
	}
}
