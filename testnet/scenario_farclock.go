package testnet

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
)

// farFuture is the largest offset DANYUE_CLOCK_OFFSET takes (a
// time.Duration: about 292 years, a clock in the year 2318): as close to the
// year 9999 as the testing aid can set a real daemon's clock. The daemon test
// TestFarFutureRecordDoesNotDragTheClock sends a record stamped 9999-12-31
// through the same sync path; the rule is the same for both.
const farFuture = 2_562_047 * time.Hour

// FarFutureClock: node2's clock is about 292 years ahead, as a device whose
// clock reset to a far-off date. Its writes are merged everywhere, but they
// do not drag anyone's clock: the other nodes' later writes to other books
// are stamped near real time. A write made after seeing another one to the
// same book wins everywhere, whichever node makes it (node1, then the broken
// node2, then node3), and so does a delete and the read that revives the
// book. Status on node1 and node3 names node2, the writer, by the right
// amount, and the CLI prints the warning.
func FarFutureClock(t TB, p Params, r *Report) {
	nt := p.newNet(t, 3, ClockOffset(2, farFuture))
	normal, broken, third := nt.Node(1), nt.Node(2), nt.Node(3)
	shared := BookKey("far future: shared")
	w := broken.SetPosition(shared, 1000, 0.1, "")
	if at := parseAt(t, broken, w.Position.At); at.Year() < 2300 {
		t.Fatalf("%s's clock is not far ahead: its write is stamped %s", broken.name, w.Position.At)
	}
	nt.WaitBook(syncTimeout, shared, "showing the far-future write", func(b api.Book) bool {
		return b.Position != nil && b.Position.Stamp == w.Position.Stamp
	})
	r.Note(t, "%s wrote at %s", broken.name, w.Position.At)

	// Later writes to other books: near real time on every other node.
	for i, n := range []*Node{normal, third} {
		b := n.SetPosition(BookKey(fmt.Sprintf("far future: other %d", i)), 10, 0.01, "")
		checkNearNow(t, r, n, b.Position.At)
	}

	// Causally later writes to the shared book win everywhere.
	last := w
	for i, n := range []*Node{normal, broken, third} {
		b := n.SetPosition(shared, int64(2000+1000*i), 0.2, "")
		if b.Position.Stamp <= last.Position.Stamp || b.Position.Device != n.Device() {
			t.Fatalf("%s wrote after seeing %s's write, but its write (stamp %s) does not order after %s: %+v",
				n.name, last.Position.DeviceName, b.Position.Stamp, last.Position.Stamp, b.Position)
		}
		nt.WaitBook(syncTimeout, shared, fmt.Sprintf("showing %s's later write", n.name), func(got api.Book) bool {
			return got.Position != nil && got.Position.Stamp == b.Position.Stamp && got.Position.Char == b.Position.Char
		})
		last = b
	}
	// A delete made after them hides the book everywhere; reading it again
	// revives it.
	if d := normal.Delete(shared); !d.Deleted {
		t.Fatalf("%s deleted the book after seeing every write, but it is still on the shelf: %+v", normal.name, d)
	}
	nt.WaitBook(syncTimeout, shared, "deleted", func(b api.Book) bool { return b.Deleted })
	revived := third.SetPosition(shared, 9000, 0.9, "")
	nt.WaitBook(syncTimeout, shared, "revived by the read after the delete", func(b api.Book) bool {
		return !b.Deleted && b.Position != nil && b.Position.Stamp == revived.Position.Stamp
	})

	// After all of it, still near real time.
	for i, n := range []*Node{normal, third} {
		b := n.SetPosition(BookKey(fmt.Sprintf("far future: after %d", i)), 10, 0.01, "")
		checkNearNow(t, r, n, b.Position.At)
	}

	// Status names the writer, not a relay, by about the offset.
	for _, n := range []*Node{normal, third} {
		checkClockWarning(t, r, n, broken, farFuture)
	}
	res, err := normal.CLI(context.Background(), "status")
	if err != nil || res.Code != 0 || !strings.Contains(res.Stdout, "warning: "+broken.name+"'s clock is wrong") {
		t.Errorf("%s: danyue status does not warn about %s's clock (%v, exit %d):\n%s", normal.name, broken.name, err, res.Code, res.Stdout)
	}
	r.Moved(t, 3, nt.Traffic())
}

func parseAt(t TB, n *Node, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s: a write's time %q: %v", n.name, s, err)
	}
	return at
}

// checkNearNow checks that a write of n (whose clock is right) is stamped
// within the bound the clocks follow others (crdt.MaxAhead) of real time.
func checkNearNow(t TB, r *Report, n *Node, at string) {
	t.Helper()
	const slack = 10 * time.Second // the API's answer travelling to the test
	got := parseAt(t, n, at)
	if off := time.Until(got); off > time.Duration(crdt.MaxAhead)*time.Millisecond+slack || off < -slack-time.Minute {
		t.Errorf("%s's write is stamped %s, %v from real time: dragged by the far-future clock", n.name, at, off.Round(time.Millisecond))
		return
	}
	r.Note(t, "%s's later write is stamped %s", n.name, at)
}

// checkClockWarning checks that on's status lists writer's clock as want
// ahead, and lists no other device.
func checkClockWarning(t TB, r *Report, on, writer *Node, want time.Duration) {
	t.Helper()
	ws := on.Status().ClockWarnings
	if len(ws) != 1 || ws[0].Device != writer.Device() {
		t.Errorf("%s's status lists clock warnings %+v, want one for %s (%s)", on.name, ws, writer.name, writer.Device())
		return
	}
	w := ws[0]
	if d := time.Duration(w.AheadMs)*time.Millisecond - want; d.Abs() > time.Minute || w.Name != writer.name {
		t.Errorf("%s's status says %s (%s) is %d ms ahead, want about %d ms: %+v", on.name, w.Name, w.Device, w.AheadMs, want.Milliseconds(), w)
		return
	}
	r.Note(t, "%s's status: %q (via %s)", on.name, w.Warning, w.Via)
}
