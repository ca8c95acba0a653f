package testnet

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// punchWait is how long a try of away-punch waits for the direct
// connection, from the phone's start: its connection to the NAS, a
// reservation there, the laptop's relayed connection and the punch.
const punchWait = 30 * time.Second

// punchPorts is the phone's first listen port in away-punch; each try
// takes the next. A hole punch on the very address pair of a connection
// reset a moment before fails while the NATs still track that one (the
// next relayed connection, two minutes on, tries again): a try is a new
// meeting, as of a device that just got a network, not a restart of it.
const punchPorts = 5000

// AwayPunch: the laptop at the office and the phone at the cafe, both
// behind NATs that keep source ports and drop what comes unasked, and
// both away from the NAS at home (its port forwarded). The phone restarts
// for every try, on a fresh port (punchPorts);
// the two meet through the NAS's relay and connect directly by hole
// punching, while the phone's writes reach the laptop through the NAS.
// At ≥ 90% of tries direct the scenario passes (the public network's
// baseline is 70%). Then the phone moves behind the carrier's NAT, which
// maps each destination to a new port: no punch can work there, and its
// write still reaches the laptop through the NAS.
func AwayPunch(t TB, p Params, r *Report) {
	nt, lab := awayNet(t, 3, DropUnsolicited())
	nas, laptop, phone := nt.Node(1), nt.Node(2), nt.Node(3)
	lab.Move(laptop, Office)
	lab.Move(phone, Cafe)
	tries := p.PunchTries
	if tries <= 0 {
		tries = 50
	}
	var direct []time.Duration
	for i := range tries {
		phone.SetArgs("--listen", fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", punchPorts+i))
		phone.Restart()
		start := time.Now()
		key := BookKey(fmt.Sprintf("away-punch %d", i))
		phone.SetPosition(key, int64(i+1), 0.5, "written at the cafe")
		meanwhile := nt.WaitBook(syncTimeout, key, "the phone's write, at the laptop", hasPosition, laptop)
		took, ok := awaitPunched(laptop, phone, start)
		if ok {
			direct = append(direct, took)
		}
		nt.logf("testnet: try %d: the write at the laptop after %v; hole punched: %v after %v", i, meanwhile.Round(time.Millisecond), ok, took.Round(time.Millisecond))
	}
	if len(direct)*10 < tries*9 {
		t.Errorf("%d of %d tries connected the laptop and the phone directly, want at least 90%%", len(direct), tries)
	}
	if len(direct) > 0 {
		slices.Sort(direct)
		r.Note(t, "laptop (office NAT) and phone (cafe NAT), both away: %d of %d tries connected directly by hole punching through the NAS's relay; from the phone's start: median %v, max %v",
			len(direct), tries, direct[len(direct)/2].Round(time.Millisecond), direct[len(direct)-1].Round(time.Millisecond))
	}

	lab.Move(phone, Carrier)
	phone.Restart()
	key := BookKey("away-punch: written behind the carrier's NAT")
	phone.SetPosition(key, 1, 0.5, "written on the train")
	took := nt.WaitBook(syncTimeout, key, "the phone's write behind the carrier's NAT, at the laptop", hasPosition, laptop, nas)
	r.Note(t, "phone behind the carrier's NAT (a new port for each destination): its write reached the laptop through the NAS in %v",
		took.Round(time.Millisecond))
}

// awaitPunched waits for from to show to connected by hole punching, and
// returns how long after start it did.
func awaitPunched(from, to *Node, start time.Time) (time.Duration, bool) {
	for time.Since(start) < punchWait {
		if pr, ok := peerOf(from, to); ok && pr.Connected && pr.HolePunched {
			return time.Since(start), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start), false
}

// peerOf is what from says of the peer to.
func peerOf(from, to *Node) (api.Peer, bool) {
	for _, pr := range from.Peers() {
		if pr.Device == to.Device() {
			return pr, true
		}
	}
	return api.Peer{}, false
}

// AwayTransport measures NAT hole punching in the lab, for the choice of
// danyue's transport: TCP inside the library's private network (what the
// daemon runs) against QUIC, which libp2p runs only without one. It runs
// testnet/cmd/punch, libp2p's circuit relay and DCUtR, not the daemon: a
// laptop at the office and a phone at the cafe, both behind NATs that keep
// source ports, meet through a relay on the NAS at home (its port
// forwarded) and try to connect directly. Every try is a fresh pair of
// processes on fresh ports, as two devices meeting for the first time.
// The routers drop what comes to them unasked (DropUnsolicited), as home
// routers do.
func AwayTransport(t TB, p Params, r *Report) {
	nt := New(t, 3, NoStart())
	nas, laptop, phone := nt.Node(1), nt.Node(2), nt.Node(3)
	lab := nt.Lab(PortForward(nas, awayPort), DropUnsolicited())
	lab.Move(laptop, Office)
	lab.Move(phone, Cafe)
	bin := toolBinary(t, "punch")
	tries := p.PunchTries
	if tries <= 0 {
		tries = 50
	}
	for _, tr := range []struct{ name, proto string }{{"tcp", "tcp"}, {"quic", "udp"}} {
		relay := startPunch(t, nas, bin, "-role", "relay", "-transport", tr.name, "-seed", "nas", "-port", fmt.Sprint(awayPort))
		id := strings.TrimPrefix(relay.await(t, "id "), "id ")
		relayAddr := fmt.Sprintf("/ip4/%s/%s/%d", lab.Public(Home), tr.proto, awayPort)
		if tr.name == "quic" {
			relayAddr += "/quic-v1"
		}
		relayAddr += "/p2p/" + id
		var direct []time.Duration
		unmet := 0
		for i := range tries {
			l := startPunch(t, laptop, bin, "-role", "listen", "-transport", tr.name, "-seed", "laptop",
				"-port", fmt.Sprint(5000+i), "-relay", relayAddr, "-public", lab.Public(Office))
			l.await(t, "reserved")
			d := startPunch(t, phone, bin, "-role", "dial", "-transport", tr.name, "-seed", "phone",
				"-port", fmt.Sprint(6000+i), "-relay", relayAddr, "-public", lab.Public(Cafe), "-target", "laptop")
			// libp2p's relay now and then fails to open the circuit
			// (CONNECTION_FAILED): a try that never met.
			got := d.await(t, "direct ", "relayed ", noCircuit)
			if strings.HasPrefix(got, noCircuit) {
				unmet++
			} else if f := strings.Fields(got); f[0] == "direct" {
				took, err := time.ParseDuration(f[len(f)-1])
				if err != nil {
					t.Fatalf("punch printed %q: %v", got, err)
				}
				direct = append(direct, took)
			}
			l.stop()
			d.stop()
		}
		relay.stop()
		if len(direct) == 0 {
			t.Errorf("%s: no hole punch of %d succeeded", tr.name, tries)
			continue
		}
		slices.Sort(direct)
		r.Note(t, "%s: %d of %d tries connected directly by hole punching (laptop behind the office NAT, phone behind the cafe's, the relay on the NAS at home), %d never met through the relay; from the relayed connection to the direct one: median %v, max %v",
			tr.name, len(direct), tries, unmet, direct[len(direct)/2].Round(time.Millisecond), direct[len(direct)-1].Round(time.Millisecond))
	}
}

// noCircuit starts the line testnet/cmd/punch prints when the relay did
// not connect it to the other side.
const noCircuit = "punch: connect through the relay"

// punchProc is a testnet/cmd/punch process in a node's namespace.
type punchProc struct {
	p     *proc
	lines chan string
}

func startPunch(t TB, n *Node, bin string, args ...string) *punchProc {
	t.Helper()
	pp := &punchProc{lines: make(chan string, 64)}
	argv := append([]string{"ip", "netns", "exec", n.ns, bin}, args...)
	p, err := startProc(argv, os.Environ(), func(line string) {
		n.net.nodeLog(n.name+" punch", line)
		select {
		case pp.lines <- line:
		default:
		}
	})
	if err != nil {
		t.Fatalf("punch: %v", err)
	}
	pp.p = p
	t.Cleanup(pp.stop)
	return pp
}

// await returns the first line that starts with one of prefixes, failing
// the test if the process ends or says nothing of the kind in time.
func (pp *punchProc) await(t TB, prefixes ...string) string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case line := <-pp.lines:
			for _, p := range prefixes {
				if strings.HasPrefix(line, p) {
					return line
				}
			}
			if strings.HasPrefix(line, "[testnet] process exited") || strings.HasPrefix(line, "punch:") {
				t.Fatalf("punch: %s", line)
			}
		case <-deadline:
			t.Fatalf("punch: no line starting with %q within a minute", prefixes)
		}
	}
}

func (pp *punchProc) stop() {
	if !pp.p.exited() {
		pp.p.signal(sigkill)
	}
	<-pp.p.done
}
