package testnet

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// RestoreWrites: a device restored from a copy of its whole data dir
// (journal and all, so its store cannot tell) writes more than it lost
// before it meets the others, and meets them one at a time. node3's copy
// is made while it is stopped; then it writes a shelf of books that
// everyone merges, so the others' cursors into node3 pass the copy's end.
// Cut off from the LAN, node3 is stopped, its copy put back and started,
// and it writes more books than it lost, at sequence numbers the others'
// cursors have passed, deletes some of them, and restarts. It meets node2
// alone, restarts again, then meets node1 alone: node1 must get every book
// from node3 itself, though node3 has sent its new changes to node2 since
// the copy. Once the LAN heals, every device must show every book and
// every delete, and collect the deletes.
func RestoreWrites(t TB, p Params, r *Report) {
	nt := New(t, 3)
	nodes := nt.Nodes()
	a, b, c := nt.Node(1), nt.Node(2), nt.Node(3)
	const lost, fresh, deleted = 100, 300, 20
	const all = lost + fresh - deleted

	backup := c.DataDir() + ".old"
	t.Cleanup(func() { _ = os.RemoveAll(backup) })
	// The copy is of a member that has met the others. One copied before
	// it met any (right after joining, say) is alone in its library, and
	// rightly collects its own deletes before anyone has them.
	WaitFor(t, healTimeout, func() (bool, string) { return knowsMembers(c, nodes) })
	c.Stop()
	copyDir(t, c.DataDir(), backup)
	c.Start()
	for i := range lost {
		c.SetPosition(BookKey(fmt.Sprintf("restore-writes lost %d", i)), int64(i+1), 0.1, fmt.Sprintf("Lost %d", i))
	}
	WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, lost, 0) })

	nt.Isolate(c)
	c.Stop()
	if err := os.RemoveAll(c.DataDir()); err != nil {
		t.Fatalf("%s: remove the data dir: %v", c, err)
	}
	copyDir(t, backup, c.DataDir())
	c.Start()
	for i := range fresh {
		c.SetPosition(BookKey(fmt.Sprintf("restore-writes fresh %d", i)), int64(i+1), 0.2, fmt.Sprintf("Fresh %d", i))
	}
	for i := range deleted {
		c.Delete(BookKey(fmt.Sprintf("restore-writes fresh %d", i)))
	}
	c.Restart() // what it wrote is from an earlier run when it meets the others

	nt.Isolate(a) // node3 meets node2 alone
	first := WaitFor(t, healTimeout, func() (bool, string) { return countsAre([]*Node{b, c}, all, deleted) })
	c.Restart()
	nt.Isolate(b) // then node1 alone, which can only learn node3's books from node3
	second := WaitFor(t, healTimeout, func() (bool, string) { return booksAre([]*Node{a, c}, all) })
	Hold(t, 3*time.Second, func() (bool, string) { return booksAre([]*Node{a, c}, all) })

	nt.Heal()
	took := WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, all, 0) })
	Hold(t, 3*time.Second, func() (bool, string) { return countsAre(nodes, all, 0) })
	r.Note(t, "%s, restored from a copy and writing %d books and %d deletes (more than the %d it lost), restarting, meeting %s alone (both had all %d books %v later), restarting again and meeting %s alone: %s had all %d books %v later; every device collected the deletes %v after the heal",
		c, fresh, deleted, lost, b, all, first.Round(time.Millisecond), a, a, all, second.Round(time.Millisecond), took.Round(time.Millisecond))
}

// knowsMembers reports whether nd lists every node as a member.
func knowsMembers(nd *Node, nodes []*Node) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := nd.Client().Devices(ctx)
	if err != nil {
		return false, fmt.Sprintf("%s: devices: %v", nd, err)
	}
	for _, other := range nodes {
		if !slices.ContainsFunc(list, func(m api.Member) bool { return m.ID == other.Device() && !m.Removed }) {
			return false, fmt.Sprintf("%s does not list %s as a member", nd, other)
		}
	}
	return true, ""
}

// booksAre reports whether each node shows that many books on its shelf.
func booksAre(nodes []*Node, books int) (bool, string) {
	for _, nd := range nodes {
		if got := nd.Status().Counts.Books; got != books {
			return false, fmt.Sprintf("%s shows %d books, want %d", nd, got, books)
		}
	}
	return true, ""
}
