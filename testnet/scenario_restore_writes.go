package testnet

import (
	"fmt"
	"os"
	"time"
)

// RestoreWrites: a device restored from a copy of its whole data dir
// (journal and all, so its store cannot tell) writes more than it lost
// before it meets the others. node3's copy is made while it is stopped;
// then it writes a shelf of books that everyone merges, so the others'
// cursors into node3 pass the copy's end. Cut off from the LAN, node3 is
// stopped, its copy put back and started, and it writes more books than it
// lost, at sequence numbers the others' cursors have passed, deletes some
// of them, and restarts. Once the LAN heals, every device must show every book and
// every delete, and collect the deletes: the others find node3 behind
// their cursors and pull all of it again.
func RestoreWrites(t TB, p Params, r *Report) {
	nt := New(t, 3)
	nodes := nt.Nodes()
	c := nt.Node(3)
	const lost, fresh, deleted = 100, 300, 20

	backup := c.DataDir() + ".old"
	t.Cleanup(func() { _ = os.RemoveAll(backup) })
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
	nt.Heal()
	took := WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, lost+fresh-deleted, 0) })
	Hold(t, 3*time.Second, func() (bool, string) { return countsAre(nodes, lost+fresh-deleted, 0) })
	r.Note(t, "%s, restored from a copy and writing %d books and %d deletes (more than the %d it lost) and restarting before it met the others: every device shows all %d books and collected the deletes %v after the heal",
		c, fresh, deleted, lost, lost+fresh-deleted, took.Round(time.Millisecond))
}
