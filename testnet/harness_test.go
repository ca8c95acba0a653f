package testnet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon/api"
)

// The oracle, on literal stamps: each rule of crdt's doc once.
func TestOracle(t *testing.T) {
	pos := func(node, key string, char uint64, stamp, title string) Op {
		return Op{Node: node, Kind: OpPosition, Key: key, Title: title,
			Write: &api.Position{Char: char, Device: node, Stamp: stamp}}
	}
	del := func(node, key, stamp string) Op {
		return Op{Node: node, Kind: OpDelete, Key: key, Delete: &api.Book{DeletedStamp: &stamp, DeletedBy: &node}}
	}
	ops := []Op{
		// a: the later position wins; the furthest is the larger char, and
		// of equal chars the later write; the title is the latest that
		// set one.
		pos("x", "a", 500, "002", "First"),
		pos("y", "a", 900, "003", ""),
		pos("x", "a", 900, "004", "Second"),
		pos("y", "a", 100, "005", ""),
		{Node: "x", Kind: OpReadTime, Key: "a", Device: "x", AddMs: 10},
		{Node: "y", Kind: OpReadTime, Key: "a", Device: "y", AddMs: 5},
		{Node: "x", Kind: OpReadTime, Key: "a", Device: "x", AddMs: 7},
		// b: deleted after its last write; c: written after its delete;
		// d: a delete and a write with equal stamps stay deleted.
		pos("x", "b", 1, "010", ""), del("y", "b", "011"),
		del("y", "c", "020"), pos("x", "c", 2, "021", ""),
		pos("x", "d", 3, "030", ""), del("y", "d", "030"),
	}
	got := map[string]api.Book{}
	for _, b := range Oracle(ops) {
		got[b.Key] = b
	}
	a := got["a"]
	if a.Position.Stamp != "005" || a.Furthest.Stamp != "004" || a.Title != "Second" || a.Deleted ||
		a.ReadTime.TotalMs != 22 || a.ReadTime.ByDevice["x"] != 17 || a.ReadTime.ByDevice["y"] != 5 {
		t.Errorf("a = %+v", a)
	}
	if b := got["b"]; !b.Deleted || *b.DeletedStamp != "011" || *b.DeletedBy != "y" {
		t.Errorf("b = %+v, want deleted by y", b)
	}
	if c := got["c"]; c.Deleted || c.DeletedBy != nil || *c.DeletedStamp != "020" {
		t.Errorf("c = %+v, want on the shelf with its delete stamp kept", c)
	}
	if d := got["d"]; !d.Deleted {
		t.Errorf("d = %+v, want deleted (ties go to the delete)", d)
	}
}

// A local node's port lies below every system's ephemeral range: a node
// that restarts must listen at its port again, and while it is down any
// outgoing connection on the machine may take an ephemeral port (CI's race
// tier once lost a restart that way).
func TestLocalPortsBelowEphemeral(t *testing.T) {
	nt := NewLocal(t, 8, NoStart())
	for _, n := range nt.Nodes() {
		if n.port < 1024 || n.port >= 32768 {
			t.Errorf("%s listens at port %d, inside an ephemeral range or a privileged one", n, n.port)
		}
	}
}

// A Net leaves nothing behind: no process, namespace or directory.
func TestCleanup(t *testing.T) {
	var names []string
	var dir string
	t.Run("net", func(t *testing.T) {
		nt := New(t, 2, QuietLogs())
		dir = nt.Dir()
		for _, n := range nt.Nodes() {
			names = append(names, n.Namespace())
		}
		names = append(names, nt.nw.sw)
	})
	if len(names) == 0 {
		t.Skip(skipNoNetns)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range names {
		if strings.Contains(string(out), ns) {
			t.Errorf("namespace %s is still there", ns)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", dir, err)
	}
}

// New sweeps the namespaces and directories of runs whose process is gone.
func TestSweepStale(t *testing.T) {
	if why := netnsMissing(); why != "" {
		t.Skipf("%s (%s)", skipNoNetns, why)
	}
	dead := 1 << 22 // above the default pid_max: never a live process
	ns := fmt.Sprintf("%s%d-beef-sw", prefix, dead)
	if err := ipRun("", "netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-stale", prefix, dead))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	live := fmt.Sprintf("%s%d-beef-sw", prefix, os.Getpid())
	if err := ipRun("", "netns", "add", live); err != nil {
		t.Fatal(err)
	}
	defer ipRun("", "netns", "del", live)
	sweepStale()
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), ns) {
		ipRun("", "netns", "del", ns)
		t.Errorf("stale namespace %s survived the sweep", ns)
	}
	if !strings.Contains(string(out), live) {
		t.Errorf("the sweep removed %s, a namespace of this live process", live)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		os.RemoveAll(dir)
		t.Errorf("stale dir %s survived the sweep", dir)
	}
}

// Run reports a scenario's failure and runs its cleanups, as go test does.
func TestRun(t *testing.T) {
	var order []string
	o := Run("demo", nil, func(t TB) {
		t.Cleanup(func() { order = append(order, "first") })
		t.Cleanup(func() { order = append(order, "second") })
		t.Logf("some log")
		t.Fatalf("it broke: %d", 42)
		order = append(order, "unreachable")
	})
	if !o.Failed || len(o.Messages) != 1 || o.Messages[0] != "it broke: 42" || len(o.Logs) != 1 {
		t.Errorf("outcome = %+v", o)
	}
	if strings.Join(order, ",") != "second,first" {
		t.Errorf("cleanups ran as %v", order)
	}
	if o := Run("skip", nil, func(t TB) { t.Skipf("no") }); !o.Skipped || o.Failed {
		t.Errorf("skip outcome = %+v", o)
	}
	if o := Run("panic", nil, func(t TB) { panic("boom") }); !o.Failed || !strings.Contains(o.Messages[0], "boom") {
		t.Errorf("panic outcome = %+v", o)
	}
}
