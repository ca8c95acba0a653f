package testnet

import (
	"context"
	"fmt"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
)

// ManyDevices: p.Devices devices (default 20), each in its own namespace on
// one LAN, every one of them writing in turn. Measured: how long a write
// takes to reach all the others (p99, target TargetPropagation), the sync
// bytes all devices send per change (target at most 2 x (devices-1) x the
// record's size), and, after a partition into two halves that lasts long
// enough for the connections to drop, during which every device writes a
// book, how long until every device has the same library (target
// TargetHeal10k).
func ManyDevices(t TB, p Params, r *Report) {
	p = p.WithDefaults()
	nt := New(t, p.Devices, QuietLogs())
	nodes := nt.Nodes()

	// The probe writes that show the event streams deliver, and the streams
	// of a mesh that has just formed (first catch-ups, direct lists, Caught
	// frames), are not the changes measured.
	streams := openStreams(t, nodes)
	waitQuiet(t, nt)
	before := nt.Traffic()
	samples := propagateOn(t, nodes, streams, p.Writes)
	during := subTraffic(nt.Traffic(), before)
	// What the writes cost includes what devices send once they stop: a
	// relay held back, a cursor advance put off (peer/fanout.go), the
	// Caught frames of the idle streams.
	time.Sleep(settleAfterWrites)
	moved := subTraffic(nt.Traffic(), before)
	r.Propagated(PropagationMethod, samples...)
	p50, p99 := Percentile(samples, 50), Percentile(samples, 99)
	t.Logf("measured: %d devices, a write reaching all %d others, over %d samples: p50 %v, p99 %v (target p99 %v)",
		len(nodes), len(nodes)-1, len(samples), p50, p99, TargetPropagation)
	size := positionRecordSize(t)
	perChange := float64(moved.BytesSent) / float64(p.Writes)
	target := 2 * (len(nodes) - 1) * size
	r.Note(t, "%d devices: %.0f sync bytes sent per change (target <= %d: 2 x %d x a %d-byte record), %.1f records sent per change",
		len(nodes), perChange, target, len(nodes)-1, size, float64(moved.RecordsSent)/float64(p.Writes))
	// What follows the last write is paid once per burst, not per change:
	// on each stream, the relays it held back are asked about and the
	// puller's cursor moved past them, and an idle stream says it caught up.
	streamsOfMesh := len(nodes) * (len(nodes) - 1)
	r.Note(t, "%d devices: of which while the writes went on: %.0f bytes, %.1f records per change; then within %v: %.0f bytes per change (%.0f bytes per stream, once per burst)",
		len(nodes), float64(during.BytesSent)/float64(p.Writes), float64(during.RecordsSent)/float64(p.Writes),
		settleAfterWrites, float64(moved.BytesSent-during.BytesSent)/float64(p.Writes),
		float64(moved.BytesSent-during.BytesSent)/float64(streamsOfMesh))
	p.checkTime(t, "p99 propagation", p99, TargetPropagation, 10*time.Second)
	// Each change crosses the wire once per receiving device on a settled
	// mesh; relays no longer held back would send it on from every
	// receiver, (devices-1)^2 times. The bound sits between the two, far
	// enough from the first for the relays a loaded machine's stalls let
	// through (a relay goes out when the direct link looks silent).
	if per, limit := float64(moved.RecordsSent)/float64(p.Writes), 3*float64(len(nodes)-1); per > limit {
		t.Errorf("%.1f records sent per change among %d devices; want at most %.1f (relays not held back)", per, len(nodes), limit)
	}

	half := nodes[:len(nodes)/2]
	nt.Partition(half)
	start := time.Now()
	for i, n := range nodes {
		n.SetPosition(BookKey(fmt.Sprintf("partitioned %d", i)), int64(i+1), 0.5, "Written on "+n.name+" while partitioned")
	}
	// The outage lasts as long on a fast machine as on a slow one.
	time.Sleep(time.Until(start.Add(minOutage)))
	outage := time.Since(start)
	nt.Heal()
	took, _ := nt.WaitConverged(healTimeout)
	r.Healed(t, fmt.Sprintf("%d devices, a %.1fs partition into halves, one book written on each", len(nodes), outage.Seconds()), took, TargetHeal10k)
	r.Moved(t, len(nodes), nt.Traffic())
	p.checkTime(t, "every device converging after the heal", took, TargetHeal10k, 30*time.Second)
}

// waitQuiet waits until no device has sent a sync byte for
// settleAfterWrites.
func waitQuiet(t TB, nt *Net) {
	t.Helper()
	last, since := nt.Traffic().BytesSent, time.Now()
	WaitFor(t, time.Minute, func() (bool, string) {
		if now := nt.Traffic().BytesSent; now != last {
			last, since = now, time.Now()
		}
		return time.Since(since) >= settleAfterWrites, fmt.Sprintf("sync traffic still moving (%d bytes sent so far)", last)
	})
}

