package poll

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTrue(t *testing.T) {
	var n atomic.Int32
	Until(t, "three checks", time.Minute, func() bool { return n.Add(1) == 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("checked %d times, want 3", got)
	}
}

// recorder is a testing.TB that records a Fatalf instead of stopping the
// test, so that the failing path can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func TestUntilFailsAtDeadline(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if v := recover(); v != nil && v != r {
				panic(v)
			}
		}()
		Until(r, "never", 20*time.Millisecond, func() bool { return false })
	}()
	if r.failed == "" {
		t.Fatal("Until returned although the condition never held")
	}
}
