package testnet

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// Targets the product promises (issue 7).
const (
	TargetDiscovery   = time.Second
	TargetPropagation = 100 * time.Millisecond // p99
	TargetHeal10k     = 2 * time.Second        // convergence after heal, 10,000 books
)

// Report collects what scenarios measured. Every method is safe on a nil
// *Report, so tests that do not report pass nil.
type Report struct {
	mu          sync.Mutex
	Outcomes    []Outcome
	Discovery   []Timing // per node: from its launch until connected to all
	Heals       []Timing // per heal: from the heal until every node is equal
	Propagation []time.Duration
	PropMethod  string
	Traffic     []ScenarioTraffic
	Notes       []string
}

// Timing is one measured duration.
type Timing struct {
	Scenario string
	What     string
	Took     time.Duration
	Target   time.Duration // 0: none
}

// ScenarioTraffic is what the sync protocols of a scenario's nodes moved.
type ScenarioTraffic struct {
	Scenario string
	Nodes    int
	api.Traffic
}

func (r *Report) add(f func()) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// Discovered records how long a node took to connect to all others.
func (r *Report) Discovered(t TB, what string, took time.Duration) {
	t.Helper()
	t.Logf("measured: %s: %v (target %v)", what, took.Round(time.Millisecond), TargetDiscovery)
	r.add(func() { r.Discovery = append(r.Discovery, Timing{t.Name(), what, took, TargetDiscovery}) })
}

// Healed records how long the nodes took to converge after what.
func (r *Report) Healed(t TB, what string, took, target time.Duration) {
	t.Helper()
	t.Logf("measured: %s: converged in %v", what, took.Round(time.Millisecond))
	r.add(func() { r.Heals = append(r.Heals, Timing{t.Name(), what, took, target}) })
}

// Propagated records propagation latencies, measured by method.
func (r *Report) Propagated(method string, d ...time.Duration) {
	r.add(func() { r.PropMethod = method; r.Propagation = append(r.Propagation, d...) })
}

// Moved records what a scenario's nodes exchanged.
func (r *Report) Moved(t TB, nodes int, tr api.Traffic) {
	t.Helper()
	t.Logf("measured: traffic of %d nodes: %d bytes sent, %d received, %d records sent", nodes, tr.BytesSent, tr.BytesReceived, tr.RecordsSent)
	r.add(func() { r.Traffic = append(r.Traffic, ScenarioTraffic{t.Name(), nodes, tr}) })
}

// Note records a fact worth reading in the report.
func (r *Report) Note(t TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Logf("note: %s", msg)
	r.add(func() { r.Notes = append(r.Notes, t.Name()+": "+msg) })
}

// Finished records how a scenario ended.
func (r *Report) Finished(o Outcome) { r.add(func() { r.Outcomes = append(r.Outcomes, o) }) }

// Percentile returns the p-th percentile (0-100) of ds, nearest rank.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Write prints the report for people.
func (r *Report) Write(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	verdict := func(d, target time.Duration) string {
		switch {
		case target == 0:
			return ""
		case d <= target:
			return fmt.Sprintf("  (target %v: met)", target)
		default:
			return fmt.Sprintf("  (target %v: MISSED)", target)
		}
	}
	fmt.Fprintf(w, "\nDiscovery (mDNS only, from each daemon's launch until it lists every other member connected)\n")
	for _, d := range r.Discovery {
		fmt.Fprintf(w, "  %-40s %10s%s\n", d.What, ms(d.Took), verdict(d.Took, d.Target))
	}
	fmt.Fprintf(w, "\nConvergence after heal (from the heal, or the rejoin, until every node returns identical books)\n")
	for _, h := range r.Heals {
		fmt.Fprintf(w, "  %-14s %-40s %10s%s\n", h.Scenario, h.What, ms(h.Took), verdict(h.Took, h.Target))
	}
	if n := len(r.Propagation); n > 0 {
		p50, p99 := Percentile(r.Propagation, 50), Percentile(r.Propagation, 99)
		fmt.Fprintf(w, "\nPropagation of a position write to every other node (%s)\n", r.PropMethod)
		fmt.Fprintf(w, "  samples %d   p50 %s   p99 %s%s   max %s\n", n, ms(p50), ms(p99), verdict(p99, TargetPropagation), ms(Percentile(r.Propagation, 100)))
	}
	fmt.Fprintf(w, "\nBytes exchanged by the sync protocol (Status.Traffic, summed over nodes and restarts)\n")
	for _, tr := range r.Traffic {
		fmt.Fprintf(w, "  %-14s %d nodes: %12d bytes sent %12d received %8d records sent %8d received\n",
			tr.Scenario, tr.Nodes, tr.BytesSent, tr.BytesReceived, tr.RecordsSent, tr.RecordsReceived)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(w, "\nNotes\n")
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	fmt.Fprintf(w, "\nScenarios\n")
	for _, o := range r.Outcomes {
		state := "PASS"
		switch {
		case o.Failed:
			state = "FAIL"
		case o.Skipped:
			state = "SKIP"
		}
		fmt.Fprintf(w, "  %-4s %-14s %8.1fs\n", state, o.Name, o.Duration.Seconds())
		for _, m := range o.Messages {
			fmt.Fprintf(w, "         %s\n", strings.ReplaceAll(m, "\n", "\n         "))
		}
	}
}