// settleAfterWrites is how long ManyDevices goes on counting bytes after
// the last write has reached every device: longer than a sender holds a
// relay or a cursor advance back (peer's deferWindow, 1 s) and than a send
// stream's first idle Caught frame waits (1 s).
const settleAfterWrites = 3 * time.Second

// JoinLibrary: a device joins a library of p.JoinBooks books shared by 2,
// then by 5, devices that have synced and are idle. Measured: the records
// it received (target at most 1.1 per book, whatever the number of devices
// it meets) and the records it sent back to devices that had them (target
// none), and how long it took to have every book.
func JoinLibrary(t TB, p Params, r *Report) {
	p = p.WithDefaults()
	for _, others := range []int{2, 5} {
		joinLibrary(t, p, r, others)
	}
}

func joinLibrary(t TB, p Params, r *Report, others int) {
	t.Helper()
	nt := New(t, others, QuietLogs())
	defer nt.close()
	nodes := nt.Nodes()
	populate(t, nodes[:1], p.JoinBooks)
	WaitFor(t, 10*time.Minute, func() (bool, string) { return countIs(nodes, p.JoinBooks) })
	WaitFor(t, time.Minute, func() (bool, string) { return caughtUp(nodes) })
	// A device joins a library that has been idle for a moment, not one
	// still settling its last batches.
	time.Sleep(idleBeforeJoin)

	n := nt.AddNode(fmt.Sprintf("node%d", others+1))
	start := time.Now()
	nt.Join(n, nodes[0])
	WaitFor(t, 10*time.Minute, func() (bool, string) { return countIs([]*Node{n}, p.JoinBooks) })
	took := time.Since(start)
	all := append(nodes, n)
	WaitFor(t, time.Minute, func() (bool, string) { return caughtUp(all) })
	tr := n.Traffic()
	r.Note(t, "a device joining %d books shared by %d others received %d records (%.3f per book, target <= 1.1) and sent %d; it had every book %v after the join",
		p.JoinBooks, others, tr.RecordsReceived, float64(tr.RecordsReceived)/float64(p.JoinBooks), tr.RecordsSent, took.Round(time.Millisecond))
	if limit := uint64(p.JoinBooks*11/10) + uint64(len(all)); tr.RecordsReceived > limit {
		t.Errorf("the joining device received %d records for %d books (and %d device records); the bound is %d; its log ends:\n%s",
			tr.RecordsReceived, p.JoinBooks, len(all), limit, n.tail(400))
	}
}

// idleBeforeJoin is how long a library is idle before a device joins it:
// long enough for the devices to have told each other what they have (a
// send stream's later Caught frames wait for 10 s of spacing and 1 s of
// quiet; see peer/sync_send.go). A device joining right after a burst of
// writes may send some of the burst back.
const idleBeforeJoin = 12 * time.Second

// caughtUp reports whether every node is connected to every other and has
// nothing left to merge from any.
func caughtUp(nodes []*Node) (bool, string) {
	for _, n := range nodes {
		if ok, why := connectedTo(n, nodes); !ok {
			return false, why
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		peers, err := n.Client().Peers(ctx)
		cancel()
		if err != nil {
			return false, fmt.Sprintf("%s: peers: %v", n.name, err)
		}
		for _, pr := range peers {
			if pr.Connected && pr.Behind > 0 {
				return false, fmt.Sprintf("%s is %d changes behind %s", n.name, pr.Behind, pr.Name)
			}
		}
	}
	return true, ""
}

// positionRecordSize is the size of a book record as propagate writes it,
// encoded as stores keep it and batches carry it.
func positionRecordSize(t TB) int {
	t.Helper()
	key, err := crdt.ParseBookKey(BookKey("propagation 0"))
	if err != nil {
		t.Fatalf("record size: %v", err)
	}
	at := crdt.Timestamp{Wall: uint64(time.Now().UnixMilli()), Device: crdt.DeviceID(1 << 63)}
	e, err := crdt.SetPosition(key, at, 1000, 0.5)
	if err != nil {
		t.Fatalf("record size: %v", err)
	}
	b, err := e.Encode()
	if err != nil {
		t.Fatalf("record size: %v", err)
	}
	return len(b)
}

func subTraffic(a, b api.Traffic) api.Traffic {
	return api.Traffic{
		BytesSent:       a.BytesSent - b.BytesSent,
		BytesReceived:   a.BytesReceived - b.BytesReceived,
		RecordsSent:     a.RecordsSent - b.RecordsSent,
		RecordsReceived: a.RecordsReceived - b.RecordsReceived,
	}
}
