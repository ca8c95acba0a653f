package testnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"
)

// The NAT lab: the LAN of New becomes a home network behind a router, and
// beside it an "internet" and other networks a device can be carried to, so
// that the away-* scenarios prove sync between devices that are not on one
// LAN. Like the LAN, everything lives in namespaces this process created:
//
//   - the internet is a bridge (brwan) in the switch namespace on
//     11.0.0.0/24. Not 198.51.100.0/24, the block meant for examples:
//     miniupnpd, the UPnP and NAT-PMP daemon of a home router here, maps
//     no port on a reserved address. No route joins the namespaces to the
//     host, so nothing sent to it leaves them;
//   - each site is a router namespace with eth0 on the internet and eth1 on
//     the site's own bridge, which masquerades (source NAT) what its devices
//     send out; a site's devices have it as their default route;
//   - home is the LAN of New (its bridge br0 and subnet), whose router can
//     forward a port to one device, as a user sets up on a home router,
//     and can run miniupnpd, which maps ports for the devices that ask;
//   - carrier is a phone's mobile network behind carrier-grade NAT: a
//     100.64.0.0/24 subnet (the shared address space of RFC 6598) whose
//     router picks a random public port for every connection
//     (masquerade fully-random: address- and port-dependent mapping);
//   - office and cafe are other LANs, each behind a NAT of its own that
//     keeps a device's source port where it is free (masquerade): the
//     "easy" NATs of hole punching;
//   - offline is a bridge with no router: a device there has no network.
//
// The routers have no route to the sites' private subnets, so a device that
// dials a LAN address of another site gets no answer, as on the internet.

// Site is a network of the NAT lab.
type Site string

// The sites of the NAT lab.
const (
	Home    Site = "home"
	Carrier Site = "carrier"
	Office  Site = "office"
	Cafe    Site = "cafe"
	Offline Site = "offline"
)

// siteNet is a site's bridge, subnet (with a trailing dot; a device's
// address is subnet+index, the router's subnet+254) and public address.
type siteNet struct {
	bridge int
	subnet string
	public string
	nat    string // the masquerade statement of its router
}

// wanSubnet is the internet of the lab.
const wanSubnet = "11.0.0."

// Lab is the NAT lab of a Net (Net.Lab).
type Lab struct {
	nt    *Net
	sites map[Site]siteNet
	where map[*Node]Site
	upnp  *proc // the home router's miniupnpd, with UPnP()
}

// LabOption configures the NAT lab.
type LabOption func(*labConfig)

type labConfig struct {
	forward     *Node
	forwardPort int
	upnp        bool
	drop        bool
}

// DropUnsolicited makes every router drop what comes to its own public
// address unasked, as most home routers do, rather than refuse it: a
// connection attempt there waits out its retries instead of failing at
// once, which hole punching needs (the peer's first packet may come before
// this side's own has opened the NAT).
func DropUnsolicited() LabOption { return func(c *labConfig) { c.drop = true } }

// UPnP runs miniupnpd on the home router: UPnP IGD and NAT-PMP, mapping
// ports (1024 and up) for the devices of the home LAN that ask.
func UPnP() LabOption { return func(c *labConfig) { c.upnp = true } }

// PortForward makes the home router forward port (TCP and UDP) to n, on
// the same port: what a user sets up to reach a device at home from anywhere.
func PortForward(n *Node, port int) LabOption {
	return func(c *labConfig) { c.forward, c.forwardPort = n, port }
}

// labMissing returns why the NAT lab cannot be built here, or "".
func labMissing() string {
	if why := netnsMissing(); why != "" {
		return why
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return "no nft command in PATH (nftables; .ci/run installs it)"
	}
	return ""
}

// upnpMissing returns why the home router cannot run miniupnpd, or "".
func upnpMissing() string {
	if _, err := exec.LookPath("miniupnpd"); err != nil {
		return "no miniupnpd in PATH (miniupnpd-nftables; .ci/run installs it)"
	}
	return ""
}

