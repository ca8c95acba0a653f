package testnet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

const (
	year   = 8760 * time.Hour
	day    = 24 * time.Hour
	minute = int64(time.Minute / time.Millisecond)
)

// ClockSkew: node2's clock is a year ahead, node3's a day behind. A position
// set after a node has seen the skewed node's write wins everywhere, even on
// the node a day behind; every node reports the others' offsets.
func ClockSkew(t TB, p Params, r *Report) {
	nt := p.newNet(t, 3, ClockOffset(2, year), ClockOffset(3, -day))
	normal, ahead, behind := nt.Node(1), nt.Node(2), nt.Node(3)
	key := BookKey("clock skew")
	var last api.Book
	for i, w := range []*Node{ahead, behind, normal} {
		b := w.SetPosition(key, int64(1000*(i+1)), 0.1*float64(i+1), "")
		if i > 0 && b.Position.Stamp <= last.Position.Stamp {
			t.Fatalf("%s wrote after seeing %s's write, but its stamp %s does not order after %s",
				w.name, last.Position.DeviceName, b.Position.Stamp, last.Position.Stamp)
		}
		nt.WaitBook(syncTimeout, key, fmt.Sprintf("showing %s's position", w.name), func(got api.Book) bool {
			return got.Position != nil && got.Position.Stamp == b.Position.Stamp && got.Position.Char == b.Position.Char
		})
		last = b
	}
	// Offsets, as status reports them on the node with the right clock
	// (through the CLI, as a user would see them) and on the others.
	res, err := normal.CLI(context.Background(), "status", "--json")
	if err != nil || res.Code != 0 {
		t.Fatalf("node1: danyue status --json: %v, exit %d: %s", err, res.Code, res.Stderr)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("node1: danyue status --json: %v: %s", err, res.Stdout)
	}
	checkOffset(t, r, normal, st.Peers, ahead, year)
	checkOffset(t, r, normal, st.Peers, behind, -day)
	checkOffset(t, r, behind, behind.Status().Peers, ahead, year+day)
	checkOffset(t, r, ahead, ahead.Status().Peers, normal, -year)
	if res, _ := normal.CLI(context.Background(), "status"); !strings.Contains(res.Stdout, "warning:") {
		t.Errorf("node1: danyue status shows no clock warning:\n%s", res.Stdout)
	}
	r.Moved(t, 3, nt.Traffic())
}

// checkOffset checks that on reports peer's clock about want off its own,
// with a warning.
func checkOffset(t TB, r *Report, on *Node, peers []api.Peer, peer *Node, want time.Duration) {
	t.Helper()
	for _, p := range peers {
		if p.Device != peer.Device() {
			continue
		}
		got := time.Duration(p.ClockOffsetMs) * time.Millisecond
		if (got-want).Abs() > time.Minute || p.ClockWarning == "" {
			t.Errorf("%s reports %s's clock offset as %v (warning %q), want about %v with a warning", on.name, peer.name, got, p.ClockWarning, want)
			return
		}
		r.Note(t, "%s sees %s's clock %v off (%v expected): %q", on.name, peer.name, got, want, p.ClockWarning)
		return
	}
	t.Errorf("%s does not list %s: %s", on.name, peer.name, describePeers(peers))
}

// Crash: node2 is killed with SIGKILL in the middle of a burst of writes.
// Every write its API acknowledged before the kill is there after the
// restart, on node2 and on the others.
func Crash(t TB, p Params, r *Report) {
	nt := New(t, 3)
	victim := nt.Node(2)
	shared := BookKey("crash: read time")
	var (
		mu       sync.Mutex
		acked    []int64 // books "crash i" whose position write was acknowledged
		readMs   int64   // read time acknowledged on shared
		inflight atomic.Int64
		count    atomic.Int64
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := victim.Client()
	var wg sync.WaitGroup
	const writers = 4
	for w := range writers {
		wg.Go(func() {
			for i := int64(w); ctx.Err() == nil; i += writers {
				var err error
				inflight.Add(1)
				if w == 0 && i%3 == 0 {
					_, err = c.AddReadTime(ctx, shared, 1000, "")
				} else {
					_, err = c.SetPosition(ctx, BookKey(fmt.Sprintf("crash %d", i)), i+1, 0.5, "")
				}
				inflight.Add(-1)
				if err != nil {
					return // the daemon is gone
				}
				mu.Lock()
				if w == 0 && i%3 == 0 {
					readMs += 1000
				} else {
					acked = append(acked, i)
				}
				mu.Unlock()
				count.Add(1)
			}
		})
	}
	WaitFor(t, 30*time.Second, func() (bool, string) {
		return count.Load() >= 300, fmt.Sprintf("only %d writes acknowledged", count.Load())
	})
	flying := inflight.Load()
	victim.Kill()
	wg.Wait()
	mu.Lock()
	ackedKeys, ackedMs := append([]int64(nil), acked...), readMs
	mu.Unlock()
	r.Note(t, "killed node2 after %d acknowledged writes, %d in flight", len(ackedKeys)+int(ackedMs/1000), flying)

	victim.Start()
	for _, n := range nt.Nodes() {
		WaitFor(t, syncTimeout, func() (bool, string) { return hasAcked(n, ackedKeys, shared, victim.Device(), ackedMs) })
	}
	r.Moved(t, 3, nt.Traffic())
}

// hasAcked reports whether n has every acknowledged write of Crash.
func hasAcked(n *Node, keys []int64, shared, victim string, readMs int64) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	books, err := n.Client().Books(ctx, true)
	if err != nil {
		return false, fmt.Sprintf("%s: books: %v", n.name, err)
	}
	have := map[string]api.Book{}
	for _, b := range books {
		have[b.Key] = b
	}
	var missing []string
	for _, i := range keys {
		b, ok := have[BookKey(fmt.Sprintf("crash %d", i))]
		if !ok || b.Position == nil || b.Position.Char != uint64(i+1) {
			missing = append(missing, fmt.Sprint(i))
		}
	}
	if len(missing) > 0 {
		return false, fmt.Sprintf("%s misses %d acknowledged position writes: books %s", n.name, len(missing), strings.Join(missing, " "))
	}
	if got := have[shared].ReadTime.ByDevice[victim]; got < uint64(readMs) {
		return false, fmt.Sprintf("%s shows %d ms of node2's read time, %d were acknowledged", n.name, got, readMs)
	}
	return true, ""
}

