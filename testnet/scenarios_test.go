package testnet

import (
	"flag"
	"testing"
)

var (
	flagNodes = flag.Int("testnet.nodes", 5, "nodes of the convergence and propagation scenarios")
	flagOps   = flag.Int("testnet.ops", 300, "random operations of the convergence scenario")
	flagBooks = flag.Int("testnet.books", 10000, "books of the big-heal scenario")
	flagSeed  = flag.Uint64("testnet.seed", 0, "seed of the convergence scenario (0: random, logged)")
	flagLong  = flag.Bool("testnet.long", false, "also run the scenarios that take over a minute")
	flagDevs  = flag.Int("testnet.devices", 20, "devices of the many-devices scenario")
	flagJoin  = flag.Int("testnet.joinbooks", 1000, "books of the library the join scenario joins")
)

func params() Params {
	return Params{Nodes: *flagNodes, Ops: *flagOps, Books: *flagBooks, Seed: *flagSeed, Devices: *flagDevs, JoinBooks: *flagJoin}
}

// The scenarios, on daemon processes in network namespaces (skipped without
// root and iproute2). The measurements are in the test log (-v). They run
// beside each other (at most -parallel at once, GOMAXPROCS by default):
// each has networks of its own and its daemons mostly wait on timers and
// the network, so one after another they would outlast go test's time
// limit on a loaded machine.

func TestDiscovery(t *testing.T)      { t.Parallel(); Discovery(t, params(), nil) }
func TestPairShortCode(t *testing.T)  { t.Parallel(); PairShortCode(t, params(), nil) }
func TestPairAttack(t *testing.T)     { t.Parallel(); PairAttack(t, params(), nil) }
func TestPropagation(t *testing.T)    { t.Parallel(); Propagation(t, params(), nil) }
func TestConvergence(t *testing.T)    { t.Parallel(); Convergence(t, params(), nil) }
func TestClockSkew(t *testing.T)      { t.Parallel(); ClockSkew(t, params(), nil) }
func TestFarFutureClock(t *testing.T) { t.Parallel(); FarFutureClock(t, params(), nil) }
func TestCrash(t *testing.T)          { t.Parallel(); Crash(t, params(), nil) }
func TestWipe(t *testing.T)           { t.Parallel(); Wipe(t, params(), nil) }
func TestDeletion(t *testing.T)       { t.Parallel(); Deletion(t, params(), nil) }
func TestRestart(t *testing.T)        { long(t); Restart(t, params(), nil) }
func TestLostPeer(t *testing.T)       { long(t); LostPeer(t, params(), nil) }
func TestBigHeal(t *testing.T)        { long(t); BigHeal(t, params(), nil) }
func TestManyDevices(t *testing.T)    { long(t); ManyDevices(t, params(), nil) }
func TestJoinLibrary(t *testing.T)    { long(t); JoinLibrary(t, params(), nil) }
func TestCollect(t *testing.T)        { long(t); Collect(t, params(), nil) }
func TestCollectRestore(t *testing.T) { long(t); CollectRestore(t, params(), nil) }

func TestRestoreWrites(t *testing.T) { long(t); RestoreWrites(t, params(), nil) }

func TestForgetRejoin(t *testing.T)       { t.Parallel(); ForgetRejoin(t, params(), nil) }
func TestForgetRejoinStatic(t *testing.T) { t.Parallel(); ForgetRejoinStatic(t, params(), nil) }
func TestChainMesh(t *testing.T)          { t.Parallel(); ChainMesh(t, params(), nil) }
func TestRestartMeet(t *testing.T)        { t.Parallel(); RestartMeet(t, params(), nil) }

func TestLongPartition(t *testing.T) {
	if !*flagLong {
		t.Skip("takes over a minute (a partition must outlast the connection keepalive); run with -testnet.long")
	}
	LongPartition(t, params(), nil)
}

// long skips a scenario that takes long under -short (the race tier of CI
// runs the others, on daemons built with the race detector, and the whole
// list runs in the plain tier), and otherwise runs it beside the others.
func long(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long scenario; it runs without -short")
	}
	t.Parallel()
}

// TestLocal runs the scenarios that need no real network on in-process
// daemons: quick, and possible without root.
func TestLocal(t *testing.T) {
	p := params()
	// In one process, every daemon on the test's CPU and, under -race,
	// every one instrumented: a tenth of the collect scenario's books.
	p.Local, p.Nodes, p.Writes, p.CollectBooks = true, 3, 30, 500
	for _, s := range []Scenario{{"deletion", Deletion}, {"clock-skew", ClockSkew}, {"far-future-clock", FarFutureClock}, {"wipe", Wipe}, {"propagation", Propagation}, {"collect", Collect}} {
		t.Run(s.Name, func(t *testing.T) { s.Run(t, p, nil) })
	}
}
