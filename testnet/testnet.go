package testnet

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/testport"
)

// Net is a set of danyue daemons on one LAN (New) or on loopback (NewLocal).
type Net struct {
	t     TB
	local bool
	cfg   config
	bin   string   // the danyue binary (process mode)
	nw    *network // nil in local mode
	dir   string   // temporary root of the data dirs

	mu     sync.Mutex
	nodes  []*Node
	silent atomic.Bool // no more t.Logf: the test is over
	closed sync.Once
}

type config struct {
	noStart  bool
	noJoin   bool
	offsets  map[int]time.Duration
	logLevel string
	args     []string
	quiet    bool
	noPeers  bool
}

// Option configures New and NewLocal.
type Option func(*config)

// NoStart creates the nodes without starting them: set clock offsets, then
// StartAll and JoinAll.
func NoStart() Option { return func(c *config) { c.noStart = true } }

// NoJoin starts the nodes but leaves each in a library of its own.
func NoJoin() Option { return func(c *config) { c.noJoin = true } }

// ClockOffset shifts node i's (1-based) wall clock by d from its first start.
func ClockOffset(i int, d time.Duration) Option {
	return func(c *config) { c.offsets[i] = d }
}

// LogLevelEnv names an environment variable that sets the daemons'
// default --log-level (info if unset), e.g. debug to follow mDNS.
const LogLevelEnv = "DANYUE_TESTNET_LOG_LEVEL"

// LogLevel sets the daemons' --log-level (default info, or $LogLevelEnv).
func LogLevel(level string) Option { return func(c *config) { c.logLevel = level } }

// DaemonArgs adds arguments to every `danyue daemon` command line (process
// mode only).
func DaemonArgs(args ...string) Option { return func(c *config) { c.args = append(c.args, args...) } }

// NoStaticPeers starts in-process nodes (NewLocal) without the others as
// static peers: a node finds another only from an invite code and from
// what the members tell it, as devices on a network without multicast do.
func NoStaticPeers() Option { return func(c *config) { c.noPeers = true } }

// QuietLogs keeps the daemons' log lines in Node.Logs without copying each
// to the test's log.
func QuietLogs() Option { return func(c *config) { c.quiet = true } }

// New starts n danyue daemon processes, node1 to nodeN, each in its own
// network namespace on one bridged LAN that carries multicast, joins them
// into node1's library with invite and join, and waits until every node is
// connected to every other. Everything it made is removed when the test ends
// (t.Cleanup), or when the process gets SIGINT or SIGTERM. Without root and
// iproute2 it skips the test.
func New(t TB, n int, opts ...Option) *Net {
	t.Helper()
	if why := netnsMissing(); why != "" {
		t.Skipf("%s (%s)", skipNoNetns, why)
	}
	bin, err := Binary()
	if err != nil {
		t.Fatalf("testnet: %v", err)
	}
	nt := newNet(t, false, opts)
	nt.bin = bin
	if nt.nw, err = newNetwork(); err != nil {
		t.Fatalf("testnet: build the network: %v", err)
	}
	nt.logf("testnet: LAN %s0/24 in namespaces %s-*", nt.nw.subnet, nt.nw.id)
	nt.setup(n)
	return nt
}

func newNet(t TB, local bool, opts []Option) *Net {
	cfg := config{logLevel: "info", offsets: map[int]time.Duration{}}
	if l := os.Getenv(LogLevelEnv); l != "" {
		cfg.logLevel = l
	}
	for _, o := range opts {
		o(&cfg)
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
	if err != nil {
		t.Fatalf("testnet: %v", err)
	}
	nt := &Net{t: t, local: local, cfg: cfg, dir: dir}
	register(nt)
	t.Cleanup(nt.close)
	return nt
}

func (nt *Net) setup(n int) {
	nt.t.Helper()
	for i := 1; i <= n; i++ {
		nt.addNode(fmt.Sprintf("node%d", i))
	}
	if nt.cfg.noStart {
		return
	}
	nt.StartAll()
	if !nt.cfg.noJoin {
		nt.JoinAll()
	}
}

// addNode creates a node (its namespace, in process mode) without starting it.
func (nt *Net) addNode(name string) *Node {
	nt.t.Helper()
	nt.mu.Lock()
	i := len(nt.nodes) + 1
	nt.mu.Unlock()
	n := &Node{net: nt, index: i, name: name, dir: fmt.Sprintf("%s/%d", nt.dir, i), offset: nt.cfg.offsets[i]}
	n.c = client.New(n.Socket())
	if nt.local {
		// Below the ephemeral range: a node that restarts must find its
		// port free, and any outgoing connection may take an ephemeral one.
		n.port = testport.Loopback(nt.t)
	} else {
		var err error
		if n.ns, n.ip, err = nt.nw.addHost(i); err != nil {
			nt.t.Fatalf("testnet: add %s: %v", name, err)
		}
	}
	nt.mu.Lock()
	nt.nodes = append(nt.nodes, n)
	nt.mu.Unlock()
	return n
}

// AddNode adds a node named name and starts it, in a library of its own.
func (nt *Net) AddNode(name string) *Node {
	nt.t.Helper()
	n := nt.addNode(name)
	n.Start()
	return n
}

// Nodes returns the nodes in order.
func (nt *Net) Nodes() []*Node {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	return append([]*Node(nil), nt.nodes...)
}

// Node returns node i, 1-based.
func (nt *Net) Node(i int) *Node { return nt.Nodes()[i-1] }

// Dir returns the temporary directory holding the nodes' data dirs.
func (nt *Net) Dir() string { return nt.dir }

// StartAll starts every node that is not running, all at once (in order, in
// local mode), and returns once every API answers.
func (nt *Net) StartAll() {
	nt.t.Helper()
	if nt.local {
		// One after the other: each is given the addresses of those
		// before it as static peers.
		for _, n := range nt.Nodes() {
			if !n.Running() {
				n.Start()
			}
		}
		return
	}
	nt.each(nt.Nodes(), func(n *Node) error {
		if n.Running() {
			return nil
		}
		return n.start()
	})
}

// StopAll stops every running node, all at once.
func (nt *Net) StopAll() {
	nt.t.Helper()
	nt.each(nt.Nodes(), func(n *Node) error { return n.stop(sigterm) })
}

// each runs fn on every node concurrently and fails the test with the errors.
func (nt *Net) each(nodes []*Node, fn func(*Node) error) {
	nt.t.Helper()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = fn(n) })
	}
	wg.Wait()
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		nt.t.Fatalf("%s", strings.Join(msgs, "\n"))
	}
}

