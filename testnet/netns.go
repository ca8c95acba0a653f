package testnet

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The network of New: one "switch" namespace holding Linux bridges with
// multicast snooping off, and one namespace per node whose eth0 is one end of
// a veth pair; the other end is a port of a bridge in the switch namespace.
// All nodes on br0 form one LAN; a partition moves ports to other bridges,
// which the nodes cannot tell from a switch that stopped forwarding between
// them. Nothing here touches the host's own interfaces, routes or sysctls:
// everything is created inside namespaces this process created, and deleting
// them deletes it all.

// prefix starts the name of every namespace and temporary dir the harness
// creates, followed by the PID of the process that created it, so a later
// run can sweep what a killed run left behind.
const prefix = "dytn"

// skipNoNetns is the message of a test that cannot build namespaces.
const skipNoNetns = "testnet: needs root and iproute2 (ip); .ci/run installs iproute2"

// netnsMissing returns why namespaces cannot be built here, or "".
func netnsMissing() string {
	var why []string
	if os.Geteuid() != 0 {
		why = append(why, "not running as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		why = append(why, "no ip command in PATH")
	}
	return strings.Join(why, ", ")
}

type network struct {
	id     string // prefix<pid>-<random>: starts the name of each namespace
	subnet string // "10.a.b." : node i is 10.a.b.i/24
	sw     string // the switch namespace

	mu      sync.Mutex
	bridges map[int]bool // bridges br<N> that exist in sw
	hosts   []string     // node namespaces, in creation order
}

func newNetwork() (*network, error) {
	sweepOnce.Do(sweepStale)
	var r [4]byte
	rand.Read(r[:])
	id := fmt.Sprintf("%s%d-%x", prefix, os.Getpid(), r[:2])
	nw := &network{id: id, subnet: fmt.Sprintf("10.%d.%d.", r[2], r[3]), sw: id + "-sw", bridges: map[int]bool{}}
	if err := ipRun("", "netns", "add", nw.sw); err != nil {
		return nil, err
	}
	if err := nw.batch(nw.sw, nw.bridgeCmds(0)); err != nil {
		nw.close()
		return nil, err
	}
	return nw, nil
}

// addHost creates the namespace of node i (1-based), plugged into br0, and
// returns its name and IPv4 address.
func (nw *network) addHost(i int) (ns, ip string, err error) {
	ns = fmt.Sprintf("%s-n%d", nw.id, i)
	ip = nw.subnet + strconv.Itoa(i)
	if err := ipRun("", "netns", "add", ns); err != nil {
		return "", "", err
	}
	nw.mu.Lock()
	nw.hosts = append(nw.hosts, ns)
	nw.mu.Unlock()
	// Addresses must not stay tentative (duplicate address detection), or
	// IPv6 mDNS queries fail for the first seconds. The sysctl is the new
	// namespace's own, set before its eth0 exists.
	dad := `for f in all default; do p=/proc/sys/net/ipv6/conf/$f/accept_dad; [ -e $p ] && echo 0 > $p; done; true`
	if err := ipRun("", "netns", "exec", ns, "sh", "-c", dad); err != nil {
		return "", "", err
	}
	port := fmt.Sprintf("v%d", i)
	err = nw.batch(ns, []string{
		fmt.Sprintf("link add eth0 type veth peer name %s netns %s", port, nw.sw),
		fmt.Sprintf("addr add %s/24 dev eth0", ip),
		"link set lo up",
		"link set eth0 up",
		// hashicorp/mdns joins IPv4 multicast on the interface its route
		// names; a namespace without a default route needs this one.
		"route add 224.0.0.0/4 dev eth0",
	})
	if err != nil {
		return "", "", err
	}
	if err := nw.batch(nw.sw, []string{"link set " + port + " master br0", "link set " + port + " up"}); err != nil {
		return "", "", err
	}
	return ns, ip, nil
}

func (nw *network) bridgeCmds(b int) []string {
	if nw.bridges[b] {
		return nil
	}
	nw.bridges[b] = true
	name := fmt.Sprintf("br%d", b)
	return []string{
		"link add " + name + " type bridge mcast_snooping 0 stp_state 0",
		"link set " + name + " up",
	}
}

// place puts the port of each node index on the bridge of its group:
// bridge[i] is the bridge number of node i.
func (nw *network) place(bridge map[int]int) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var cmds []string
	for i, b := range bridge {
		cmds = append(cmds, nw.bridgeCmds(b)...)
		cmds = append(cmds, fmt.Sprintf("link set v%d master br%d", i, b))
	}
	return nw.batch(nw.sw, cmds)
}

