package testnet

import (
	"context"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// Members find each other wherever they have met before: the scenarios of
// the address book (peer/addrbook.go), on in-process nodes without mDNS and
// without static peers, so that a node knows another only from an invite
// code and from what the members tell it.

// meetTimeout bounds how long two members that know each other's address
// may take to connect: a dial, or a redial after the keeper's backoff.
const meetTimeout = 15 * time.Second

// ChainMesh: node1 invites node2, node2 invites node3. node1 and node3 never
// saw each other's invite code, yet connect directly: node2 tells each
// where the other is. A write of node3 then reaches node1 with node2 down.
func ChainMesh(t TB, p Params, r *Report) {
	nt := NewLocal(t, 3, NoJoin(), NoStaticPeers())
	a, b, c := nt.Node(1), nt.Node(2), nt.Node(3)
	nt.Join(b, a)
	nt.WaitConnected(meetTimeout, a, b)
	nt.Join(c, b)
	took := nt.WaitConnected(meetTimeout, a, b, c)
	// Not Discovered: that section is about mDNS.
	r.Note(t, "a chain of three devices (1 invited 2, 2 invited 3, no mDNS, no --peer) connected as a mesh %v after the third joined", took.Round(time.Millisecond))

	b.Stop()
	key := BookKey("chain-mesh: written by node3 with node2 down")
	c.SetPosition(key, 7, 0.07, "chain mesh")
	nt.WaitBook(syncTimeout, key, "node3's write at node1, node2 down", func(bk api.Book) bool { return bk.Position != nil }, a)
	r.Note(t, "node1 and node3, paired through node2 only, synced directly with node2 down")
}

// RestartMeet: two members each restart while the other is down, and meet
// again with no --peer and no mDNS, from the addresses they remember; then
// `danyue sync --once` on one of them, its daemon stopped, reaches the
// other from the addresses it remembers.
func RestartMeet(t TB, p Params, r *Report) {
	nt := NewLocal(t, 2, NoJoin(), NoStaticPeers())
	a, b := nt.Node(1), nt.Node(2)
	nt.Join(b, a)
	nt.WaitConnected(meetTimeout, a, b)

	for _, order := range [][2]*Node{{a, b}, {b, a}} {
		first, second := order[0], order[1]
		// Both down; the first comes back while the second is away, then
		// the second comes back.
		first.Stop()
		second.Stop()
		first.Start()
		second.Start()
		took := nt.WaitConnected(meetTimeout, a, b)
		r.Note(t, "%s restarted while %s was down, then %s came back (no --peer, no mDNS): connected %v after its start", first, second, second, took.Round(time.Millisecond))
	}

	if _, err := Binary(); err != nil { // built once, outside the measure
		t.Fatalf("testnet: %v", err)
	}
	b.Stop()
	key := BookKey("restart-meet: written while node2 is down")
	a.SetPosition(key, 11, 0.11, "restart meet")
	ctx, cancel := context.WithTimeout(context.Background(), 2*meetTimeout)
	defer cancel()
	start := time.Now()
	res, err := b.CLI(ctx, "sync", "--once", "--no-mdns", "--timeout", meetTimeout.String())
	if err != nil {
		t.Fatalf("node2: sync --once: %v", err)
	}
	if res.Code != 0 {
		t.Fatalf("node2: sync --once (no --peer) exited %d:\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	r.Healed(t, "sync --once with no --peer, from the remembered addresses", time.Since(start), 0)
	b.Start()
	got := b.Book(key)
	if got.Position == nil {
		t.Fatalf("node2 lacks node1's write after sync --once: %s", strings.TrimSpace(res.Stdout))
	}
}
