package testnet

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

const (
	sigterm = syscall.SIGTERM
	sigkill = syscall.SIGKILL
	// sigquit makes a Go program print every goroutine's stack and exit:
	// where a daemon that does not stop is stuck.
	sigquit = syscall.SIGQUIT
)

// While a Net exists, SIGINT and SIGTERM make the harness kill its daemons,
// delete its namespaces and remove its dirs before the process exits, since
// the tests' cleanups will not run. Pdeathsig on each daemon and the sweep of
// stale namespaces at the next New are the backstop for SIGKILL.
var live struct {
	mu   sync.Mutex
	nets map[*Net]bool
	ch   chan os.Signal
	stop chan struct{}
	done chan struct{}
}

func register(nt *Net) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.nets == nil {
		live.nets = map[*Net]bool{}
	}
	live.nets[nt] = true
	if len(live.nets) > 1 {
		return
	}
	live.ch = make(chan os.Signal, 1)
	live.stop, live.done = make(chan struct{}), make(chan struct{})
	signal.Notify(live.ch, syscall.SIGINT, syscall.SIGTERM)
	go watchSignals(live.ch, live.stop, live.done)
}

func unregister(nt *Net) {
	live.mu.Lock()
	if !live.nets[nt] {
		live.mu.Unlock()
		return
	}
	delete(live.nets, nt)
	if len(live.nets) > 0 {
		live.mu.Unlock()
		return
	}
	signal.Stop(live.ch)
	close(live.stop)
	done := live.done
	live.mu.Unlock()
	<-done
}

func watchSignals(ch chan os.Signal, stop, done chan struct{}) {
	defer close(done)
	select {
	case <-stop:
		return
	case sig := <-ch:
		fmt.Fprintf(os.Stderr, "testnet: %v: removing every daemon, namespace and dir of this run\n", sig)
		live.mu.Lock()
		nets := live.nets
		live.nets = nil
		live.mu.Unlock()
		for nt := range nets {
			nt.teardown()
		}
		RemoveBinary()
		os.Exit(128 + int(sig.(syscall.Signal)))
	}
}

// teardown is close for a process about to exit: it kills rather than stops,
// logs nothing to the test, and skips in-process daemons (they end with the
// process).
func (nt *Net) teardown() {
	nt.silent.Store(true)
	for _, n := range nt.Nodes() {
		n.mu.Lock()
		p := n.proc
		n.mu.Unlock()
		if p != nil {
			p.signal(sigkill)
			<-p.done
		}
	}
	if nt.nw != nil {
		_ = nt.nw.close()
	}
	os.RemoveAll(nt.dir)
}
