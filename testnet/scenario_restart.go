package testnet

import (
	"context"
	"fmt"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// TargetRestart is how soon after a device restarts (its API answering)
// both sides must be connected and its first write propagated, at the 99th
// percentile.
const TargetRestart = time.Second

// Restart: node2 restarts p.Restarts times, by SIGTERM and SIGKILL in turn,
// on a new random port each time, found again by mDNS and by its own dial to
// the address it knew; each time it writes a position at once, timed until
// node1 has it. Before libp2p's connection rate limit was confined to
// inbound connections, node1's redials of node2's dead port used up the
// rate of node2's address, and node2's dials back were reset: 8 restarts in
// 23 took 2 s to 2 minutes.
func Restart(t TB, p Params, r *Report) {
	p = p.WithDefaults()
	nt := New(t, 2, QuietLogs())
	a, b := nt.Node(1), nt.Node(2)
	var samples []time.Duration
	for i := range p.Restarts {
		if i%2 == 0 {
			b.Stop()
		} else {
			b.Kill()
		}
		start := time.Now()
		b.Start()
		key, char := BookKey(fmt.Sprintf("restart %d", i%4)), int64(i+1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := b.Client().SetPosition(ctx, key, char, 0.5, "")
		cancel()
		if err != nil {
			t.Fatalf("restart %d: write on %s: %v", i, b.name, err)
		}
		nt.WaitBook(syncTimeout, key, "the restarted node's write", func(bk api.Book) bool {
			return bk.Position != nil && bk.Position.Char == uint64(char)
		}, a)
		samples = append(samples, time.Since(start))
	}
	p99, worst := Percentile(samples, 99), Percentile(samples, 100)
	r.Note(t, "%d restarts (SIGTERM and SIGKILL in turn): start to a write propagated p50 %v, p99 %v, max %v",
		len(samples), Percentile(samples, 50), p99, worst)
	t.Logf("measured: restart to write propagated over %d restarts: p50 %v, p99 %v, max %v (target p99 %v)",
		len(samples), Percentile(samples, 50), p99, worst, TargetRestart)
	p.checkTime(t, "p99 restart to write propagated", p99, TargetRestart, 3*time.Second)
}
