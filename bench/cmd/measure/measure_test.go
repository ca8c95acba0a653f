//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	// The flood phase runs this binary again as its GET meter.
	if v := os.Getenv(meterEnv); v != "" {
		os.Exit(runMeter(v))
	}
	os.Exit(m.Run())
}

// buildDanyue builds the checkout's daemon, as the command does without -bin.
func buildDanyue(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "danyue")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/danyue/danyue/cmd/danyue")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build danyue: %v\n%s", err, out)
	}
	return bin
}

// sane bounds every figure of a phase: what each must at least and at
// most be for a daemon of a few hundred books on any machine that runs the
// tests, loaded or not. The upper bounds catch a unit gone wrong (kB for
// MB, ns for ms), not a slow machine.
var sane = map[string][2]float64{
	"/s":        {0.001, 1e7},
	"ms":        {0.001, 120_000},
	"s":         {0.0001, 600},
	"MB":        {0.5, 2000},
	"ms/min":    {0, 60_000 * 64},
	"records/s": {1, 1e7},
	"us/write":  {1, 1e6},
	"/write":    {0.01, 1000},
	"":          {0, 0}, // counts of errors: none
}

// TestMeasureEveryPhase runs every phase, at a few hundred books, on the
// daemon of this checkout under two names, and checks each table: a row per
// run in turns, every figure present and of a sane size. It checks that the
// command measures, not what it measures.
func TestMeasureEveryPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every phase on real daemons; it runs without -short")
	}
	bin := buildDanyue(t)
	args := []string{"-bin", "A=" + bin, "-bin", "B=" + bin, "-runs", "1", "-books", "300", "-ops", "400",
		"-samples", "20", "-gap", "10ms", "-burst", "20", "-settle-before", "200ms", "-settle", "1s", "-idle-after", "2s", "-idle-window", "1s", "-after-writes", "1s",
		"-flood-records", "400", "-timeout", "2m", "-work", t.TempDir(), "-json", filepath.Join(t.TempDir(), "r.json")}
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep, err := measure(context.Background(), cfg, &out, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if got := len(rep.Phases); got != len(phases) {
		t.Fatalf("%d phases measured, want %d", got, len(phases))
	}
	for _, pr := range rep.Phases {
		t.Run(pr.Phase, func(t *testing.T) {
			if builds := []string{pr.Runs[0].Build, pr.Runs[1].Build}; len(pr.Runs) != 2 || !slices.Equal(builds, []string{"A", "B"}) {
				t.Fatalf("runs %+v, want one of A then one of B", pr.Runs)
			}
			for _, r := range pr.Runs {
				if r.Error != "" || r.Unsupported != "" {
					t.Fatalf("%s: error %q, unsupported %q", r.Build, r.Error, r.Unsupported)
				}
				checkMetrics(t, r)
			}
			checkTable(t, pr.table(), pr)
		})
	}
	if _, err := os.Stat(cfg.jsonPath); err != nil {
		t.Errorf("no JSON written: %v", err)
	}
}

func checkMetrics(t *testing.T, r runResult) {
	t.Helper()
	names := map[string]bool{}
	for _, m := range r.Metrics {
		names[m.Name] = true
		bounds, ok := sane[m.Unit]
		if !ok {
			t.Errorf("%s: %s has unit %q, which the test does not know", r.Build, m.Name, m.Unit)
			continue
		}
		// A heap figure is missing when no collection ran in the window.
		if math.IsNaN(m.Value) && strings.Contains(m.Name, "heap") {
			continue
		}
		// A quiet daemon may not wake at all in a window of a second.
		if strings.Contains(m.Name, "wakeups") {
			bounds[0] = 0
		}
		if math.IsNaN(m.Value) || m.Value < bounds[0] || m.Value > bounds[1] {
			t.Errorf("%s: %s = %v %s, want %v to %v", r.Build, m.Name, m.Value, m.Unit, bounds[0], bounds[1])
		}
	}
	for _, must := range []string{"anon peak", "file peak", "VmHWM"} {
		if !slices.ContainsFunc(r.Metrics, func(m metric) bool { return strings.HasSuffix(m.Name, must) }) {
			t.Errorf("%s: no %q among %v", r.Build, must, names)
		}
	}
	p50, p99 := valueOf(r.Metrics, "p50"), valueOf(r.Metrics, "p99")
	if p50 > p99 {
		t.Errorf("%s: p50 %v above p99 %v", r.Build, p50, p99)
	}
	anon, hwm := valueOf(r.Metrics, "anon peak"), valueOf(r.Metrics, "VmHWM")
	if anon > hwm {
		t.Errorf("%s: anonymous peak %v MB above VmHWM %v MB, which counts it", r.Build, anon, hwm)
	}
}

