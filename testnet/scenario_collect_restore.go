package testnet

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// CollectRestore: a restored old copy after a purge. node3's data dir is
// copied while it is stopped, before node1 deletes a shelf of books; once
// all three devices have collected the deletes (no deleted book left),
// node3 is stopped and its old copy put back, with the books it held
// before they were deleted. None of them comes back: once node3 has met
// the others, no device shows any of them, node3 included, because the
// others answer its old records with the residues they kept of the
// collected books.
func CollectRestore(t TB, p Params, r *Report) {
	nt := New(t, 3)
	nodes := nt.Nodes()
	a, c := nt.Node(1), nt.Node(3)
	const n = 50
	keys := make([]string, n)
	for i := range keys {
		keys[i] = BookKey(fmt.Sprintf("collect-restore %d", i))
		a.SetPosition(keys[i], int64(100*i+1), 0.1, fmt.Sprintf("Book %d, to be deleted", i))
	}
	WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, n, 0) })

	backup := c.DataDir() + ".old"
	t.Cleanup(func() { _ = os.RemoveAll(backup) })
	c.Stop()
	copyDir(t, c.DataDir(), backup)
	c.Start()
	for _, k := range keys {
		a.Delete(k)
	}
	took := WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, 0, 0) })
	r.Note(t, "all three collected the %d deleted books %v after the deletes", n, took.Round(time.Millisecond))

	c.Stop()
	if err := os.RemoveAll(c.DataDir()); err != nil {
		t.Fatalf("%s: remove the data dir: %v", c, err)
	}
	copyDir(t, backup, c.DataDir())
	start := time.Now()
	c.Start()
	took = WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, 0, 0) })
	Hold(t, 5*time.Second, func() (bool, string) { return countsAre(nodes, 0, 0) })
	for _, nd := range nodes {
		if bks := nd.Books(); len(bks) != 0 {
			t.Errorf("%s shows %d books after the restore, first %q", nd, len(bks), bks[0].Title)
		}
	}
	r.Note(t, "%s restored from a copy made before the deletes: none of the %d books came back on any device; it learnt the deletes %v after it started (%v since)",
		c, n, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// copyDir copies the directory from to to, which must not exist, keeping
// modes and times.
func copyDir(t TB, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("copy %s to %s: %v: %s", from, to, err, out)
	}
}
