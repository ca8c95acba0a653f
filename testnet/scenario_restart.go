package testnet

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// Targets of a restart: from the restarted device's launch until both sides
// list each other as connected and its first write has reached the other.
const (
	TargetRestart    = time.Second     // p99
	TargetRestartMax = 2 * time.Second // the slowest
)

// restartVariant is one way a device finds its peer again after a restart.
type restartVariant struct {
	name      string
	fixedPort bool // the restarted device listens on the same port each time
	mdns      bool // false: --no-mdns, static peers (--peer) only
}

var restartVariants = []restartVariant{
	{"mDNS, random port", false, true},
	{"mDNS, fixed port", true, true},
	{"static peers, random port", false, false},
	{"static peers, fixed port", true, false},
}

// Fixed libp2p ports of the restart scenario's nodes, when fixed.
const (
	restartPortA = 4001
	restartPortB = 4002
)

// Restart: node2 restarts p.Restarts times in all, shared among the variants
// (random or fixed port, mDNS or static peers only), by SIGTERM, SIGKILL and
// a power cut in turn (restartHow); each time it writes a position at once, timed until node1 has it
// and both list each other as connected. Before libp2p's connection rate
// limit was confined to inbound connections, node1's redials of node2's dead
// port used up the rate of node2's address, and node2's dials back were
// reset: a restart could take minutes to reconnect.
func Restart(t TB, p Params, r *Report) {
	p = p.WithDefaults()
	per := max(1, p.Restarts/len(restartVariants))
	var all []time.Duration
	for _, v := range restartVariants {
		samples := restartRun(t, v, per)
		all = append(all, samples...)
		r.Note(t, "restart, %s: %d restarts (SIGTERM, SIGKILL, power cut in turn): launch to both connected and a write propagated p50 %v, p99 %v, max %v",
			v.name, len(samples), Percentile(samples, 50), Percentile(samples, 99), Percentile(samples, 100))
		t.Logf("measured: restart, %s: %d restarts: p50 %v, p99 %v, max %v",
			v.name, len(samples), Percentile(samples, 50), Percentile(samples, 99), Percentile(samples, 100))
	}
	p99, worst := Percentile(all, 99), Percentile(all, 100)
	t.Logf("measured: restart, all %d: p50 %v, p99 %v, max %v (targets p99 %v, max %v)",
		len(all), Percentile(all, 50), p99, worst, TargetRestart, TargetRestartMax)
	p.checkTime(t, "p99 restart to connected and write propagated", p99, TargetRestart, 15*time.Second)
	p.checkTime(t, "slowest restart to connected and write propagated", worst, TargetRestartMax, 30*time.Second)
}

// restartRun restarts node2 of a new two-node net n times in variant v and
// returns how long each took.
func restartRun(t TB, v restartVariant, n int) []time.Duration {
	t.Helper()
	nt := New(t, 2, QuietLogs(), NoStart())
	defer nt.close()
	a, b := nt.Node(1), nt.Node(2)
	var argsA, argsB []string
	if !v.mdns {
		// Node1 is named by node2's --peer, so its port is fixed.
		argsA = []string{"--no-mdns", "--listen", fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", restartPortA)}
		argsB = []string{"--no-mdns"}
	}
	if v.fixedPort {
		argsB = append(argsB, "--listen", fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", restartPortB))
	} else {
		// By default a daemon listens on the port of its last run again;
		// this variant is about a device whose port changes.
		argsB = append(argsB, "--listen", "/ip4/0.0.0.0/tcp/0")
	}
	a.SetArgs(argsA...)
	b.SetArgs(argsB...)
	nt.StartAll()
	nt.JoinAll()
	if !v.mdns {
		b.SetArgs(append(argsB, "--peer", lanAddr(t, a))...)
		if v.fixedPort {
			// Node2 keeps its address: node1 names it too.
			a.SetArgs(append(argsA, "--peer", lanAddr(t, b))...)
			a.Restart()
			nt.WaitConnected(syncTimeout, a, b)
		}
	}
	var samples []time.Duration
	for i := range n {
		how := restartHow(i)
		switch how {
		case "SIGTERM":
			b.Stop()
		case "SIGKILL":
			b.Kill()
		default:
			// Node1 keeps a connection to a process that is gone: the
			// kernel's reset never reached it.
			nt.Isolate(b)
			b.Kill()
			nt.Heal()
		}
		fromA, fromB := len(a.Logs()), len(b.Logs())
		start := time.Now()
		b.Start()
		key, char := BookKey(fmt.Sprintf("restart %d", i%4)), int64(i+1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := b.Client().SetPosition(ctx, key, char, 0.5, "")
		cancel()
		if err != nil {
			t.Fatalf("%s, restart %d: write on %s: %v", v.name, i, b.name, err)
		}
		nt.WaitBook(syncTimeout, key, "the restarted node's write", func(bk api.Book) bool {
			return bk.Position != nil && bk.Position.Char == uint64(char)
		}, a)
		nt.WaitConnected(syncTimeout, a, b)
		took := time.Since(start)
		samples = append(samples, took)
		if took > TargetRestart {
			t.Logf("%s, restart %d after %s took %v; the logs since:\n%s\n%s", v.name, i, how, took,
				logsSince(a, fromA), logsSince(b, fromB))
		}
	}
	return samples
}

// restartHow is how restart i ends the device: a clean stop, a crash, and a
// power cut (a crash whose last packets are lost, so that the peer holds on
// to a connection that is dead), in turn.
func restartHow(i int) string {
	return [...]string{"SIGTERM", "SIGKILL", "power cut"}[i%3]
}

// lanAddr returns n's libp2p address on the LAN, with /p2p, as --peer takes it.
func lanAddr(t TB, n *Node) string {
	t.Helper()
	for _, a := range n.Status().Addresses {
		if strings.HasPrefix(a, "/ip4/"+n.ip+"/tcp/") {
			return a
		}
	}
	t.Fatalf("%s has no address on the LAN", n.name)
	return ""
}

func logsSince(n *Node, from int) string {
	logs := n.Logs()
	if from > len(logs) {
		from = 0
	}
	return n.name + ":\n    " + strings.Join(logs[from:], "\n    ")
}