// Lab turns the LAN into the home site of a NAT lab and builds the other
// sites (see above). Every node is at home. It skips the test where the
// lab cannot be built.
func (nt *Net) Lab(opts ...LabOption) *Lab {
	nt.t.Helper()
	if nt.nw == nil {
		nt.t.Fatalf("testnet: the NAT lab needs network namespaces (New), not NewLocal")
	}
	var cfg labConfig
	for _, o := range opts {
		o(&cfg)
	}
	why := labMissing()
	if why == "" && cfg.upnp {
		why = upnpMissing()
	}
	if why != "" {
		nt.t.Skipf("testnet: the NAT lab: %s", why)
	}
	l := &Lab{nt: nt, where: map[*Node]Site{}, sites: map[Site]siteNet{
		Home:    {bridge: 0, subnet: nt.nw.subnet, public: wanSubnet + "1", nat: "masquerade"},
		Carrier: {bridge: 101, subnet: "100.64.0.", public: wanSubnet + "2", nat: "masquerade fully-random"},
		Office:  {bridge: 102, subnet: "172.16.0.", public: wanSubnet + "3", nat: "masquerade"},
		Cafe:    {bridge: 104, subnet: "172.17.0.", public: wanSubnet + "4", nat: "masquerade"},
		Offline: {bridge: 103},
	}}
	nw := nt.nw
	nw.mu.Lock()
	cmds := nw.bridgeCmds(100) // brwan
	for _, s := range []Site{Carrier, Office, Cafe, Offline} {
		cmds = append(cmds, nw.bridgeCmds(l.sites[s].bridge)...)
	}
	nw.mu.Unlock()
	if err := nw.batch(nw.sw, cmds); err != nil {
		nt.t.Fatalf("testnet: the NAT lab: %v", err)
	}
	for _, s := range []Site{Home, Carrier, Office, Cafe} {
		var forward string
		if s == Home && cfg.forward != nil {
			forward = fmt.Sprintf("iifname eth0 meta l4proto { tcp, udp } th dport %d dnat ip to %s:%d", cfg.forwardPort, cfg.forward.ip, cfg.forwardPort)
		}
		if err := l.router(s, forward, cfg.drop); err != nil {
			nt.t.Fatalf("testnet: the NAT lab: %s router: %v", s, err)
		}
	}
	if cfg.upnp {
		if err := l.startUPnP(); err != nil {
			nt.t.Fatalf("testnet: the NAT lab: miniupnpd: %v", err)
		}
	}
	for _, n := range nt.Nodes() {
		l.where[n] = Home
		if err := nw.batch(n.ns, []string{"route replace default via " + nw.subnet + "254"}); err != nil {
			nt.t.Fatalf("testnet: the NAT lab: %s: %v", n, err)
		}
	}
	nt.logf("testnet: NAT lab: internet %s0/24; home %s0/24 behind %s; carrier 100.64.0.0/24 behind %s (fully random ports); office 172.16.0.0/24 behind %s; cafe 172.17.0.0/24 behind %s",
		wanSubnet, nw.subnet, l.sites[Home].public, l.sites[Carrier].public, l.sites[Office].public, l.sites[Cafe].public)
	return l
}

