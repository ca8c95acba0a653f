package testnet

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Collect: tombstone collection by causal stability. node1 reads a shelf of
// books, all three devices get them, and node1 deletes them while node3 is
// stopped: nothing is collected, and node1 names node3 as the device that
// holds collection back. Once node3 is back and has merged the deletes,
// every device collects them: each store's deleted books drop to 0. The
// report gives each store's records and size on disk before and after,
// and what the daemons logged they reclaimed (the space is on disk again
// once badger compacts).
func Collect(t TB, p Params, r *Report) {
	nt := p.newNet(t, 3)
	nodes := nt.Nodes()
	a, c := nt.Node(1), nt.Node(3)
	const n = 300
	keys := make([]string, n)
	for i := range keys {
		keys[i] = BookKey(fmt.Sprintf("collect %d", i))
		a.SetPosition(keys[i], int64(100*i+1), 0.1, fmt.Sprintf("Book %d, to be deleted", i))
	}
	WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, n, 0) })
	before := storeFigures(nodes)

	c.Stop()
	for _, k := range keys {
		a.Delete(k)
	}
	WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes[:2], 0, n) })
	WaitFor(t, syncTimeout, func() (bool, string) {
		h := holdingBack(t, a)
		return slices.Equal(h, []string{c.Name()}), fmt.Sprintf("node1 says %v hold collection back, want %s", h, c)
	})
	Hold(t, 5*time.Second, func() (bool, string) { return countsAre(nodes[:2], 0, n) })
	r.Note(t, "with %s offline nothing was collected: %d deleted books kept on node1 and node2, and node1 names %s as holding collection back", c, n, c)

	start := time.Now()
	c.Start()
	took := WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, 0, 0) })
	after := storeFigures(nodes)
	r.Note(t, "%s back: all three collected the %d deleted books %v after it started", c, n, took.Round(time.Millisecond))
	for i, nd := range nodes {
		r.Note(t, "%s store: %d records, %d KiB on disk before deleting; %d records, %d KiB after collection; the daemon logged %d books, %d bytes collected",
			nd, before[i].records, before[i].disk>>10, after[i].records, after[i].disk>>10, collectedBooks(nd), collectedBytes(nd))
	}
	if took := time.Since(start); took > healTimeout {
		t.Errorf("collection took %v", took)
	}
}

// countsAre reports whether every node shows books visible and deleted
// books on its shelf.
func countsAre(nodes []*Node, books, deleted int) (bool, string) {
	for _, nd := range nodes {
		got := nd.Status().Counts
		if got.Books != books || got.Deleted != deleted {
			return false, fmt.Sprintf("%s shows %d books and %d deleted, want %d and %d", nd, got.Books, got.Deleted, books, deleted)
		}
	}
	return true, ""
}

// holdingBack returns the names of the members nd says hold collection
// back.
func holdingBack(t TB, nd *Node) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := nd.Client().Devices(ctx)
	if err != nil {
		t.Fatalf("%s: devices: %v", nd, err)
	}
	var out []string
	for _, m := range list {
		if m.Collection != nil && m.Collection.Holding {
			out = append(out, m.Name)
		}
	}
	return out
}

type storeFigure struct {
	records int   // books on the shelf and deleted ones
	disk    int64 // bytes of the store's files
}

func storeFigures(nodes []*Node) []storeFigure {
	out := make([]storeFigure, len(nodes))
	for i, nd := range nodes {
		st := nd.Status().Counts
		out[i].records = st.Books + st.Deleted
		_ = filepath.WalkDir(filepath.Join(nd.DataDir(), "store"), func(_ string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				if info, err := e.Info(); err == nil {
					out[i].disk += info.Size()
				}
			}
			return nil
		})
	}
	return out
}

// collectedBooks and collectedBytes add up what nd's logs say it
// collected.
func collectedBooks(nd *Node) int { return int(sumLogged(nd, "books=")) }
func collectedBytes(nd *Node) int { return int(sumLogged(nd, "bytes=")) }

func sumLogged(nd *Node, field string) int64 {
	var sum int64
	for _, l := range nd.Logs() {
		if !strings.Contains(l, "collected deleted books") {
			continue
		}
		if i := strings.Index(l, " "+field); i >= 0 {
			var v int64
			if _, err := fmt.Sscanf(l[i+1+len(field):], "%d", &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}
