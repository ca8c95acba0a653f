package testnet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// PropagationMethod says how Propagation measures.
const PropagationMethod = "event stream: from sending PUT position to the writer until the \"book\" event arrives on the other node's /v1/events"

// Propagation: position writes at each node in turn, each timed until every
// other node's event stream shows it.
func Propagation(t TB, p Params, r *Report) {
	p = p.WithDefaults()
	nt := p.newNet(t, p.Nodes, QuietLogs())
	nodes := nt.Nodes()
	samples := propagate(t, nodes, p.Writes)
	r.Propagated(PropagationMethod, samples...)
	p50, p99 := Percentile(samples, 50), Percentile(samples, 99)
	t.Logf("measured: propagation over %d samples: p50 %v, p99 %v (target p99 %v)", len(samples), p50, p99, TargetPropagation)
	p.checkTime(t, "p99 propagation", p99, TargetPropagation, 10*time.Second)
	r.Moved(t, len(nodes), nt.Traffic())
}

// propagate makes writes position writes, at each node in turn, and returns
// how long each took to reach each other node (PropagationMethod).
func propagate(t TB, nodes []*Node, writes int) []time.Duration {
	t.Helper()
	return propagateOn(t, nodes, openStreams(t, nodes), writes)
}

// openStreams opens an event stream on every node, each shown to be
// delivering by a probe write on the next node.
func openStreams(t TB, nodes []*Node) []*EventStream {
	t.Helper()
	streams := make([]*EventStream, len(nodes))
	for i, n := range nodes {
		streams[i] = n.Events()
		streams[i].Ready(t, nodes[(i+1)%len(nodes)])
	}
	return streams
}

// propagateOn is propagate on streams open on every node.
func propagateOn(t TB, nodes []*Node, streams []*EventStream, writes int) []time.Duration {
	t.Helper()
	var samples []time.Duration
	for i := range writes {
		w := i % len(nodes)
		key, char := BookKey(fmt.Sprintf("propagation %d", i%4)), uint64(i+1)*10
		start := time.Now()
		nodes[w].SetPosition(key, int64(char), 0.5, "")
		for j, s := range streams {
			if j == w {
				continue
			}
			e := s.Next(t, syncTimeout, fmt.Sprintf("for %s's write %d", nodes[w].name, i), func(e client.Event) bool { return BookEventIs(e, key, char) })
			samples = append(samples, e.At.Sub(start))
		}
	}
	return samples
}

// BigHeal: p.Books books are written on one side of a partition (node1 and
// node2) during an outage of at least 20 s, then the partition heals;
// measured until every node has them all.
func BigHeal(t TB, p Params, r *Report) {
	p = p.WithDefaults()
	nt := New(t, max(3, min(p.Nodes, 5)), QuietLogs())
	nodes := nt.Nodes()
	side := nodes[:2]
	nt.Partition(side)
	start := time.Now()
	populate(t, side, p.Books)
	WaitFor(t, 5*time.Minute, func() (bool, string) { return countIs(side, p.Books) })
	r.Note(t, "wrote %d books on {node1 node2} in %v while partitioned", p.Books, time.Since(start).Round(time.Millisecond))
	// The outage lasts as long on a fast machine as on a slow one.
	time.Sleep(time.Until(start.Add(minOutage)))

	outage := time.Since(start)
	nt.Heal()
	healed := time.Now()
	var first time.Duration // until the first book reached the other side
	took := WaitFor(t, healTimeout, func() (bool, string) {
		if first == 0 {
			if ok, _ := countIs(nodes[2:], 0); !ok {
				first = time.Since(healed)
			}
		}
		return countIs(nodes, p.Books)
	})
	r.Note(t, "after the heal the first book reached the other side in %v, all %d books every node in %v",
		first.Round(time.Millisecond), p.Books, took.Round(time.Millisecond))
	r.Healed(t, fmt.Sprintf("%d books written during a %.1fs partition", p.Books, outage.Seconds()), took, TargetHeal10k)
	nt.WaitConverged(healTimeout)
	r.Moved(t, len(nodes), nt.Traffic())
	p.checkTime(t, fmt.Sprintf("%d books reaching every node after the heal", p.Books), took, TargetHeal10k, 30*time.Second)
}

// minOutage is how long BigHeal's partition lasts at least: a device out
// of Wi-Fi range for a moment, and the same on fast and slow machines.
const minOutage = 20 * time.Second

// LongPartition: two devices that know each other only through mDNS lose
// the network for longer than their connection survives; after the heal
// they find each other again and converge within seconds. (Devices keep the
// one that invited them as a static peer and redial it; node1 is stopped, so
// node2 and node3 have only mDNS.) It lasts over a minute, so go test runs it
// only with -testnet.long.
func LongPartition(t TB, p Params, r *Report) {
	nt := New(t, 3, QuietLogs())
	inviter, b, c := nt.Node(1), nt.Node(2), nt.Node(3)
	inviter.Stop()
	nt.Isolate(c)
	key := BookKey("long partition")
	w := c.SetPosition(key, 42, 0.42, "Written during a long outage")
	dropped := WaitFor(t, 3*time.Minute, func() (bool, string) {
		ok, _ := connectedTo(b, []*Node{b, c})
		return !ok, "node2 still lists node3 as connected"
	})
	r.Note(t, "node2 dropped its connection to node3 %v into the partition", dropped.Round(time.Second))
	nt.Heal()
	took := nt.WaitBook(5*time.Minute, key, "showing node3's write", func(bk api.Book) bool {
		return bk.Position != nil && bk.Position.Stamp == w.Position.Stamp
	}, b)
	r.Healed(t, fmt.Sprintf("one book, %v partition, mDNS-only peers", dropped.Round(time.Second)), took, TargetHeal10k)
	p.checkTime(t, "node3's write reaching node2 after the heal", took, TargetHeal10k, 30*time.Second)
}

// populate writes n books, spread over nodes, with a few writers per node.
func populate(t TB, nodes []*Node, n int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for w := range 4 * len(nodes) {
		node := nodes[w%len(nodes)]
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
				_, err := node.Client().SetPosition(ctx, BookKey(fmt.Sprintf("big heal %d", i)), i, 0.5, fmt.Sprintf("Book %d", i))
				cancel()
				if err != nil {
					select {
					case errs <- fmt.Errorf("%s: book %d: %w", node.name, i, err):
					default:
					}
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("populate: %v", err)
	default:
	}
}

// countIs reports whether every node shows want books on its shelf.
func countIs(nodes []*Node, want int) (bool, string) {
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := n.Client().Status(ctx)
		cancel()
		if err != nil {
			return false, fmt.Sprintf("%s: status: %v", n.name, err)
		}
		if st.Counts.Books != want {
			return false, fmt.Sprintf("%s has %d of %d books", n.name, st.Counts.Books, want)
		}
	}
	return true, ""
}