// Wipe: node3's data dir is wiped; the new device it starts as joins with an
// invite and gets the whole library back.
func Wipe(t TB, p Params, r *Report) {
	nt := p.newNet(t, 3)
	nodes := nt.Nodes()
	for i := range 30 {
		n, key := nodes[i%3], BookKey(fmt.Sprintf("wipe %d", i%10))
		switch i % 5 {
		case 0, 1, 2:
			n.SetPosition(key, int64(100*i), float64(i)/30, fmt.Sprintf("Book %d", i%10))
		case 3:
			n.AddReadTime(key, int64(i+1)*minute)
		case 4:
			n.TryDelete(key) // a book this node has not seen yet stays unknown
		}
	}
	_, before := nt.WaitConverged(syncTimeout)
	victim := nt.Node(3)
	old := victim.Device()
	victim.Wipe()
	victim.Start()
	if victim.Device() == old {
		t.Fatalf("node3 kept its device id %s after a wipe", old)
	}
	if books := victim.Books(); len(books) != 0 {
		t.Fatalf("node3 has %d books after a wipe", len(books))
	}
	// As a user would: `danyue invite` on node1, `danyue join CODE` on node3.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inv, err := nt.Node(1).CLI(ctx, "invite")
	if err != nil || inv.Code != 0 {
		t.Fatalf("node1: danyue invite: %v, exit %d: %s", err, inv.Code, inv.Stderr)
	}
	joinStart := time.Now()
	joined, err := victim.CLI(ctx, "join", strings.TrimSpace(inv.Stdout))
	if err != nil || joined.Code != 0 || !strings.Contains(joined.Stdout, "Joined library") {
		t.Fatalf("node3: danyue join: %v, exit %d: %s%s", err, joined.Code, joined.Stdout, joined.Stderr)
	}
	_, after := nt.WaitConverged(healTimeout)
	r.Healed(t, "wiped node3: from `danyue join` to the whole library", time.Since(joinStart), 0)
	if d := DiffCanonical("before the wipe", before, "after the rejoin", after); d != "" {
		t.Fatalf("the library changed across the wipe and rejoin: %s", d)
	}
	// The new device is a full member.
	key := BookKey("wipe 0")
	b := victim.SetPosition(key, 99999, 0.99, "")
	nt.WaitBook(syncTimeout, key, "showing the new node3's position", func(got api.Book) bool {
		return got.Position != nil && got.Position.Stamp == b.Position.Stamp
	})
	r.Moved(t, 3, nt.Traffic())
}

// Deletion: a book deleted on A, read on at B after B saw the delete, is
// back on C (which is told of both), with the read time of all three.
func Deletion(t TB, p Params, r *Report) {
	nt := p.newNet(t, 3)
	a, b, c := nt.Node(1), nt.Node(2), nt.Node(3)
	events := c.Events()
	events.Ready(t, a)
	key := BookKey("deletion")
	a.SetPosition(key, 1000, 0.1, "Deleted, then read again")
	a.AddReadTime(key, 10*minute)
	b.AddReadTime(key, 5*minute)
	c.AddReadTime(key, 3*minute)
	nt.WaitBook(syncTimeout, key, "18 min of read time", func(bk api.Book) bool { return bk.ReadTime.TotalMs == uint64(18*minute) })

	del := a.Delete(key)
	nt.WaitBook(syncTimeout, key, "deleted by node1", func(bk api.Book) bool {
		return bk.Deleted && bk.DeletedStamp != nil && *bk.DeletedStamp == *del.DeletedStamp
	}, b)
	ev := events.Next(t, syncTimeout, "deleted", func(e client.Event) bool { return e.Type == "deleted" })
	var d api.Deleted
	if err := json.Unmarshal(ev.Data, &d); err != nil || d.Key != key || d.DeviceName != a.name || !strings.Contains(d.Message, a.name) {
		t.Errorf("node3's deleted event = %s (%v), want the book deleted on node1", ev.Data, err)
	}

	w := b.SetPosition(key, 5000, 0.5, "")
	if w.Deleted || w.Position.Stamp <= *del.DeletedStamp {
		t.Fatalf("node2 read on after seeing the delete, but the book is still deleted: %+v", w)
	}
	b.AddReadTime(key, 2*minute)
	want := map[string]uint64{a.Device(): uint64(10 * minute), b.Device(): uint64(7 * minute), c.Device(): uint64(3 * minute)}
	nt.WaitBook(syncTimeout, key, "back on the shelf at node2's position with 20 min", func(bk api.Book) bool {
		return !bk.Deleted && bk.Position != nil && bk.Position.Stamp == w.Position.Stamp &&
			bk.ReadTime.TotalMs == uint64(20*minute) && sameSlots(bk.ReadTime.ByDevice, want)
	})
	events.Next(t, syncTimeout, "showing the book back", func(e client.Event) bool { return BookEventIs(e, key, 5000) })
	r.Moved(t, 3, nt.Traffic())
}

func sameSlots(got, want map[string]uint64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
