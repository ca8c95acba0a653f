//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/danyue/danyue/internal/procstat"
)

// metric is one figure of a run. A value that could not be measured (no
// garbage collection in the window, say) is NaN, null in JSON.
type metric struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit,omitempty"`
	Value float64 `json:"value"`
}

func (m metric) MarshalJSON() ([]byte, error) {
	type plain metric
	if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
		return json.Marshal(struct {
			plain
			Value *float64 `json:"value"`
		}{plain: plain(m)})
	}
	return json.Marshal(plain(m))
}

// runResult is one run of a phase on a build.
type runResult struct {
	Build       string   `json:"build"`
	Run         int      `json:"run"`
	Load        float64  `json:"load"`  // the machine's load average over the minute before the run
	Busy        float64  `json:"busy"`  // the machine's CPU busy during the run, a fraction
	Steal       float64  `json:"steal"` // the machine's CPU stolen by its hypervisor during the run, a fraction
	Seconds     float64  `json:"seconds"`
	Metrics     []metric `json:"metrics,omitempty"`
	Error       string   `json:"error,omitempty"`
	Unsupported string   `json:"unsupported,omitempty"`
	Notes       []string `json:"notes,omitempty"`
}

// phaseResult is every run of a phase.
type phaseResult struct {
	Phase string      `json:"phase"`
	About string      `json:"about"`
	Runs  []runResult `json:"runs"`
}

// report is a whole session.
type report struct {
	Date    time.Time     `json:"date"`
	Commit  string        `json:"commit,omitempty"` // of the checkout the command ran in
	Machine machine       `json:"machine"`
	Builds  []build       `json:"builds"`
	Config  reportConfig  `json:"config"`
	Phases  []phaseResult `json:"phases"`
	LoadEnd float64       `json:"loadEnd"`
}

type machine struct {
	CPUs   int     `json:"cpus"`
	Model  string  `json:"model,omitempty"`
	Kernel string  `json:"kernel,omitempty"`
	Load   float64 `json:"load"` // at the start
}

type reportConfig struct {
	Runs         int    `json:"runs"`
	Books        int    `json:"books"`
	Ops          int    `json:"ops"`
	Samples      int    `json:"samples"`
	Gap          string `json:"gap"`
	Burst        int    `json:"burst"`
	Before       string `json:"settleBefore"`
	Settle       string `json:"settle"`
	IdleAfter    string `json:"idleAfter"`
	IdleWindow   string `json:"idleWindow"`
	FloodRecords int    `json:"floodRecords"`
}

func newReport(cfg config, builds []build) *report {
	r := &report{Date: time.Now().UTC().Truncate(time.Second), Builds: builds}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		r.Commit = strings.TrimSpace(string(out))
	}
	r.Machine.CPUs = runtime.NumCPU()
	r.Machine.Load, _ = procstat.Load()
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		r.Machine.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				r.Machine.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	r.Config = reportConfig{Runs: cfg.runs, Books: cfg.books, Ops: cfg.ops, Samples: cfg.samples, Gap: cfg.gap.String(), Burst: cfg.burst,
		Before: cfg.before.String(), Settle: cfg.settle.String(), IdleAfter: cfg.idleAfter.String(), IdleWindow: cfg.idleWindow.String(), FloodRecords: cfg.flood}
	return r
}

func (r *report) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "danyue measurements, %s, checkout %s\n", r.Date.Format(time.RFC3339), r.Commit)
	fmt.Fprintf(&b, "machine: %d CPUs (%s), Linux %s, load %.2f at the start\n", r.Machine.CPUs, r.Machine.Model, r.Machine.Kernel, r.Machine.Load)
	for _, bd := range r.Builds {
		fmt.Fprintf(&b, "build %s: %s (%s)\n", bd.Name, bd.Path, bd.GoVersion)
	}
	return b.String()
}

func (r *report) finish() { r.LoadEnd, _ = procstat.Load() }

func (r *report) writeJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// columns returns the metrics' names and units in the order runs give them.
func (p phaseResult) columns() []metric {
	var cols []metric
	for _, r := range p.Runs {
		for _, m := range r.Metrics {
			if !slices.ContainsFunc(cols, func(c metric) bool { return c.Name == m.Name }) {
				cols = append(cols, metric{Name: m.Name, Unit: m.Unit})
			}
		}
	}
	return cols
}

// table renders the phase as a Markdown table: a row per run, in the order
// they ran, then each build's medians; then what failed or is not
// supported.
func (p phaseResult) table() string {
	cols := p.columns()
	head := []string{"build", "run", "load"}
	for _, c := range cols {
		if c.Unit != "" {
			c.Name += " (" + c.Unit + ")"
		}
		head = append(head, c.Name)
	}
	rows := [][]string{head}
	var builds []string
	var notes []string
	for _, r := range p.Runs {
		if !slices.Contains(builds, r.Build) {
			builds = append(builds, r.Build)
		}
		switch {
		case r.Unsupported != "":
			notes = append(notes, fmt.Sprintf("%s: not supported by this build: %s", r.Build, r.Unsupported))
			continue
		case r.Error != "":
			notes = append(notes, fmt.Sprintf("%s, run %d: failed: %s", r.Build, r.Run, r.Error))
			continue
		}
		for _, n := range r.Notes {
			notes = append(notes, fmt.Sprintf("%s, run %d: %s", r.Build, r.Run, n))
		}
		row := []string{r.Build, fmt.Sprint(r.Run), fmt.Sprintf("%.1f", r.Load)}
		for _, c := range cols {
			row = append(row, format(valueOf(r.Metrics, c.Name), c.Unit))
		}
		rows = append(rows, row)
	}
	for _, b := range builds {
		ok := slices.DeleteFunc(slices.Clone(p.Runs), func(r runResult) bool { return r.Build != b || r.Error != "" || r.Unsupported != "" })
		if len(ok) < 2 {
			continue
		}
		row := []string{b, fmt.Sprintf("median of %d", len(ok)), ""}
		for _, c := range cols {
			var vs []float64
			for _, r := range ok {
				if v := valueOf(r.Metrics, c.Name); !math.IsNaN(v) {
					vs = append(vs, v)
				}
			}
			row = append(row, format(median(vs), c.Unit))
		}
		rows = append(rows, row)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s: %s\n\n", p.Phase, p.About)
	writeMarkdown(&b, rows)
	for _, n := range notes {
		fmt.Fprintf(&b, "\n- %s", strings.ReplaceAll(n, "\n", "\n  "))
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// writeMarkdown writes rows as a Markdown table, its columns padded to line
// up in a terminal as well.
func writeMarkdown(b *strings.Builder, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], len(cell))
		}
	}
	line := func(row []string) {
		b.WriteString("|")
		for i, cell := range row {
			fmt.Fprintf(b, " %-*s |", width[i], cell)
		}
		b.WriteString("\n")
	}
	line(rows[0])
	sep := make([]string, len(width))
	for i, w := range width {
		sep[i] = strings.Repeat("-", w)
	}
	line(sep)
	for _, row := range rows[1:] {
		line(row)
	}
}

func valueOf(ms []metric, name string) float64 {
	for _, m := range ms {
		if m.Name == name {
			return m.Value
		}
	}
	return math.NaN()
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// format prints a value to the precision its size deserves: small ones
// with a decimal or two, large ones whole.
func format(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case unit == "":
		return fmt.Sprintf("%.0f", v)
	case unit == "MB" || math.Abs(v) < 10:
		if math.Abs(v) < 1 && v != 0 && unit != "MB" {
			return fmt.Sprintf("%.2f", v)
		}
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