// checkTable checks a phase's table: a title, a header row and a rule, and
// a row per run with a cell per column.
func checkTable(t *testing.T, table string, pr phaseResult) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if !strings.HasPrefix(lines[0], "## "+pr.Phase+": ") {
		t.Errorf("table starts %q", lines[0])
	}
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "|") {
			rows = append(rows, l)
		}
	}
	if want := 2 + len(pr.Runs); len(rows) != want {
		t.Fatalf("%d table lines, want %d:\n%s", len(rows), want, table)
	}
	cells := strings.Count(rows[0], "|")
	if want := 4 + len(pr.columns()); cells != want {
		t.Errorf("header has %d bars, want %d: %s", cells, want, rows[0])
	}
	for _, row := range rows[1:] {
		if strings.Count(row, "|") != cells {
			t.Errorf("row %q has not the header's %d cells", row, cells-1)
		}
	}
}

// TestTable checks the table of a phase whose runs went every way: medians
// per build over its good runs, and a note for each run that failed or
// that a build does not support.
func TestTable(t *testing.T) {
	run := func(b string, n int, v ...float64) runResult {
		r := runResult{Build: b, Run: n, Load: 1}
		for i, x := range v {
			r.Metrics = append(r.Metrics, metric{Name: fmt.Sprintf("m%d", i), Unit: "ms", Value: x})
		}
		return r
	}
	pr := phaseResult{Phase: "p", About: "a phase", Runs: []runResult{
		run("A", 1, 1, 10), {Build: "B", Run: 1, Unsupported: "no pages"},
		run("A", 2, 3, math.NaN()), run("A", 3, 2, 30), {Build: "A", Run: 4, Error: "daemon ended"},
	}}
	got := pr.table()
	want := `## p: a phase

| build | run         | load | m0 (ms) | m1 (ms) |
| ----- | ----------- | ---- | ------- | ------- |
| A     | 1           | 1.0  | 1.0     | 10.0    |
| A     | 2           | 1.0  | 3.0     | -       |
| A     | 3           | 1.0  | 2.0     | 30.0    |
| A     | median of 3 |      | 2.0     | 20.0    |

- B: not supported by this build: no pages
- A, run 4: failed: daemon ended
`
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-phase", "write,nap"}, `no phase "nap"`},
		{[]string{"-runs", "0"}, "must be positive"},
		{[]string{"-env", "GOGC"}, "not KEY=VALUE"},
		{[]string{"extra"}, "takes no arguments"},
		{[]string{"-frobnicate"}, "not defined"},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseFlags(%q) = %v, want an error saying %q", tt.args, err, tt.want)
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// A figure that could not be measured is null in JSON, which has no NaN.
func TestMetricJSON(t *testing.T) {
	for _, tt := range []struct {
		m    metric
		want string
	}{
		{metric{Name: "p50", Unit: "ms", Value: 1.5}, `{"name":"p50","unit":"ms","value":1.5}`},
		{metric{Name: "heap at GC", Unit: "MB", Value: math.NaN()}, `{"name":"heap at GC","unit":"MB","value":null}`},
		{metric{Name: "GET errors", Value: 0}, `{"name":"GET errors","value":0}`},
	} {
		got, err := json.Marshal(tt.m)
		if err != nil || string(got) != tt.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tt.m, got, err, tt.want)
		}
	}
}
