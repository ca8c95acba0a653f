package testnet

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Collect: tombstone collection by causal stability. node1 reads a shelf of
// books, all three devices get them, and node1 deletes most of them while
// node3 is stopped: nothing is collected, and node1 names node3 as the
// device that holds collection back. Once node3 is back and has merged the
// deletes, every device collects them: each store's deleted books drop to
// 0. Each device is restarted before the deletes and after collection, so
// that its store has flushed and compacted what it holds (the store
// compacts level 0 when it closes, as it does when idle); the report gives
// each store's records, the bytes of its tables and of all its files (the
// logs are preallocated, so they do not shrink) before and after, and
// what the daemons logged they collected.
func Collect(t TB, p Params, r *Report) {
	nt := p.newNet(t, 3)
	nodes := nt.Nodes()
	a, c := nt.Node(1), nt.Node(3)
	n := cmp.Or(p.CollectBooks, 5000)
	kept := n / 10
	keys := make([]string, n)
	for i := range keys {
		keys[i] = BookKey(fmt.Sprintf("collect %d", i))
		a.SetPosition(keys[i], int64(100*i+1), 0.1, fmt.Sprintf("Book %d, to be deleted", i))
	}
	WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, n, 0) })
	before := settledFigures(t, nodes)

	c.Stop()
	for _, k := range keys[kept:] {
		a.Delete(k)
	}
	gone := n - kept
	WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes[:2], kept, gone) })
	WaitFor(t, syncTimeout, func() (bool, string) {
		h := holdingBack(t, a)
		return slices.Equal(h, []string{c.Name()}), fmt.Sprintf("node1 says %v hold collection back, want %s", h, c)
	})
	Hold(t, 5*time.Second, func() (bool, string) { return countsAre(nodes[:2], kept, gone) })
	r.Note(t, "with %s offline nothing was collected: %d deleted books kept on node1 and node2, and node1 names %s as holding collection back", c, gone, c)

	start := time.Now()
	c.Start()
	took := WaitFor(t, healTimeout, func() (bool, string) { return countsAre(nodes, kept, 0) })
	if took := time.Since(start); took > healTimeout {
		t.Errorf("collection took %v", took)
	}
	r.Note(t, "%s back: all three collected the %d deleted books %v after it started", c, gone, took.Round(time.Millisecond))
	after := settledFigures(t, nodes)
	for i, nd := range nodes {
		b, f := before[i], after[i]
		r.Note(t, "%s store: %d -> %d records, tables %d -> %d bytes, all files %d -> %d KiB; the daemon logged %d books, %d bytes collected",
			nd, b.records, f.records, b.tables, f.tables, b.disk>>10, f.disk>>10, collectedBooks(nd), collectedBytes(nd))
		if f.tables >= b.tables {
			t.Errorf("%s: the store's tables did not shrink after collecting %d of %d books: %d -> %d bytes", nd, gone, n, b.tables, f.tables)
		}
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
	tables  int64 // bytes of the store's tables (.sst)
	disk    int64 // bytes of all the store's files
}

// settledFigures restarts each node, so that its store flushes and
// compacts what it holds, and returns the figures of its store.
func settledFigures(t TB, nodes []*Node) []storeFigure {
	t.Helper()
	for _, nd := range nodes {
		nd.Restart()
	}
	return storeFigures(nodes)
}

func storeFigures(nodes []*Node) []storeFigure {
	out := make([]storeFigure, len(nodes))
	for i, nd := range nodes {
		st := nd.Status().Counts
		out[i].records = st.Books + st.Deleted
		_ = filepath.WalkDir(filepath.Join(nd.DataDir(), "store"), func(path string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				if info, err := e.Info(); err == nil {
					out[i].disk += info.Size()
					if filepath.Ext(path) == ".sst" {
						out[i].tables += info.Size()
					}
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
