package testnet

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// Timeouts of the node lifecycle.
const (
	readyTimeout = 20 * time.Second // from launch until the API answers
	stopTimeout  = 15 * time.Second // from SIGTERM until exit (the daemon allows 10 s to drain)
)

// Node is one danyue daemon of a Net: a process in its own network namespace
// (New) or a daemon inside this process (NewLocal). Its data dir survives
// Stop, Kill and Restart; only Wipe removes it. Methods that change its state
// fail the test on error, so call them from the test's goroutine.
type Node struct {
	net   *Net
	index int // 1-based
	name  string
	dir   string // data dir
	ns    string // network namespace; "" in local mode
	ip    string // IPv4 address on the LAN; "" in local mode
	port  int    // local mode: the fixed libp2p port on 127.0.0.1
	c     *client.Client

	mu        sync.Mutex
	offset    time.Duration
	args      []string // its own daemon arguments, after the Net's
	proc      *proc
	local     *daemon.Daemon
	startedAt time.Time
	device    string
	addrs     []string    // local mode: libp2p addresses with /p2p, as last seen
	traffic   api.Traffic // moved by earlier runs of this data dir
	logs      []string    // the last maxNodeLogs lines
}

const maxNodeLogs = 2000

// Name returns the node's name: node1, node2... (its --name).
func (n *Node) Name() string   { return n.name }
func (n *Node) String() string { return n.name }

// Index returns the node's number, 1-based.
func (n *Node) Index() int { return n.index }

// DataDir returns the node's --data dir; Socket the API's unix socket in it.
func (n *Node) DataDir() string { return n.dir }
func (n *Node) Socket() string  { return daemon.DefaultSocket(n.dir) }

// Namespace and IP return the node's network namespace and IPv4 address on
// the LAN; both are empty in local mode.
func (n *Node) Namespace() string { return n.ns }
func (n *Node) IP() string        { return n.ip }

