package testnet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// pollEvery is how often WaitFor and Poll check their condition.
const pollEvery = 5 * time.Millisecond

// WaitFor checks cond until it reports ok and returns how long that took. If
// timeout passes first it fails t with cond's last why. It is the only way
// the harness waits for something: never a sleep standing in for
// synchronisation.
func WaitFor(t TB, timeout time.Duration, cond func() (ok bool, why string)) time.Duration {
	t.Helper()
	took, err := Poll(timeout, cond)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return took
}

// Poll is WaitFor for goroutines other than the test's: it returns an error
// instead of failing the test.
func Poll(timeout time.Duration, cond func() (ok bool, why string)) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("timed out after %v: %s", timeout, why)
		}
		time.Sleep(pollEvery)
	}
}

// Hold checks cond for the whole of d and fails t at the first moment it
// does not hold: for what must never happen (a stranger connecting).
func Hold(t TB, d time.Duration, cond func() (ok bool, why string)) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if ok, why := cond(); !ok {
			t.Fatalf("%s", why)
		}
		time.Sleep(10 * pollEvery)
	}
}

// WaitBook waits until cond holds for key on every one of nodes (every
// running node if none are given) and returns how long that took.
func (nt *Net) WaitBook(timeout time.Duration, key, what string, cond func(api.Book) bool, nodes ...*Node) time.Duration {
	nt.t.Helper()
	if len(nodes) == 0 {
		nodes = nt.running()
	}
	return WaitFor(nt.t, timeout, func() (bool, string) {
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			b, err := n.Client().Book(ctx, key)
			cancel()
			if err != nil {
				return false, fmt.Sprintf("%s: %s: %v", n.name, what, err)
			}
			if !cond(b) {
				data, _ := json.Marshal(b)
				return false, fmt.Sprintf("%s: not yet %s: %s", n.name, what, data)
			}
		}
		return true, ""
	})
}

// WaitConverged waits until nodes (every running node if none are given)
// return identical libraries (Canonical) and returns how long that took
// and the library.
func (nt *Net) WaitConverged(timeout time.Duration, nodes ...*Node) (time.Duration, []byte) {
	nt.t.Helper()
	if len(nodes) == 0 {
		nodes = nt.running()
	}
	var lib []byte
	took := WaitFor(nt.t, timeout, func() (bool, string) {
		var first []byte
		for i, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			got, err := CanonicalBooks(ctx, n.Client())
			cancel()
			if err != nil {
				return false, fmt.Sprintf("%s: books: %v", n.name, err)
			}
			if i == 0 {
				first = got
				continue
			}
			if d := DiffCanonical(nodes[0].name, first, n.name, got); d != "" {
				return false, "libraries differ: " + d
			}
		}
		lib = first
		return true, ""
	})
	return took, lib
}

func (nt *Net) running() []*Node {
	var out []*Node
	for _, n := range nt.Nodes() {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// WaitConnected waits until each of nodes lists every other as a connected
// peer, and returns how long that took.
func (nt *Net) WaitConnected(timeout time.Duration, nodes ...*Node) time.Duration {
	nt.t.Helper()
	return WaitFor(nt.t, timeout, func() (bool, string) {
		for _, n := range nodes {
			if ok, why := connectedTo(n, nodes); !ok {
				return false, why
			}
		}
		return true, ""
	})
}

// connectedTo reports whether n lists every other node of want as connected.
func connectedTo(n *Node, want []*Node) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	peers, err := n.Client().Peers(ctx)
	if err != nil {
		return false, fmt.Sprintf("%s: peers: %v", n.name, err)
	}
	up := map[string]bool{}
	for _, p := range peers {
		up[p.Device] = p.Connected
	}
	for _, o := range want {
		if o != n && !up[o.Device()] {
			return false, fmt.Sprintf("%s is not connected to %s (peers: %s)", n.name, o.name, describePeers(peers))
		}
	}
	return true, ""
}

func describePeers(peers []api.Peer) string {
	var s []string
	for _, p := range peers {
		state := "offline"
		if p.Connected {
			state = "connected"
		}
		s = append(s, fmt.Sprintf("%s/%s %s", p.Name, p.Device, state))
	}
	return "[" + strings.Join(s, ", ") + "]"
}
