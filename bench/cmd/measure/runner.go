//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/danyue/danyue/bench/mixload"
	"github.com/danyue/danyue/internal/procstat"
)

// phase is one thing the command measures.
type phase struct {
	name  string
	about func(config) string
	run   func(ctx context.Context, r *runner, b build, dir string) (*outcome, error)
}

// outcome is what a run of a phase measured.
type outcome struct {
	metrics []metric
	notes   []string
}

func (o *outcome) add(name, unit string, v float64) {
	o.metrics = append(o.metrics, metric{Name: name, Unit: unit, Value: v})
}

func (o *outcome) note(format string, args ...any) {
	o.notes = append(o.notes, fmt.Sprintf(format, args...))
}

// memory adds a window of a daemon's memory; who names the daemon when the
// phase has several.
func (o *outcome) memory(who string, m memory) {
	mb := func(kb int64) float64 { return float64(kb) / 1024 }
	heap := func(v int64) float64 {
		if v < 0 {
			return nan
		}
		return float64(v)
	}
	o.add(who+"anon peak", "MB", mb(m.AnonPeak))
	o.add(who+"heap at GC", "MB", heap(m.HeapStart))
	o.add(who+"live heap", "MB", heap(m.HeapLive))
	o.add(who+"file peak", "MB", mb(m.FilePeak))
	o.add(who+"VmHWM", "MB", mb(m.HWM))
}

// unsupportedError is a phase that the build cannot run: it lacks an
// ability of the API (an older build).
type unsupportedError struct{ why string }

func (e unsupportedError) Error() string { return "not supported by this build: " + e.why }

// runner runs the phases.
type runner struct {
	cfg      config
	work     string
	log      io.Writer
	fixtures map[string]*fixture // by build name
	procs    []*proc             // started in the current run
}

// fixture is what a build has prepared for the phases that start from a
// full shelf: data dirs of stopped daemons, copied for each run.
type fixture struct {
	shelf   string    // a daemon with cfg.books books
	holders [2]string // two devices of one library, each with the books
	// probed says whether paged is known: whether the build lists the
	// shelf a page at a time (older builds answer it whole).
	probed, paged bool
}

// phase runs every run of p, taking turns between the builds.
func (r *runner) phase(ctx context.Context, p *phase, builds []build) phaseResult {
	pr := phaseResult{Phase: p.name, About: p.about(r.cfg)}
	unsupported := map[string]bool{}
	for run := 1; run <= r.cfg.runs; run++ {
		for _, b := range builds {
			if unsupported[b.Name] || ctx.Err() != nil {
				continue
			}
			res := r.one(ctx, p, b, run)
			if res.Unsupported != "" {
				unsupported[b.Name] = true
			}
			pr.Runs = append(pr.Runs, res)
		}
	}
	return pr
}

// one runs p once on b, in a directory of its own.
func (r *runner) one(ctx context.Context, p *phase, b build, run int) runResult {
	res := runResult{Build: b.Name, Run: run}
	dir := filepath.Join(r.work, "runs", fmt.Sprintf("%s-%s-%d", p.name, b.Name, run))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		res.Error = err.Error()
		return res
	}
	res.Load, _ = procstat.Load()
	before, _ := procstat.ReadMachine()
	start := time.Now()
	o, err := p.run(ctx, r, b, dir)
	if serr := r.stopAll(); err == nil {
		err = serr
	}
	res.Seconds = time.Since(start).Seconds()
	after, _ := procstat.ReadMachine()
	res.Busy, res.Steal = after.Shares(before)
	if !r.cfg.keep {
		os.RemoveAll(dir)
	}
	var u unsupportedError
	switch {
	case errors.As(err, &u):
		res.Unsupported = u.why
	case err != nil:
		res.Error = err.Error()
	default:
		res.Metrics, res.Notes = o.metrics, o.notes
	}
	state := fmt.Sprintf("%.1f s", res.Seconds)
	if err != nil {
		state = err.Error()
	}
	fmt.Fprintf(r.log, "measure: %s, run %d of %d, %s (load %.1f): %s\n", p.name, run, r.cfg.runs, b.Name, res.Load, state)
	return res
}

// stopAll stops every daemon the run started.
func (r *runner) stopAll() error {
	var errs []error
	for _, p := range r.procs {
		errs = append(errs, p.stop())
	}
	r.procs = nil
	return errors.Join(errs...)
}

// fresh starts build b on a new data dir under dir and waits for its API.
func (r *runner) fresh(ctx context.Context, b build, dir, name string, extra ...string) (*proc, error) {
	p, err := r.start(b, filepath.Join(dir, name), name, extra...)
	if err != nil {
		return nil, err
	}
	if _, err := p.waitAPI(ctx, time.Minute); err != nil {
		return nil, err
	}
	return p, nil
}

func (r *runner) fixture(b build) *fixture {
	f := r.fixtures[b.Name]
	if f == nil {
		f = &fixture{}
		r.fixtures[b.Name] = f
	}
	return f
}

func (r *runner) fixtureDir(b build, name string) string {
	return filepath.Join(r.work, "fixtures", b.Name, name)
}

// shelf returns the data dir of a stopped daemon of build b with cfg.books
// books, writing it the first time.
func (r *runner) shelf(ctx context.Context, b build) (string, error) {
	f := r.fixture(b)
	if f.shelf != "" {
		return f.shelf, nil
	}
	data := r.fixtureDir(b, "shelf")
	fmt.Fprintf(r.log, "measure: writing a shelf of %d books with %s\n", r.cfg.books, b.Name)
	p, err := r.start(b, data, "shelf")
	if err != nil {
		return "", err
	}
	if _, err := p.waitAPI(ctx, time.Minute); err != nil {
		return "", err
	}
	if err := mixload.Fill(ctx, p.c, r.cfg.books); err != nil {
		return "", fmt.Errorf("write the shelf: %w", err)
	}
	if err := r.probePages(ctx, b, p); err != nil {
		return "", err
	}
	if err := p.stop(); err != nil {
		return "", err
	}
	f.shelf = data
	return data, nil
}

// adoptShelf moves data, the data dir of a stopped daemon with cfg.books
// books, to be b's shelf if b has none yet.
func (r *runner) adoptShelf(b build, data string) error {
	f := r.fixture(b)
	if f.shelf != "" {
		return nil
	}
	dst := r.fixtureDir(b, "shelf")
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := os.Rename(data, dst); err != nil {
		return err
	}
	f.shelf = dst
	return nil
}

// copyOf starts build b on a copy of the data dir src, named name, under
// dir, without waiting for its API.
func (r *runner) copyOf(b build, src, dir, name string, extra ...string) (*proc, error) {
	data := filepath.Join(dir, name)
	if err := copyDir(src, data); err != nil {
		return nil, err
	}
	return r.start(b, data, name, extra...)
}

// copyDir copies the regular files and directories under src to dst,
// leaving out what a running daemon left (its socket).
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case !d.Type().IsRegular():
			return nil
		}
		return copyFile(path, to)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
