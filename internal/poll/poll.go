// Package poll is how tests wait for something to become true: they check a
// condition until it holds or a generous deadline passes, never sleeping
// for a fixed time in place of synchronisation. The deadline is a bound on
// behaviour ("the peer shows up"), not a speed target; loaded machines
// must pass.
package poll

import (
	"testing"
	"time"
)

// every is how often Until checks its condition.
const every = 5 * time.Millisecond

// Until checks cond until it returns true and fails t if timeout passes
// first, naming what it waited for.
func Until(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(every)
	}
}
