package testnet

import (
	"bytes"
	"context"
	"encoding/base32"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// ForgetRejoin: a forgotten device's way back through a member that was
// offline during the forget (issue 47), on a LAN with mDNS. node1, node2
// and node3 are one library; node1 and node2 each make a long invite code;
// node3 stops; node1 forgets node2, which rotates the secret, and writes a
// book. Two new devices join, node4 with node1's code and node5 with node2's
// (the forgotten device redeems its own code, as a thief holding it would).
// node1 refuses them. Then node3 starts, meets them on the old secret
// before it meets node1, and is brought over to the new secret. Neither
// newcomer ever reads the book written after the forget, holds the current
// secret, or is listed as a member by node1 or node3.
func ForgetRejoin(t TB, p Params, r *Report) { forgetRejoin(t, r, New(t, 3)) }

// ForgetRejoinStatic is ForgetRejoin on in-process daemons that find each
// other only as static peers: node3 is given the newcomers' addresses when
// it starts, as a user who typed them would.
func ForgetRejoinStatic(t TB, p Params, r *Report) { forgetRejoin(t, r, NewLocal(t, 3)) }

// rejoinHold is how long the newcomers are watched once node3 has been
// brought over: long past the 2 s in which the attack used to succeed.
const rejoinHold = 15 * time.Second

func forgetRejoin(t TB, r *Report, nt *Net) {
	a, b, c := nt.Node(1), nt.Node(2), nt.Node(3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	codeA, codeB := longCode(ctx, t, a), longCode(ctx, t, b)

	c.Stop()
	if _, err := a.Client().Forget(ctx, b.Device()); err != nil {
		t.Fatalf("node1: forget node2: %v", err)
	}
	after := BookKey("rejoin: written after the forget")
	a.SetPosition(after, 42, 0.42, "written after the forget")

	x, y := nt.AddNode("node4"), nt.AddNode("node5")
	for _, j := range []struct {
		n    *Node
		code string
	}{{x, codeA}, {y, codeB}} {
		if _, err := j.n.Client().Join(ctx, j.code); err != nil {
			t.Logf("%s: join with a code made before the forget: %v", j.n, err)
		}
	}
	// node1 refuses node4 at the handshake: its code's secret is superseded.
	inviter := peerID(a)
	WaitFor(t, time.Minute, func() (bool, string) {
		for _, l := range x.Logs() {
			if strings.Contains(l, inviter) && (strings.Contains(l, "handshake failed") || strings.Contains(l, "unreachable")) {
				return true, ""
			}
		}
		return false, "node4 has not failed to reach node1 yet"
	})

	c.Start()
	start := time.Now()
	has := func(b api.Book) bool { return b.Position != nil }
	nt.WaitBook(healTimeout, after, "the book written after the forget, at node3", has, c)
	r.Healed(t, "the member offline during the forget, back on the new secret with newcomers on the old one about", time.Since(start), 0)

	current := longCode(ctx, t, a)
	breaches := watchNewcomers(ctx, []*Node{x, y}, []*Node{a, c}, after, current, start, rejoinHold)
	if len(breaches) > 0 {
		t.Fatalf("the forgotten device's way back is open:\n%s", strings.Join(breaches, "\n"))
	}
	r.Note(t, "for %v after node3 was back, neither newcomer (codes made by node1 and by the forgotten node2) read what was written after the forget, held the current secret or was listed as a member", rejoinHold)
}

// watchNewcomers watches, for d, whether any of the newcomers reads the
// book after, holds the secret that the code current carries, or is listed
// as a member by any of members, and returns each breach the first time it
// is seen, timed from start.
func watchNewcomers(ctx context.Context, newcomers, members []*Node, after, current string, start time.Time, d time.Duration) []string {
	var out []string
	seen := map[string]bool{}
	breach := func(key, format string, args ...any) {
		if !seen[key] {
			seen[key] = true
			out = append(out, fmt.Sprintf(format, args...)+fmt.Sprintf(", %v after node3 started", time.Since(start).Round(time.Millisecond)))
		}
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, n := range newcomers {
			if got, err := n.Client().Book(ctx, after); err == nil && got.Position != nil {
				breach(n.name+" read", "%s read the book written after the forget", n)
			}
			if code, err := n.Client().Invite(ctx); err == nil && sameSecret(code, current) {
				breach(n.name+" secret", "%s holds the library's current secret", n)
			}
			for _, m := range members {
				if listedAsMember(ctx, m, n.Device()) {
					breach(n.name+" listed "+m.name, "%s lists %s as a member", m, n)
				}
			}
		}
		time.Sleep(10 * pollEvery)
	}
	return out
}

// peerID returns n's libp2p peer id, from the addresses it listens on.
func peerID(n *Node) string {
	for _, a := range n.Status().Addresses {
		if _, id, ok := strings.Cut(a, "/p2p/"); ok {
			return id
		}
	}
	return ""
}

// longCode makes a long invite code on n.
func longCode(ctx context.Context, t TB, n *Node) string {
	t.Helper()
	code, err := n.Client().Invite(ctx)
	if err != nil {
		t.Fatalf("%s: invite: %v", n, err)
	}
	return code
}

// listedAsMember reports whether n's /v1/devices lists device id as a
// member it has not forgotten.
func listedAsMember(ctx context.Context, n *Node, id string) bool {
	list, err := n.Client().Devices(ctx)
	if err != nil {
		return false
	}
	for _, m := range list {
		if m.ID == id && m.Member {
			return true
		}
	}
	return false
}

// sameSecret reports whether two long invite codes carry the same library
// secret. The code (peer/invite.go) is "danyue1-" and the base32 of the
// library id (16 bytes) and secret (32 bytes), then the rest.
func sameSecret(a, b string) bool {
	secret := func(code string) []byte {
		body, ok := strings.CutPrefix(strings.TrimSpace(code), "danyue1-")
		if !ok {
			return nil
		}
		raw, err := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding).DecodeString(body)
		if err != nil || len(raw) < 48 {
			return nil
		}
		return raw[16:48]
	}
	sa := secret(a)
	return sa != nil && bytes.Equal(sa, secret(b))
}
