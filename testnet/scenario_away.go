package testnet

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/procstat"
)

// Away from home: the scenarios of the NAT lab (natlab.go). The devices
// pair at home, as users do; then some leave. A member reachable from the
// internet (here the NAS, whose port the home router forwards and which
// announces the router's address) carries every change by itself: the
// others sync with it wherever they are.

// awayPort is the NAS's sync port, forwarded by the home router.
const awayPort = 4001

// awaySamples is how many times AwayWrites carries the phone away.
const awaySamples = 20

// awayTarget is how soon a write of the phone made offline should reach
// the e-reader at home once the phone has a network again (p95).
const awayTarget = 2 * time.Second

// awayNet starts the NAS (node1, its port forwarded and announced), the
// e-reader (node2) and n-2 more devices, all at home and paired.
func awayNet(t TB, n int, opts ...LabOption) (*Net, *Lab) {
	t.Helper()
	nt := New(t, n, NoStart())
	nas := nt.Node(1)
	lab := nt.Lab(append([]LabOption{PortForward(nas, awayPort)}, opts...)...)
	nas.SetArgs("--listen", fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", awayPort),
		"--announce", fmt.Sprintf("/ip4/%s/tcp/%d", lab.Public(Home), awayPort))
	nt.StartAll()
	nt.JoinAll()
	return nt, lab
}

