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
// writes between, the restarts (a node's memory of what it and others
// have, lost) and the restores of one device (its whole store put back
// from an earlier copy, while the others keep what they knew of it), every
// store ends with the same records: what a device knows of others' stores
// (knowledge.go) never skips a record a device does not have. Pulls run
// concurrently, so the interleavings are the scheduler's.
//
// One device is restored, as the delivered marks (delivered.go) cover: a
// sender that went back checks a puller's cursor against what it has sent
// that puller since, which is only sound while the puller keeps what it
// was sent.
func TestConvergenceUnderInterleavings(t *testing.T) {
	lib := newLib(t)
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.IntRange(3, 5).Draw(rt, "devices")
		w := &interleaving{rt: rt, t: t, lib: lib, links: map[[2]int]*pipeLink{}}
		for i := range k {
			d := newDevice(t, fmt.Sprintf("N%d", i))
			d.start(t, lib, nil, quiet)
			w.devs = append(w.devs, d)
		}
		defer func() {
			for _, d := range w.devs {
				d.node.Close()
			}
		}()
		w.r = rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1))
		w.restorable = rapid.IntRange(0, k-1).Draw(rt, "restorable")
		for _, d := range w.devs {
			w.write(d, rapid.IntRange(0, 30).Draw(rt, "initial writes"))
		}
		defer w.cut(func([2]int) bool { return true })
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			w.step()
			if rapid.Bool().Draw(rt, "let it run") {
				time.Sleep(time.Duration(rapid.IntRange(0, 3).Draw(rt, "ms")) * time.Millisecond)
			}
		}
		w.chain()
		w.converge()
	})
}

// interleaving is one run of TestConvergenceUnderInterleavings: devices
// and the streams open between them, by (puller, sender).
type interleaving struct {
	rt    *rapid.T
	t     *testing.T
	r     *rand.Rand
	lib   Library
	devs  []*device
	links map[[2]int]*pipeLink
	// restorable is the device whose store may be put back from copy.
	restorable int
	copy       *memStore
}

const interleavingKeys = 8

func (w *interleaving) write(d *device, n int) {
	for range n {
		randomOp(w.t, w.r, d.store, interleavingKeys)
	}
}

// cut cuts the streams of the pairs pred picks.
func (w *interleaving) cut(pred func([2]int) bool) {
	for pair, l := range w.links {
		if pred(pair) {
			l.cut()
			delete(w.links, pair)
		}
	}
}

func (w *interleaving) open(p [2]int) {
	if w.links[p] == nil {
		w.links[p] = openLink(w.devs[p[0]], w.devs[p[1]])
	}
}

// pair draws a puller and another device as its sender.
func (w *interleaving) pair(label string) [2]int {
	k := len(w.devs)
	a := rapid.IntRange(0, k-1).Draw(w.rt, label+" puller")
	b := rapid.IntRange(0, k-2).Draw(w.rt, label+" sender")
	if b >= a {
		b++
	}
	return [2]int{a, b}
}

// step opens or cuts a stream, writes, restarts a device, copies its
// store or puts a copy back.
func (w *interleaving) step() {
	k := len(w.devs)
	switch rapid.IntRange(0, 6).Draw(w.rt, "action") {
	case 0, 1:
		w.open(w.pair("open"))
	case 2:
		p := w.pair("cut")
		w.cut(func(q [2]int) bool { return q == p })
	case 3:
		w.write(w.devs[rapid.IntRange(0, k-1).Draw(w.rt, "writer")], rapid.IntRange(1, 10).Draw(w.rt, "writes"))
	case 4: // restart: the node forgets what it knew
		i := rapid.IntRange(0, k-1).Draw(w.rt, "restarted")
		w.cut(func(q [2]int) bool { return q[0] == i || q[1] == i })
		n := w.devs[i].node
		n.kn = knowledge{}
		n.prov = provenance{}
		n.mu.Lock()
		for _, st := range n.peers {
			st.echo.reset()
		}
		n.mu.Unlock()
	case 5:
		w.copy = w.devs[w.restorable].store.copyStore()
	case 6: // restore: the device runs again on a copy of its store
		if w.copy == nil {
			return
		}
		i := w.restorable
		w.cut(func(q [2]int) bool { return q[0] == i || q[1] == i })
		d := w.devs[i]
		d.stop(w.t)
		d.store = w.copy.copyStore()
		d.start(w.t, w.lib, nil, quiet)
	}
}

// chain leaves a connected topology with no redundancy, which hides no
// record a device skipped: a random chain through every device, both ways,
// each stream opened afresh.
func (w *interleaving) chain() {
	order := rapid.Permutation(slices.Collect(func(yield func(int) bool) {
		for i := range w.devs {
			if !yield(i) {
				return
			}
		}
	})).Draw(w.rt, "chain")
	w.cut(func([2]int) bool { return true })
	for i := 1; i < len(order); i++ {
		w.open([2]int{order[i-1], order[i]})
		w.open([2]int{order[i], order[i-1]})
	}
}

// converge waits for every store to hold the same records.
func (w *interleaving) converge() {
	stores := stores(w.devs)
	for deadline := time.Now().Add(20 * time.Second); !converged(stores...); {
		if time.Now().After(deadline) {
			for p, l := range w.links {
				select {
				case <-l.done:
					w.rt.Logf("stream %d from %d ended: %v; its sender: %v", p[0], p[1], l.err, l.serr)
				default:
				}
			}
			for i := 1; i < len(stores); i++ {
				w.rt.Logf("N0 vs N%d: %s", i, diffStores(stores[0], stores[i]))
			}
			w.rt.Fatalf("no convergence")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
