package lan

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/netnstest"
)

// TestWatchReportsChanges adds an interface and an address, which it may
// only do in a network namespace of its own, and waits for Watch to report
// each; then ends ctx and waits for the channel to close.
func TestWatchReportsChanges(t *testing.T) {
	if netnstest.Rerun(t) {
		return
	}
	if !netnstest.Inside() {
		t.Skip("changes interfaces: runs only in a network namespace of its own (root on Linux, with unshare and ip)")
	}
	ctx, cancel := context.WithCancel(t.Context())
	changes, err := Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range [][]string{
		{"link", "add", "dy0", "type", "veth", "peer", "name", "dy1"},
		{"link", "set", "dy0", "up"},
		{"addr", "add", "192.0.2.7/24", "dev", "dy0"},
	} {
		drain(changes)
		if out, err := exec.Command("ip", step...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", step, err, out)
		}
		select {
		case <-changes:
		case <-time.After(time.Minute):
			t.Fatalf("ip %v: no change reported", step)
		}
	}
	if !LocalIPs()["192.0.2.7"] {
		t.Errorf("LocalIPs() = %v, want 192.0.2.7 among them", LocalIPs())
	}
	cancel()
	deadline := time.After(time.Minute)
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the channel is still open after ctx ended")
		}
	}
}

func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