// AwayWrites: the phone writes while it has no network, then gets one
// away from home (the mobile network behind carrier-grade NAT, or an
// office's Wi-Fi, taking turns); the e-reader at home has the write soon
// after, through the NAS.
func AwayWrites(t TB, p Params, r *Report) {
	nt, lab := awayNet(t, 3)
	nas, reader, phone := nt.Node(1), nt.Node(2), nt.Node(3)
	var took []time.Duration
	for i := range awaySamples {
		lab.Move(phone, Offline)
		key := BookKey(fmt.Sprintf("away-writes %d", i))
		phone.SetPosition(key, int64(i+1), 0.5, "written away")
		site := []Site{Carrier, Office}[i%2]
		lab.Move(phone, site)
		d := nt.WaitBook(syncTimeout, key, "the phone's write made away, at home", hasPosition, reader, nas)
		took = append(took, d)
		nt.logf("testnet: sample %d: the phone's write was at home %v after the phone got a network at the %s", i, d.Round(time.Millisecond), site)
	}
	slices.Sort(took)
	p95 := took[len(took)*95/100-1]
	r.Note(t, "a write the phone made offline reached the e-reader at home through the NAS after the phone got a network away (carrier-grade NAT or an office, %d times): median %v, p95 %v, max %v",
		len(took), took[len(took)/2].Round(time.Millisecond), p95.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	p.checkTime(t, "the phone's write reaching home (p95)", p95, awayTarget, syncTimeout)
}

func hasPosition(b api.Book) bool { return b.Position != nil }

// AwayThroughHome: the phone on the mobile network and the laptop at an
// office, both away and both behind NAT, the NAS at home reachable. Each
// writes; every device gets both writes, through the NAS, and the away
// devices show the NAS as reached over the internet.
func AwayThroughHome(t TB, p Params, r *Report) {
	nt, lab := awayNet(t, 4)
	nas, reader, phone, laptop := nt.Node(1), nt.Node(2), nt.Node(3), nt.Node(4)
	lab.Move(phone, Carrier)
	lab.Move(laptop, Office)
	fromPhone, fromLaptop := BookKey("away-through-home: the phone"), BookKey("away-through-home: the laptop")
	phone.SetPosition(fromPhone, 1, 0.1, "written on the train")
	laptop.SetPosition(fromLaptop, 2, 0.2, "written at the office")
	took := nt.WaitBook(syncTimeout, fromPhone, "the phone's write", hasPosition, nas, reader, laptop)
	took2 := nt.WaitBook(syncTimeout, fromLaptop, "the laptop's write", hasPosition, nas, reader, phone)
	for _, away := range []*Node{phone, laptop} {
		WaitFor(t, syncTimeout, func() (bool, string) {
			for _, pr := range away.Peers() {
				if pr.Device == nas.Device() && pr.Via != "internet" {
					return false, fmt.Sprintf("%s: the NAS is %s, via %q; want connected via internet", away, pr.State, pr.Via)
				}
			}
			if st := away.Status(); st.Unreachable != "" {
				return false, fmt.Sprintf("%s says no member is reachable: %s", away, st.Unreachable)
			}
			return true, ""
		})
	}
	r.Note(t, "the phone (carrier-grade NAT) and the laptop (an office NAT), both away, converged through the NAS at home: the phone's write everywhere in %v, the laptop's in %v more; both show the NAS connected over the internet",
		took.Round(time.Millisecond), took2.Round(time.Millisecond))
}

// AwayUnreachable: no member can be reached from the internet (no port
// forward, nothing announced). The phone away reaches no member and says
// so, with what to do; as soon as it is home again, its write made away
// reaches the e-reader.
func AwayUnreachable(t TB, p Params, r *Report) {
	nt := New(t, 2)
	reader, phone := nt.Node(1), nt.Node(2)
	lab := nt.Lab()
	lab.Move(phone, Carrier)
	key := BookKey("away-unreachable: written with no member reachable")
	phone.SetPosition(key, 3, 0.3, "written with no member reachable")
	var said string
	WaitFor(t, syncTimeout, func() (bool, string) {
		// Until a dial from the new network has failed, the reason may
		// still be how the old connection ended.
		said = phone.Status().Unreachable
		if !strings.Contains(said, "--announce") || !strings.Contains(said, "(network unreachable)") {
			return false, fmt.Sprintf("%s's status does not say that no member is reachable from its network, why, and what to do: %q", phone, said)
		}
		return true, ""
	})
	lab.Move(phone, Home)
	took := nt.WaitBook(syncTimeout, key, "the phone's write made away", hasPosition, reader)
	if st := phone.Status(); st.Unreachable != "" {
		t.Errorf("%s still says no member is reachable once home: %s", phone, st.Unreachable)
	}
	r.Note(t, "with no member reachable from the internet, the phone away said: %q; home again, its write reached the e-reader %v after it got the home network", said, took.Round(time.Millisecond))
}

// awayRelearn is how soon the phone away should reach the NAS again once
// the home router has a new public address.
const awayRelearn = time.Minute

// AwayNewAddress: the home router is given a new public address while the
// phone is away and connected to the NAS through the name the NAS
// announces (a dynamic DNS name; here the lab's hosts file, changed with
// the address). The connection to the old address is lost without a word.
// The phone's next write ends it (data left unacknowledged); the phone
// redials the name, finds the new address and the write reaches the
// e-reader at home. Then the address changes again and the phone writes
// nothing: its keepalive ends the dead connection, and a write made at
// home reaches it.
func AwayNewAddress(t TB, p Params, r *Report) {
	nt := New(t, 3, NoStart())
	nas, reader, phone := nt.Node(1), nt.Node(2), nt.Node(3)
	lab := nt.Lab(PortForward(nas, awayPort))
	const name = "home.example"
	lab.Resolve(phone, name, lab.Public(Home))
	nas.SetArgs("--listen", fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", awayPort),
		"--announce", fmt.Sprintf("/dns4/%s/tcp/%d", name, awayPort))
	nt.StartAll()
	nt.JoinAll()
	lab.Move(phone, Carrier)
	before := BookKey("away-new-address: written before the change")
	phone.SetPosition(before, 1, 0.1, "written away")
	nt.WaitBook(syncTimeout, before, "the phone's write away", hasPosition, nas, reader)

	lab.Readdress(Home, wanSubnet+"9")
	lab.Resolve(phone, name, lab.Public(Home))
	key := BookKey("away-new-address: written after the change")
	phone.SetPosition(key, 2, 0.2, "written after the change")
	took := nt.WaitBook(awayRelearn+syncTimeout, key, "the phone's write after the home router's new address", hasPosition, nas, reader)
	p.checkTime(t, "the phone's write reaching home after the router's new address", took, awayRelearn, awayRelearn+syncTimeout)

	lab.Readdress(Home, wanSubnet+"10")
	lab.Resolve(phone, name, lab.Public(Home))
	home := BookKey("away-new-address: written at home after the second change")
	reader.SetPosition(home, 3, 0.3, "written at home")
	took2 := nt.WaitBook(awayRelearn+syncTimeout, home, "the e-reader's write after the home router's second new address", hasPosition, phone)
	r.Note(t, "the home router got a new public address while the phone was away and connected through the NAS's announced name: the phone's next write reached the e-reader at home %v later; after a second new address, with the phone idle, a write at home reached the phone %v later",
		took.Round(time.Millisecond), took2.Round(time.Millisecond))
	p.checkTime(t, "a write at home reaching the idle phone after the router's new address", took2, awayRelearn, awayRelearn+syncTimeout)
}

// strangerDials is how many connections AwayStrangers opens to the NAS's
// forwarded port from a host on the internet, strangerWorkers at a time.
const (
	strangerDials   = 10000
	strangerWorkers = 50
)

// AwayStrangers: a forwarded port is open to the whole internet. A
// stranger dials it again and again, each time sending what a member's
// handshake would start with but without the library's key; every such
// connection is dropped, and meanwhile the phone's writes reach the NAS as
// fast as before the flood.
func AwayStrangers(t TB, p Params, r *Report) {
	nt, lab := awayNet(t, 3)
	nas, phone := nt.Node(1), nt.Node(3)
	lab.Move(phone, Carrier)
	stranger := lab.Stranger()
	nt.WaitConnected(syncTimeout, nas, phone)

	writes := func(tag string, n int) []time.Duration {
		var took []time.Duration
		for i := range n {
			key := BookKey(fmt.Sprintf("away-strangers %s %d", tag, i))
			phone.SetPosition(key, int64(i+1), 0.5, "written away")
			took = append(took, nt.WaitBook(syncTimeout, key, "the phone's write", hasPosition, nas))
		}
		slices.Sort(took)
		return took
	}
	before := writes("before", 10)

	target := net.JoinHostPort(lab.Public(Home), strconv.Itoa(awayPort))
	outcomes, err := strangersDial(stranger, target)
	if err != nil {
		t.Fatalf("a stranger in the NAT lab: %v", err)
	}
	during := writes("during", 10)
	var closed []time.Duration
	refused, held := 0, 0
	for range strangerDials {
		o := <-outcomes
		switch {
		case o.refused:
			refused++
		case o.held:
			held++
		default:
			closed = append(closed, o.closedIn)
		}
	}
	slices.Sort(closed)
	slow := len(closed) - sort.Search(len(closed), func(i int) bool { return closed[i] >= time.Second })
	if held > 0 {
		t.Errorf("%d of %d stranger connections were still open after 30 s", held, strangerDials)
	}
	if len(closed) == 0 {
		t.Fatalf("none of %d stranger connections was accepted and then closed (%d refused)", strangerDials, refused)
	}
	r.Note(t, "%d stranger connections to the forwarded port (%d at a time): %d accepted and closed by the NAS a median %v after the stranger's first bytes (p95 %v, max %v; %d after 1 s or more, the handshake's time limit), %d refused, %d held open",
		strangerDials, strangerWorkers, len(closed), closed[len(closed)/2].Round(10*time.Microsecond), closed[len(closed)*95/100].Round(10*time.Microsecond), closed[len(closed)-1].Round(time.Millisecond), slow, refused, held)
	r.Note(t, "the phone's writes reaching the NAS through the forwarded port: median %v before the strangers, %v while they dialled (max %v, %v)",
		before[len(before)/2].Round(time.Millisecond), during[len(during)/2].Round(time.Millisecond), before[len(before)-1].Round(time.Millisecond), during[len(during)-1].Round(time.Millisecond))
}

// strangerOutcome is what became of one stranger's connection.
type strangerOutcome struct {
	closedIn time.Duration // from the stranger's bytes to the NAS closing
	refused  bool          // the connection was not even accepted
	held     bool          // still open when the stranger gave up
}

// strangersDial starts strangerDials connections from the stranger's
// namespace ns to target, strangerWorkers at a time, each sending 64 junk
// bytes and reading until the far end closes; their outcomes arrive on the
// channel as they end.
func strangersDial(ns, target string) (<-chan strangerOutcome, error) {
	jobs := make(chan int)
	results := make(chan strangerOutcome, strangerDials)
	errs := make(chan error, strangerWorkers)
	for range strangerWorkers {
		go func() {
			leave, err := enterNetns(ns)
			if err != nil {
				errs <- err
				return
			}
			defer leave()
			errs <- nil
			junk := make([]byte, 64)
			for range jobs {
				c, err := net.DialTimeout("tcp4", target, 5*time.Second)
				if err != nil {
					results <- strangerOutcome{refused: true}
					continue
				}
				rand.Read(junk)
				start := time.Now()
				c.SetDeadline(start.Add(30 * time.Second))
				_, err = c.Write(junk)
				for err == nil {
					_, err = c.Read(junk)
				}
				var ne net.Error
				results <- strangerOutcome{closedIn: time.Since(start), held: errors.As(err, &ne) && ne.Timeout()}
				c.Close()
			}
		}()
	}
	for range strangerWorkers {
		if err := <-errs; err != nil {
			close(jobs)
			return nil, err
		}
	}
	go func() {
		defer close(jobs)
		for i := range strangerDials {
			jobs <- i
		}
	}()
	return results, nil
}

// portMapTimeout bounds how long a mapped address takes to show among a
// daemon's addresses: libp2p looks at them once a minute (peer/tickers.go).
const portMapTimeout = 3 * time.Minute

// AwayPortMap: the home router maps ports on request (UPnP IGD and
// NAT-PMP) and nothing is forwarded by hand. The NAS, started with
// --port-map, gets a mapping and shares the mapped address with the
// members; the phone away then syncs through it. Then the router restarts
// and forgets the mapping: the NAS maps the same port again, and the
// phone, still away, moves to another network and reaches the NAS at the
// address it knew.
func AwayPortMap(t TB, p Params, r *Report) {
	nt := New(t, 3, NoStart())
	nas, reader, phone := nt.Node(1), nt.Node(2), nt.Node(3)
	lab := nt.Lab(UPnP())
	nas.SetArgs("--listen", fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", awayPort), "--port-map")
	nt.StartAll()
	public := "/ip4/" + lab.Public(Home) + "/tcp/"
	var mapped string
	took := WaitFor(t, portMapTimeout, func() (bool, string) {
		st := nas.Status()
		for _, a := range st.Addresses {
			if strings.HasPrefix(a, public) {
				mapped = a
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s has no address on the home router's %s yet: %v", nas, lab.Public(Home), st.Addresses)
	})
	nt.JoinAll()
	lab.Move(phone, Carrier)
	key := BookKey("away-port-map: written away")
	phone.SetPosition(key, 4, 0.4, "written away")
	took2 := nt.WaitBook(syncTimeout, key, "the phone's write made away", hasPosition, nas, reader)

	// The router restarts and forgets the mapping; the NAS notices at its
	// next renewal and asks for the same port again.
	lab.RebootUPnP()
	rebooted := time.Now()
	took3 := WaitFor(t, awayRelearn+syncTimeout, func() (bool, string) {
		return lab.Mapped(mapped), fmt.Sprintf("the restarted router has no mapping for %s yet", mapped)
	})
	p.checkTime(t, "the NAS's mapping made again after the router's restart", took3, awayRelearn, awayRelearn+syncTimeout)
	// The phone, away all along, gets another network: its old connection
	// is gone and it dials the NAS at the address it was told before.
	lab.Move(phone, Office)
	again := BookKey("away-port-map: written after the router's restart")
	phone.SetPosition(again, 5, 0.5, "written after the restart")
	took4 := nt.WaitBook(syncTimeout, again, "the phone's write away after the router's restart", hasPosition, nas, reader)
	if st := nas.Status(); !slices.Contains(st.Addresses, mapped) {
		t.Errorf("after the router's restart %s no longer shows %s: %v", nas, mapped, st.Addresses)
	}
	r.Note(t, "the NAS asked the home router for a mapping (UPnP/NAT-PMP) and had %s %v after its start; the phone away then synced through it, its write at the e-reader in %v. The router restarted without the mapping: the same port was mapped again %v later; the phone, still away, on another network, had its next write at the e-reader %v after that (%v after the restart)",
		mapped, took.Round(time.Millisecond), took2.Round(time.Millisecond), took3.Round(time.Millisecond), took4.Round(time.Millisecond), time.Since(rebooted).Round(time.Millisecond))
}

// AwayIdle's two windows: the first, awayIdleWindow long, from
// awayIdleSettle after the phone's last write, while its store is still
// open; the steady one, awaySteadyWindow long, from awaySteadyAfter, once
// libp2p's look at the addresses (a minute) has told the members the
// phone's new ones, a write to its store, and the store has then closed
// while idle (a minute, store.DefaultIdleClose).
const (
	awayIdleSettle   = 10 * time.Second
	awaySteadyAfter  = 130 * time.Second
	awayIdleWindow   = 30 * time.Second
	awaySteadyWindow = time.Minute
)

// AwayIdle: the phone away, connected to the NAS at home and idle. What it
// costs: the packets its connection sends through the carrier's NAT (each
// one wakes a phone's radio) and the daemon's wakeups and CPU time, soon
// after its last write and once it has settled.
func AwayIdle(t TB, p Params, r *Report) {
	nt, lab := awayNet(t, 2)
	nas, phone := nt.Node(1), nt.Node(2)
	lab.Move(phone, Carrier)
	nt.WaitConnected(syncTimeout, nas, phone)
	key := BookKey("away-idle: a last write before the quiet")
	phone.SetPosition(key, 5, 0.5, "before the quiet")
	nt.WaitBook(syncTimeout, key, "the phone's write", hasPosition, nas)
	wrote := time.Now()
	pid := phone.pid()
	type cost struct {
		perMin, wakeups float64
		cpu             time.Duration
	}
	// window counts the phone's cost over span from after the write. The sleeps are measuring windows, not waits for a condition.
	window := func(after, span time.Duration) cost {
		time.Sleep(time.Until(wrote.Add(after)))
		sample := func() (int64, procstat.Usage) {
			pkts, err := lab.Forwarded(Carrier)
			if err != nil {
				t.Fatalf("%v", err)
			}
			use, err := procstat.ReadUsage(pid)
			if err != nil {
				t.Fatalf("%s's usage: %v", phone, err)
			}
			return pkts, use
		}
		pkts0, use0 := sample()
		time.Sleep(span)
		pkts1, use1 := sample()
		return cost{
			perMin:  float64(pkts1-pkts0) / span.Minutes(),
			wakeups: float64(use1.Wakeups-use0.Wakeups) / span.Seconds(),
			cpu:     time.Duration(float64(use1.CPU-use0.CPU) / span.Minutes()),
		}
	}
	soon := window(awayIdleSettle, awayIdleWindow)
	steady := window(awaySteadyAfter, awaySteadyWindow)
	if ok, why := connectedTo(phone, []*Node{phone, nas}); !ok {
		t.Errorf("after %v idle: %s", time.Since(wrote).Round(time.Second), why)
	}
	ct, _ := exec.Command("ip", "netns", "exec", lab.routerNS(Carrier), "sysctl", "-n", "net.netfilter.nf_conntrack_tcp_timeout_established").Output()
	r.Note(t, "the phone away, idle and connected to the NAS (the carrier NAT keeps an idle TCP connection %s s), over %v from %v after its last write: %.1f packets a minute through the NAT, %.2f wakeups/s and %v CPU a minute in its daemon; over %v from %v after it: %.1f packets a minute, %.2f wakeups/s, %v CPU a minute",
		strings.TrimSpace(string(ct)), awayIdleWindow, awayIdleSettle, soon.perMin, soon.wakeups, soon.cpu.Round(time.Millisecond),
		awaySteadyWindow, awaySteadyAfter, steady.perMin, steady.wakeups, steady.cpu.Round(time.Millisecond))
	if steady.wakeups > 1 && p.Strict {
		t.Errorf("an idle away device woke %.2f times a second once settled; the target is 1", steady.wakeups)
	}
}