// pid is the process id of the node's daemon (process mode, running): `ip
// netns exec` execs it in place.
func (n *Node) pid() int {
	defer n.lock()()
	if n.proc == nil {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// Client returns the typed API client of the node; it stays valid across
// restarts.
func (n *Node) Client() *client.Client { return n.c }

// Running reports whether the daemon runs: started, and neither stopped,
// killed nor exited on its own.
func (n *Node) Running() bool {
	defer n.lock()()
	return (n.proc != nil && !n.proc.exited()) || n.local != nil
}

// StartedAt returns when the node's current (or last) run was launched.
func (n *Node) StartedAt() time.Time { defer n.lock()(); return n.startedAt }

// ClockOffset returns the wall clock shift of the node's next start.
func (n *Node) ClockOffset() time.Duration { defer n.lock()(); return n.offset }

func (n *Node) lock() func() { n.mu.Lock(); return n.mu.Unlock }

// Device returns the node's device id, known once it has started; a wipe
// gives the node a new one.
func (n *Node) Device() string { defer n.lock()(); return n.device }

// Logs returns the node's last log lines (each also went to the test's log,
// prefixed with the node's name).
func (n *Node) Logs() []string { defer n.lock()(); return append([]string(nil), n.logs...) }

func (n *Node) emit(line string) {
	n.mu.Lock()
	if len(n.logs) == maxNodeLogs {
		n.logs = append(n.logs[:0], n.logs[maxNodeLogs/2:]...)
	}
	n.logs = append(n.logs, line)
	n.mu.Unlock()
	n.net.nodeLog(n.name, line)
}

// SetClockOffset shifts the node's wall clock by d (DANYUE_CLOCK_OFFSET)
// from its next start on.
func (n *Node) SetClockOffset(d time.Duration) { defer n.lock()(); n.offset = d }

// SetArgs gives the node's `danyue daemon` command line these arguments,
// after those of DaemonArgs, from its next start on (process mode only).
func (n *Node) SetArgs(args ...string) { defer n.lock()(); n.args = args }

// Start starts the node and returns once its API answers.
func (n *Node) Start() {
	n.net.t.Helper()
	if err := n.start(); err != nil {
		n.net.t.Fatalf("%v", err)
	}
}

// Stop stops the node with SIGTERM (in local mode: Close) and waits for it
// to exit; it fails the test unless the daemon shut down cleanly.
func (n *Node) Stop() {
	n.net.t.Helper()
	if err := n.stop(syscall.SIGTERM); err != nil {
		n.net.t.Fatalf("%v", err)
	}
}

// Kill kills the node's process with SIGKILL: a crash, or a power cut as
// far as the daemon can tell. Process mode only.
func (n *Node) Kill() {
	n.net.t.Helper()
	if n.net.local {
		n.net.t.Fatalf("%s: Kill needs a daemon process (New), not an in-process one (NewLocal)", n.name)
	}
	if err := n.stop(syscall.SIGKILL); err != nil {
		n.net.t.Fatalf("%v", err)
	}
}

// Restart stops the node if it runs and starts it again on the same data dir.
func (n *Node) Restart() {
	n.net.t.Helper()
	n.Stop()
	n.Start()
}

// Wipe stops the node if it runs and removes its data dir: the device is
// gone, its identity and library with it. Start then makes a new device.
func (n *Node) Wipe() {
	n.net.t.Helper()
	n.Stop()
	if err := os.RemoveAll(n.dir); err != nil {
		n.net.t.Fatalf("%s: wipe: %v", n.name, err)
	}
	n.mu.Lock()
	n.device, n.addrs = "", nil
	n.mu.Unlock()
}

func (n *Node) start() error {
	if n.Running() {
		return fmt.Errorf("%s: start: already running", n.name)
	}
	if err := n.launch(); err != nil {
		return err
	}
	return n.waitReady()
}

// launch starts the daemon without waiting for its API.
func (n *Node) launch() error {
	if n.net.local {
		return n.startLocal()
	}
	n.mu.Lock()
	offset, own := n.offset, n.args
	n.mu.Unlock()
	argv := []string{"ip", "netns", "exec", n.ns, n.net.bin, "daemon", "--data", n.dir, "--name", n.name,
		"--log-level", n.net.cfg.logLevel,
		// No undo window: the scenarios (Collect, the oracles' Uncollected)
		// see a delete collected once every node holds it.
		"--keep-deleted", "0"}
	argv = append(argv, n.net.cfg.args...)
	argv = append(argv, own...)
	env := os.Environ()
	if os.Getenv("GOMAXPROCS") == "" {
		// A daemon runs with more Ps than its device has cores (minProcs
		// in cmd/danyue), so that during a burst the kernel time-slices
		// its threads. The nodes of a net are devices sharing this
		// machine's cores, up to 20 of them, which oversubscribes the
		// cores already: more Ps per node only add switching between
		// them, and slowed propagation across many-devices. So each node
		// gets Go's default of a P per core.
		env = append(env, "GOMAXPROCS="+strconv.Itoa(runtime.NumCPU()))
	}
	if offset != 0 {
		env = append(env, "DANYUE_CLOCK_OFFSET="+offset.String())
	}
	p, err := startProc(argv, env, n.emit)
	if err != nil {
		return fmt.Errorf("%s: start: %w", n.name, err)
	}
	n.mu.Lock()
	n.proc, n.startedAt = p, p.started
	n.mu.Unlock()
	return nil
}

// waitReady polls the API until it answers, the process exits, or
// readyTimeout passes.
func (n *Node) waitReady() error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	var st api.Status
	_, err := Poll(readyTimeout, func() (bool, string) {
		if p != nil && p.exited() {
			return true, ""
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var err error
		st, err = n.c.Status(ctx)
		if err != nil {
			return false, fmt.Sprintf("%s: API not answering: %v", n.name, err)
		}
		// The API answers before the peer network is up (and invite
		// fails until it is); addresses show it is.
		if len(st.Addresses) == 0 {
			return false, fmt.Sprintf("%s: API answers but the peer network is not up yet", n.name)
		}
		return true, ""
	})
	if p != nil && p.exited() {
		return fmt.Errorf("%s: daemon exited at start (%v); its last lines:\n%s", n.name, p.err, n.tail(20))
	}
	if err != nil {
		return fmt.Errorf("%v; its last lines:\n%s", err, n.tail(20))
	}
	n.mu.Lock()
	n.device = st.Device.ID
	if n.net.local {
		n.addrs = n.addrs[:0]
		for _, a := range st.Addresses {
			if strings.HasPrefix(a, "/ip4/127.0.0.1/") {
				n.addrs = append(n.addrs, a)
			}
		}
	}
	n.mu.Unlock()
	return nil
}

func (n *Node) tail(k int) string {
	logs := n.Logs()
	if len(logs) > k {
		logs = logs[len(logs)-k:]
	}
	return "    " + strings.Join(logs, "\n    ")
}

// stop ends the running daemon with sig (SIGTERM: a clean stop, which must
// succeed; SIGKILL: a crash) and waits for it.
func (n *Node) stop(sig syscall.Signal) error {
	n.mu.Lock()
	p, d := n.proc, n.local
	n.mu.Unlock()
	if p == nil && d == nil {
		return nil
	}
	n.saveTraffic()
	var err error
	if d != nil {
		err = d.Close()
		if err != nil {
			err = fmt.Errorf("%s: close: %w", n.name, err)
		}
	} else {
		p.signal(sig)
		if !p.wait(stopTimeout) {
			p.signal(syscall.SIGKILL)
			<-p.done
			err = fmt.Errorf("%s: still running %v after %v; killed it", n.name, stopTimeout, sig)
		} else if sig == syscall.SIGTERM && p.err != nil {
			err = fmt.Errorf("%s: unclean exit after SIGTERM: %v; its last lines:\n%s", n.name, p.err, n.tail(20))
		}
	}
	n.c.Close() // its idle connections are to a dead socket
	n.mu.Lock()
	n.proc, n.local = nil, nil
	n.mu.Unlock()
	return err
}

// saveTraffic adds what the current run moved to the node's total, so
// Traffic counts across restarts (a crash loses at most what moved since the
// last Status).
func (n *Node) saveTraffic() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := n.c.Status(ctx)
	if err != nil {
		return
	}
	n.mu.Lock()
	n.traffic = addTraffic(n.traffic, st.Traffic)
	n.mu.Unlock()
}

// Traffic returns what the node's sync protocol moved over all its runs.
func (n *Node) Traffic() api.Traffic {
	n.mu.Lock()
	t := n.traffic
	n.mu.Unlock()
	if !n.Running() {
		return t
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if st, err := n.c.Status(ctx); err == nil {
		t = addTraffic(t, st.Traffic)
	}
	return t
}

func addTraffic(a, b api.Traffic) api.Traffic {
	return api.Traffic{BytesSent: a.BytesSent + b.BytesSent, BytesReceived: a.BytesReceived + b.BytesReceived,
		RecordsSent: a.RecordsSent + b.RecordsSent, RecordsReceived: a.RecordsReceived + b.RecordsReceived}
}