// JoinAll joins every other node into node1's library and waits until all
// are connected to all.
func (nt *Net) JoinAll() {
	nt.t.Helper()
	nodes := nt.Nodes()
	for _, n := range nodes[1:] {
		nt.Join(n, nodes[0])
	}
	nt.WaitConnected(15*time.Second, nodes...)
}

// Join makes n join the library of via: via invites, n joins, as a user
// does with `danyue invite` and `danyue join CODE`.
func (nt *Net) Join(n, via *Node) {
	nt.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, err := via.Client().Invite(ctx)
	if err != nil {
		nt.t.Fatalf("%s: invite: %v", via.name, err)
	}
	if _, err := n.Client().Join(ctx, code); err != nil {
		nt.t.Fatalf("%s: join %s's library: %v", n.name, via.name, err)
	}
}

// Traffic returns what the sync protocol of every node moved, summed.
func (nt *Net) Traffic() api.Traffic {
	var sum api.Traffic
	for _, n := range nt.Nodes() {
		sum = addTraffic(sum, n.Traffic())
	}
	return sum
}

// logf logs to the test unless it is over or the logs are quiet.
func (nt *Net) logf(format string, args ...any) {
	if nt.silent.Load() {
		return
	}
	nt.t.Logf(format, args...)
}

// nodeLog logs one line of a node's log, prefixed with its name.
func (nt *Net) nodeLog(name, line string) {
	// A daemon built with the race detector reports a race on stderr and
	// goes on; the scenario must not pass with it.
	if strings.HasPrefix(line, "WARNING: DATA RACE") {
		nt.t.Errorf("%s: the race detector found a data race; its report is in %s's log", name, name)
	}
	if !nt.cfg.quiet {
		nt.logf("%s: %s", name, line)
	}
}

// close stops every daemon, deletes every namespace and removes the data
// dirs. It is the test's cleanup, and runs once.
func (nt *Net) close() {
	nt.closed.Do(func() {
		unregister(nt)
		nodes := nt.Nodes()
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				// A clean stop where it is quick, so the daemons' own
				// shutdown is exercised; a kill otherwise.
				n.mu.Lock()
				p, d := n.proc, n.local
				n.mu.Unlock()
				switch {
				case d != nil:
					if err := n.stop(sigterm); err != nil {
						nt.t.Logf("testnet: %v", err)
					}
				case p != nil:
					p.signal(sigterm)
					if !p.wait(5 * time.Second) {
						nt.t.Logf("testnet: %s did not exit within 5s of SIGTERM; its goroutines follow (SIGQUIT)", n.name)
						p.signal(sigquit)
						if !p.wait(5 * time.Second) {
							p.signal(sigkill)
						}
						<-p.done
					}
					n.c.Close()
				}
			})
		}
		wg.Wait()
		if nt.cfg.quiet && nt.t.Failed() {
			// The lines were kept, not logged: show the end of each.
			for _, n := range nodes {
				nt.t.Logf("%s: last log lines:\n%s", n.name, n.tail(40))
			}
		}
		nt.silent.Store(true)
		if nt.nw != nil {
			if err := nt.nw.close(); err != nil {
				nt.t.Logf("testnet: %v", err)
			}
		}
		os.RemoveAll(nt.dir)
	})
}