// router creates the router namespace of site s, with the dnat rule
// forward if not empty, dropping what comes to it unasked if drop.
func (l *Lab) router(s Site, forward string, drop bool) error {
	nw, sn := l.nt.nw, l.sites[s]
	ns := l.routerNS(s)
	if err := ipRun("", "netns", "add", ns); err != nil {
		return err
	}
	nw.mu.Lock()
	nw.hosts = append(nw.hosts, ns)
	nw.mu.Unlock()
	wan, lan := "w"+string(s), "l"+string(s)
	err := nw.batch(ns, []string{
		fmt.Sprintf("link add eth0 type veth peer name %s netns %s", wan, nw.sw),
		fmt.Sprintf("link add eth1 type veth peer name %s netns %s", lan, nw.sw),
		fmt.Sprintf("addr add %s/24 dev eth0", sn.public),
		fmt.Sprintf("addr add %s254/24 dev eth1", sn.subnet),
		"link set lo up", "link set eth0 up", "link set eth1 up",
	})
	if err != nil {
		return err
	}
	err = nw.batch(nw.sw, []string{
		"link set " + wan + " master br100", "link set " + wan + " up",
		fmt.Sprintf("link set %s master br%d", lan, sn.bridge), "link set " + lan + " up",
	})
	if err != nil {
		return err
	}
	// The chains miniupnpd adds its rules to are there on every router,
	// and stay empty where it does not run (the names are its defaults).
	var input string
	if drop {
		input = `
  chain input {
    type filter hook input priority 0; policy accept;
    iifname eth0 ct state new drop
  }`
	}
	rules := `table inet filter {
  chain forward {
    type filter hook forward priority 0; policy accept;
    counter
    jump miniupnpd
  }
  chain miniupnpd {
  }` + input + `
}
table inet nat {
  chain prerouting {
    type nat hook prerouting priority dstnat;
    jump prerouting_miniupnpd
    ` + forward + `
  }
  chain postrouting {
    type nat hook postrouting priority srcnat;
    jump postrouting_miniupnpd
    oifname eth0 ` + sn.nat + `
  }
  chain prerouting_miniupnpd {
  }
  chain postrouting_miniupnpd {
  }
}
`
	if err := nsRun(ns, rules, "nft", "-f", "-"); err != nil {
		return err
	}
	return nsRun(ns, "", "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
}

// miniupnpdConf is the home router's miniupnpd.conf: UPnP IGD and NAT-PMP
// on the LAN side, mappings to the asking device only (secure mode), ports
// 1024 and up, its rules in the chains router makes.
const miniupnpdConf = `ext_ifname=eth0
listening_ip=eth1
enable_upnp=yes
enable_natpmp=yes
secure_mode=yes
system_uptime=yes
upnp_table_name=filter
upnp_nat_table_name=nat
upnp_forward_chain=miniupnpd
upnp_nat_chain=prerouting_miniupnpd
upnp_nat_postrouting_chain=postrouting_miniupnpd
uuid=6e0b5a1c-9f1e-4c38-9d4b-0a3c5e7d2f10
allow 1024-65535 0.0.0.0/0 1024-65535
deny 0-65535 0.0.0.0/0 0-65535
`

// startUPnP runs miniupnpd in the home router's namespace until the net
// closes.
func (l *Lab) startUPnP() error {
	nt := l.nt
	conf := filepath.Join(nt.dir, "miniupnpd.conf")
	if err := os.WriteFile(conf, []byte(miniupnpdConf), 0o600); err != nil {
		return err
	}
	ns := l.routerNS(Home)
	p, err := startProc([]string{"ip", "netns", "exec", ns, "miniupnpd", "-d", "-f", conf, "-P", filepath.Join(nt.dir, "miniupnpd.pid")},
		os.Environ(), func(line string) { nt.nodeLog("miniupnpd", line) })
	if err != nil {
		return err
	}
	if l.upnp == nil {
		nt.t.Cleanup(func() {
			l.upnp.signal(sigkill)
			<-l.upnp.done
		})
	}
	l.upnp = p
	return nil
}

// RebootUPnP is the home router restarting with UPnP() on: its miniupnpd
// is killed, the mappings it had made are gone from the router's rules,
// and a new one starts with none.
func (l *Lab) RebootUPnP() {
	l.nt.t.Helper()
	l.upnp.signal(sigkill)
	<-l.upnp.done
	err := nsRun(l.routerNS(Home), `flush chain inet filter miniupnpd
flush chain inet nat prerouting_miniupnpd
flush chain inet nat postrouting_miniupnpd
`, "nft", "-f", "-")
	if err == nil {
		err = l.startUPnP()
	}
	if err != nil {
		l.nt.t.Fatalf("testnet: the home router's UPnP after a reboot: %v", err)
	}
	l.nt.logf("testnet: the home router's miniupnpd restarted with no mappings (%s)", time.Now().Format("15:04:05.000"))
}

// Mapped reports whether the home router's miniupnpd holds a mapping for
// the port of addr (a multiaddr), as its rules show.
func (l *Lab) Mapped(addr string) bool {
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return false
	}
	port, err := m.ValueForProtocol(ma.P_TCP)
	if err != nil {
		return false
	}
	out, err := l.chain(Home, "nat", "prerouting_miniupnpd")
	return err == nil && strings.Contains(out, "dport "+port+" ")
}

// routerNS is the namespace of site s's router.
func (l *Lab) routerNS(s Site) string { return fmt.Sprintf("%s-r%s", l.nt.nw.id, s) }