// close deletes every namespace of the net, which deletes its links and
// bridges. Processes must have exited first.
func (nw *network) close() error {
	nw.mu.Lock()
	names := append(append([]string(nil), nw.hosts...), nw.sw)
	nw.hosts = nil
	nw.mu.Unlock()
	var errs []error
	for _, ns := range names {
		if err := ipRun("", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// batch runs ip commands inside namespace ns.
func (nw *network) batch(ns string, cmds []string) error {
	if len(cmds) == 0 {
		return nil
	}
	return ipRun(strings.Join(cmds, "\n")+"\n", "-n", ns, "-batch", "-")
}

// ipRun runs ip with args, and stdin as its input if not empty.
func ipRun(stdin string, args ...string) error {
	cmd := exec.Command("ip", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if stdin != "" {
			stdin = " <<EOF\n" + stdin + "EOF"
		}
		return fmt.Errorf("ip %s%s: %w: %s", strings.Join(args, " "), stdin, err, strings.TrimSpace(out.String()))
	}
	return nil
}

var sweepOnce sync.Once

// sweepStale deletes the namespaces, temporary dirs and lab hosts files
// (/etc/netns, natlab.go's Resolve) of earlier runs whose process is gone
// (killed before its cleanup ran); their daemons died with them
// (Pdeathsig).
func sweepStale() {
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if pid, ok := stalePID(e.Name()); ok && !alive(pid) {
				_ = ipRun("", "netns", "del", e.Name())
			}
		}
	}
	for _, dir := range []string{os.TempDir(), "/etc/netns"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if pid, ok := stalePID(e.Name()); ok && !alive(pid) {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
}

// stalePID parses prefix<pid>-... names.
func stalePID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
}

// Isolate cuts nodes off the LAN, each on its own; the others stay together.
func (nt *Net) Isolate(nodes ...*Node) {
	nt.t.Helper()
	groups := make([][]*Node, len(nodes))
	for i, n := range nodes {
		groups[i] = []*Node{n}
	}
	nt.Partition(groups...)
}

// Partition splits the LAN: each group gets a switch of its own; nodes in
// no group stay on the main one. The nodes' own interfaces are not touched:
// packets between groups are simply no longer forwarded.
func (nt *Net) Partition(groups ...[]*Node) {
	nt.t.Helper()
	if nt.nw == nil {
		nt.t.Fatalf("testnet: Partition needs network namespaces (New), not NewLocal")
	}
	bridge := map[int]int{}
	for _, n := range nt.Nodes() {
		bridge[n.index] = 0
	}
	var desc []string
	for g, group := range groups {
		var names []string
		for _, n := range group {
			bridge[n.index] = g + 1
			names = append(names, n.name)
		}
		desc = append(desc, "{"+strings.Join(names, " ")+"}")
	}
	if err := nt.nw.place(bridge); err != nil {
		nt.t.Fatalf("testnet: partition: %v", err)
	}
	if len(groups) == 0 {
		nt.logf("testnet: healed: every node on one LAN (%s)", time.Now().Format("15:04:05.000"))
	} else {
		nt.logf("testnet: partitioned: %s | the rest (%s)", strings.Join(desc, " | "), time.Now().Format("15:04:05.000"))
	}
}

// Heal puts every node back on one LAN.
func (nt *Net) Heal() {
	nt.t.Helper()
	nt.Partition()
}
