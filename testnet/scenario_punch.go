package testnet

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// AwayPunch measures NAT hole punching in the lab, for the choice of
// danyue's transport: TCP inside the library's private network (what the
// daemon runs) against QUIC, which libp2p runs only without one. It runs
// testnet/cmd/punch, libp2p's circuit relay and DCUtR, not the daemon: a
// laptop at the office and a phone at the cafe, both behind NATs that keep
// source ports, meet through a relay on the NAS at home (its port
// forwarded) and try to connect directly. Every try is a fresh pair of
// processes on fresh ports, as two devices meeting for the first time.
// The routers drop what comes to them unasked (DropUnsolicited), as home
// routers do.
func AwayPunch(t TB, p Params, r *Report) {
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
		for i := range tries {
			l := startPunch(t, laptop, bin, "-role", "listen", "-transport", tr.name, "-seed", "laptop",
				"-port", fmt.Sprint(5000+i), "-relay", relayAddr, "-public", lab.Public(Office))
			l.await(t, "reserved")
			d := startPunch(t, phone, bin, "-role", "dial", "-transport", tr.name, "-seed", "phone",
				"-port", fmt.Sprint(6000+i), "-relay", relayAddr, "-public", lab.Public(Cafe), "-target", "laptop")
			got := d.await(t, "direct ", "relayed ")
			if f := strings.Fields(got); f[0] == "direct" {
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
		r.Note(t, "%s: %d of %d tries connected directly by hole punching (laptop behind the office NAT, phone behind the cafe's, the relay on the NAS at home); from the relayed connection to the direct one: median %v, max %v",
			tr.name, len(direct), tries, direct[len(direct)/2].Round(time.Millisecond), direct[len(direct)-1].Round(time.Millisecond))
	}
}

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
