package testnet

import (
	"time"
)

// TargetLostPeer is how soon a device must show a peer that vanished
// without closing its connection as disconnected.
const TargetLostPeer = 20 * time.Second

// LostPeer: the switch between two connected devices stops forwarding (a
// dropped Wi-Fi, a closed lid: nothing is closed, packets just stop), and
// each must list the other as disconnected within TargetLostPeer. yamux's
// keepalive alone (peer/host.go's muxKeepAlive, then its write timeout)
// would leave a device saying `connected` for longer; the kernel's
// keepalives (peer/tcp.go) notice sooner.
func LostPeer(t TB, p Params, r *Report) {
	nt := New(t, 2, QuietLogs())
	a, b := nt.Node(1), nt.Node(2)
	nt.Isolate(b)
	start := time.Now()
	gone := map[*Node]time.Duration{}
	WaitFor(t, 3*time.Minute, func() (bool, string) {
		for _, n := range []*Node{a, b} {
			if _, ok := gone[n]; ok {
				continue
			}
			if up, _ := connectedTo(n, []*Node{a, b}); !up {
				gone[n] = time.Since(start)
			}
		}
		if len(gone) < 2 {
			return false, "a node still lists the other as connected"
		}
		return true, ""
	})
	worst := max(gone[a], gone[b])
	r.Note(t, "a vanished peer shown disconnected after %v (%s) and %v (%s); target %v",
		gone[a].Round(100*time.Millisecond), a.name, gone[b].Round(100*time.Millisecond), b.name, TargetLostPeer)
	t.Logf("measured: lost peer shown disconnected after %v (%s), %v (%s)", gone[a], a.name, gone[b], b.name)
	p.checkTime(t, "showing a vanished peer disconnected", worst, TargetLostPeer, TargetLostPeer+10*time.Second)
}