// nsRun runs a command inside namespace ns, with stdin if not empty.
func nsRun(ns, stdin string, args ...string) error {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s in %s: %w: %s", strings.Join(args, " "), ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Public is the internet address of site s's router.
func (l *Lab) Public(s Site) string { return l.sites[s].public }

// Where is the site node n is at.
func (l *Lab) Where(n *Node) Site { return l.where[n] }

// Move carries node n to site s: its port moves to the site's bridge, and
// its address and default route become the site's, as when a phone leaves
// the home Wi-Fi for the mobile network. Its daemon keeps running and sees
// its address change; connections it had stay open until they fail, as
// they do on a real device.
func (l *Lab) Move(n *Node, s Site) {
	l.nt.t.Helper()
	from, to := l.sites[l.where[n]], l.sites[s]
	nw := l.nt.nw
	nw.mu.Lock()
	err := nw.batch(nw.sw, []string{fmt.Sprintf("link set v%d master br%d", n.index, to.bridge)})
	nw.mu.Unlock()
	if err == nil && from.subnet != to.subnet {
		cmds := []string{"addr flush dev eth0 scope global"}
		if to.subnet != "" {
			cmds = append(cmds,
				fmt.Sprintf("addr add %s%d/24 dev eth0", to.subnet, n.index),
				"route replace 224.0.0.0/4 dev eth0",
				fmt.Sprintf("route replace default via %s254", to.subnet))
		}
		err = nw.batch(n.ns, cmds)
	}
	if err != nil {
		l.nt.t.Fatalf("testnet: move %s to %s: %v", n, s, err)
	}
	l.where[n] = s
	l.nt.logf("testnet: %s moved to %s (%s)", n, s, time.Now().Format("15:04:05.000"))
}

// Readdress gives site s's router the public address public, as when a
// home router is given a new one by its provider: the old one is gone at
// once, and with it every connection made to it. The router's connection
// tracking would carry on a connection to the old address for as long as
// the neighbours' caches still sent it there, so the router drops what
// still comes to it, or would leave it, with the old address, as the
// provider's network would.
func (l *Lab) Readdress(s Site, public string) {
	l.nt.t.Helper()
	sn := l.sites[s]
	err := l.nt.nw.batch(l.routerNS(s), []string{
		// In this order: deleting a primary address deletes the
		// secondary ones of its subnet with it.
		fmt.Sprintf("addr del %s/24 dev eth0", sn.public),
		fmt.Sprintf("addr add %s/24 dev eth0", public),
	})
	if err == nil {
		err = nsRun(l.routerNS(s), `table inet gone {
  chain in {
    type filter hook prerouting priority raw;
    iifname eth0 ip daddr `+sn.public+` drop
  }
  chain out {
    type filter hook postrouting priority srcnat + 10;
    oifname eth0 ip saddr `+sn.public+` drop
  }
}
`, "nft", "-f", "-")
	}
	if err != nil {
		l.nt.t.Fatalf("testnet: new address for the %s router: %v", s, err)
	}
	sn.public = public
	l.sites[s] = sn
	l.nt.logf("testnet: the %s router's public address is now %s (%s)", s, public, time.Now().Format("15:04:05.000"))
}

// Resolve makes name resolve to addr for node n: the lab's DNS, a hosts
// file for n's namespace (/etc/netns/NS/hosts, which ip netns exec mounts
// over /etc/hosts for what it runs). Call it before n starts; a later call
// rewrites the file in place, which a running daemon's resolver reads
// again within seconds, as a dynamic DNS name changes.
func (l *Lab) Resolve(n *Node, name, addr string) {
	l.nt.t.Helper()
	dir := filepath.Join("/etc/netns", n.ns)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		l.nt.t.Cleanup(func() { os.RemoveAll(dir) })
	}
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "hosts"), []byte("127.0.0.1 localhost\n"+addr+" "+name+"\n"), 0o644)
	}
	if err != nil {
		l.nt.t.Fatalf("testnet: the NAT lab's DNS for %s: %v", n, err)
	}
}

// strangerAddr is where Stranger's host is on the internet.
const strangerAddr = wanSubnet + "66"

// Stranger creates a host on the internet that belongs to no one's
// library, and returns its namespace: where the away-strangers scenario
// dials from.
func (l *Lab) Stranger() string {
	l.nt.t.Helper()
	nw := l.nt.nw
	ns := nw.id + "-stranger"
	err := ipRun("", "netns", "add", ns)
	if err == nil {
		nw.mu.Lock()
		nw.hosts = append(nw.hosts, ns)
		nw.mu.Unlock()
		err = nw.batch(ns, []string{
			"link add eth0 type veth peer name wstranger netns " + nw.sw,
			"addr add " + strangerAddr + "/24 dev eth0",
			"link set lo up", "link set eth0 up",
		})
	}
	if err == nil {
		err = nw.batch(nw.sw, []string{"link set wstranger master br100", "link set wstranger up"})
	}
	if err != nil {
		l.nt.t.Fatalf("testnet: the NAT lab: a stranger: %v", err)
	}
	return ns
}

// Forwarded returns how many packets site s's router has forwarded, both
// ways, since the lab was built.
func (l *Lab) Forwarded(s Site) (int64, error) {
	out, err := l.chain(s, "filter", "forward")
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(out)
	for i, f := range fields {
		if f == "packets" && i+1 < len(fields) {
			return strconv.ParseInt(fields[i+1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no packet counter in the %s router's forward chain: %s", s, out)
}

// chain lists chain of the inet table table on site s's router, as nft
// prints it.
func (l *Lab) chain(s Site, table, chain string) (string, error) {
	ns := l.routerNS(s)
	out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "chain", "inet", table, chain).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nft list chain inet %s %s in %s: %w: %s", table, chain, ns, err, out)
	}
	return string(out), nil
}
