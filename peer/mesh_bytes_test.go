package peer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
)

// frameNames names the wireFrame keys, for the breakdown below.
var frameNames = [frameKinds]string{0: "other", 1: "hello", 2: "batch", 3: "error", 4: "ack", 5: "start", 6: "caught", 8: "have", 9: "ask"}

// TestMeshBytesBreakdown writes in turn on every device of a full mesh of
// 20 (the shape of testnet's many-devices), each write reaching all others
// before the next, and logs where the sync bytes of a change go, by frame
// kind. It checks only that the relays stay suppressed (bytes are
// reported: go test -run MeshBytes -v), and holds relays for patientWindow
// so that it can on a loaded machine; BenchmarkMeshChange counts the bytes
// of a change with the product's window.
func TestMeshBytesBreakdown(t *testing.T) {
	if testing.Short() {
		t.Skip("a mesh of many devices")
	}
	const k, writes = 20, 60
	devs := mesh(t, k, patientHolds)
	// Settled, and every stream started: its hellos, Start frame, first
	// direct list and first Caught frame are not a change's.
	streams := uint64(k * (k - 1))
	poll.Until(t, "mesh settling", 20*time.Second, func() bool {
		var hellos, caught uint64
		for _, d := range devs {
			hellos += d.node.stats.framesByKind[1].Load()
			caught += d.node.stats.framesByKind[6].Load()
		}
		return settled(devs) && hellos == 2*streams && caught >= streams
	})
	type totals struct {
		bytes, frames   [frameKinds]uint64
		records, recB   uint64
		empty, allBytes uint64
	}
	read := func() (tt totals) {
		for _, d := range devs {
			s := &d.node.stats
			for i := range frameKinds {
				tt.bytes[i] += s.sentByKind[i].Load()
				tt.frames[i] += s.framesByKind[i].Load()
			}
			tt.records += s.recordsSent.Load()
			tt.recB += s.recordBytes.Load()
			tt.empty += s.emptyBatches.Load()
			tt.allBytes += s.bytesSent.Load()
		}
		return tt
	}
	before := read()
	for i := range writes {
		w := devs[i%k]
		if err := w.store.setPosition(bookKey(i%4), uint64(i+1)*10); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, fmt.Sprintf("write %d everywhere", i), 10*time.Second, func() bool { return converged(stores(devs)...) })
	}
	poll.Until(t, "cursors at every store's end", 3*(patientWindow+askTimeout), func() bool { return settled(devs) })
	after := read()
	per := func(v uint64) float64 { return float64(v) / writes }
	var b strings.Builder
	fmt.Fprintf(&b, "%d devices, %d writes: %.0f bytes, %.1f records (%.0f record bytes), %.1f empty batches per change\n",
		k, writes, per(after.allBytes-before.allBytes), per(after.records-before.records), per(after.recB-before.recB), per(after.empty-before.empty))
	for i := range frameKinds {
		if f := after.frames[i] - before.frames[i]; f > 0 {
			fmt.Fprintf(&b, "  %-6s %7.1f frames %8.0f bytes per change (%.1f bytes a frame)\n",
				frameNames[i], per(f), per(after.bytes[i]-before.bytes[i]), float64(after.bytes[i]-before.bytes[i])/float64(f))
		}
	}
	t.Log(b.String())
	if per(after.records-before.records) > 1.5*float64(k-1) {
		t.Errorf("relays not suppressed")
	}
}
