package testnet

import (
	"math/rand/v2"
	"time"
)

// Params sizes the scenarios; the zero value of a field is its default.
type Params struct {
	Nodes  int // convergence and propagation; default 5
	Ops    int // convergence: random operations; default 300
	Books  int // big heal: books written on one side of a partition; default 10,000
	Writes int // propagation: position writes measured; default 100
	// Devices is how many devices the many-devices scenario runs; default
	// 20.
	Devices int
	// JoinBooks is the library a device joins in the join scenario;
	// default 1,000.
	JoinBooks int
	// Restarts is how many times the restart scenario restarts a node;
	// default 20.
	Restarts int
	// CollectBooks is how many books the collect scenario writes, nine in
	// ten of which it deletes; default 5,000.
	CollectBooks int
	Seed         uint64 // convergence: random seed; default random (logged)
	// PunchTries is how many hole punches away-punch tries, and
	// away-transport per transport; default 50.
	PunchTries int
	// Local runs the scenarios that need no real network (propagation,
	// clock skew, wipe, deletion) on in-process daemons (NewLocal).
	Local bool
	// Strict fails a scenario whose measured time misses its target. The
	// command runs strict; tests do not, because test machines are noisy:
	// there a time only fails far beyond its target, where something is
	// broken rather than slow (a loaded machine stretches every latency
	// many times over), and the figure is logged.
	Strict bool
}

// checkTime fails the scenario when got misses target in a strict run, or
// exceeds bound in any run.
func (p Params) checkTime(t TB, what string, got, target, bound time.Duration) {
	t.Helper()
	limit := bound
	if p.Strict {
		limit = target
	}
	if got > limit {
		t.Errorf("%s took %v; the target is %v", what, got.Round(time.Millisecond), target)
	}
}

// newNet starts the net of a scenario that can run in either mode.
func (p Params) newNet(t TB, n int, opts ...Option) *Net {
	t.Helper()
	if p.Local {
		return NewLocal(t, n, opts...)
	}
	return New(t, n, opts...)
}

// WithDefaults fills in the defaults of the fields left zero, and picks a
// seed.
func (p Params) WithDefaults() Params {
	if p.Nodes <= 0 {
		p.Nodes = 5
	}
	if p.Ops <= 0 {
		p.Ops = 300
	}
	if p.Books <= 0 {
		p.Books = 10000
	}
	if p.Writes <= 0 {
		p.Writes = 100
	}
	if p.Devices <= 0 {
		p.Devices = 20
	}
	if p.JoinBooks <= 0 {
		p.JoinBooks = 1000
	}
	if p.Restarts <= 0 {
		p.Restarts = 20
	}
	if p.Seed == 0 {
		p.Seed = rand.Uint64()
	}
	return p
}

// Scenario is one of the product's promises, proved on a Net.
type Scenario struct {
	Name string
	Run  func(t TB, p Params, r *Report)
}

// Scenarios are all the scenarios, in the order the command runs them.
var Scenarios = []Scenario{
	{"discovery", Discovery},
	{"pair-short-code", PairShortCode},
	{"pair-attack", PairAttack},
	{"forget-offline", ForgetOffline},
	{"forget-rejoin", ForgetRejoin},
	{"forget-rejoin-static", ForgetRejoinStatic},
	{"chain-mesh", ChainMesh},
	{"restart-meet", RestartMeet},
	{"away-writes", AwayWrites},
	{"away-through-home", AwayThroughHome},
	{"away-unreachable", AwayUnreachable},
	{"away-strangers", AwayStrangers},
	{"away-port-map", AwayPortMap},
	{"away-new-address", AwayNewAddress},
	{"away-idle", AwayIdle},
	{"away-punch", AwayPunch},
	{"away-transport", AwayTransport},
	{"collect", Collect},
	{"collect-restore", CollectRestore},
	{"restore-writes", RestoreWrites},
	{"propagation", Propagation},
	{"convergence", Convergence},
	{"clock-skew", ClockSkew},
	{"far-future-clock", FarFutureClock},
	{"crash", Crash},
	{"wipe", Wipe},
	{"deletion", Deletion},
	{"restart", Restart},
	{"lost-peer", LostPeer},
	{"big-heal", BigHeal},
	{"long-partition", LongPartition},
	{"many-devices", ManyDevices},
	{"join", JoinLibrary},
}

// Time limits of the scenarios' waits: generous, for a loaded CI machine;
// the report shows what was measured.
const (
	syncTimeout = 20 * time.Second // a change reaching connected nodes
	healTimeout = 60 * time.Second // convergence after a heal
)
