package peer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// pipeLink is one sync stream on net.Pipe: device puller pulls from device
// sender until it is cut.
type pipeLink struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // why the pull ended, once done
	serr   error // why the send side ended, once done
}

// openLink runs a pull of a from b on a pipe, both sides on their real
// code (puller.run, Node.serve).
func openLink(a, b *device) *pipeLink {
	ctx, cancel := context.WithCancel(context.Background())
	ours, theirs := net.Pipe()
	a.node.mu.Lock()
	st := a.node.peer(b.id)
	a.node.mu.Unlock()
	l := &pipeLink{cancel: cancel, done: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_, l.serr = b.node.serve(theirs, func() { theirs.Close() }, a.id)
		theirs.Close()
	}()
	go func() {
		defer close(l.done)
		p := &puller{n: a.node, st: st, s: ours}
		stop := context.AfterFunc(ctx, func() { ours.Close() })
		l.err = p.run(ctx)
		stop()
		p.releaseGate(false)
		ours.Close()
		<-served
	}()
	return l
}

func (l *pipeLink) cut() {
	l.cancel()
	<-l.done
}

// Whatever the topology, the order in which streams open and break, the
// writes between and the restarts (a node's memory of what it and others
// have, lost), every store ends with the same records: what a device knows
// of others' stores (knowledge.go) never skips a record a device does not
// have. Pulls run concurrently, so the interleavings are the
// scheduler's.
func TestConvergenceUnderInterleavings(t *testing.T) {
	lib := newLib(t)
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.IntRange(3, 5).Draw(rt, "devices")
		const keys = 8
		devs := make([]*device, k)
		var stores []*memStore
		for i := range devs {
			devs[i] = newDevice(t, fmt.Sprintf("N%d", i))
			devs[i].start(t, lib, nil, quiet)
			stores = append(stores, devs[i].store)
		}
		defer func() {
			for _, d := range devs {
				d.node.Close()
			}
		}()
		r := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1))
		write := func(d *device, n int) {
			for range n {
				randomOp(t, r, d.store, keys)
			}
		}
		for _, d := range devs {
			write(d, rapid.IntRange(0, 30).Draw(rt, "initial writes"))
		}
		links := map[[2]int]*pipeLink{}
		cutAll := func(pred func([2]int) bool) {
			for pair, l := range links {
				if pred(pair) {
					l.cut()
					delete(links, pair)
				}
			}
		}
		defer cutAll(func([2]int) bool { return true })
		pair := func(label string) [2]int {
			a := rapid.IntRange(0, k-1).Draw(rt, label+" puller")
			b := rapid.IntRange(0, k-2).Draw(rt, label+" sender")
			if b >= a {
				b++
			}
			return [2]int{a, b}
		}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 4).Draw(rt, "action") {
			case 0, 1: // open a stream
				p := pair("open")
				if links[p] == nil {
					links[p] = openLink(devs[p[0]], devs[p[1]])
				}
			case 2: // cut a stream
				p := pair("cut")
				cutAll(func(q [2]int) bool { return q == p })
			case 3: // write
				write(devs[rapid.IntRange(0, k-1).Draw(rt, "writer")], rapid.IntRange(1, 10).Draw(rt, "writes"))
			case 4: // restart: the node forgets what it knew
				i := rapid.IntRange(0, k-1).Draw(rt, "restarted")
				cutAll(func(q [2]int) bool { return q[0] == i || q[1] == i })
				n := devs[i].node
				n.kn = knowledge{}
				n.prov = provenance{}
				n.mu.Lock()
				for _, st := range n.peers {
					st.echo.reset()
				}
				n.mu.Unlock()
			}
			if rapid.Bool().Draw(rt, "let it run") {
				time.Sleep(time.Duration(rapid.IntRange(0, 3).Draw(rt, "ms")) * time.Millisecond)
			}
		}
		// Then a connected topology with no redundancy, which hides no
		// record a device skipped: a random chain through every device,
		// both ways, each stream opened afresh.
		order := rapid.Permutation(slices.Collect(func(yield func(int) bool) {
			for i := range k {
				if !yield(i) {
					return
				}
			}
		})).Draw(rt, "chain")
		cutAll(func([2]int) bool { return true })
		for i := 1; i < k; i++ {
			for _, p := range [][2]int{{order[i-1], order[i]}, {order[i], order[i-1]}} {
				if links[p] == nil {
					links[p] = openLink(devs[p[0]], devs[p[1]])
				}
			}
		}
		for deadline := time.Now().Add(20 * time.Second); !converged(stores...); {
			if time.Now().After(deadline) {
				for p, l := range links {
					select {
					case <-l.done:
						rt.Logf("stream %d from %d ended: %v; its sender: %v", p[0], p[1], l.err, l.serr)
					default:
					}
				}
				for i := 1; i < k; i++ {
					rt.Logf("N0 vs N%d: %s", i, diffStores(stores[0], stores[i]))
				}
				rt.Fatalf("no convergence")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
