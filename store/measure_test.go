package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
)

// Measurements of a store of 100,000 books, each in a child process so that
// nothing else of the test binary is in the figures. Not run by default:
//
//	DANYUE_MEASURE=1 go test ./store/ -run TestMeasureFootprint -v
//	DANYUE_MEASURE_IDLE=1 go test ./store/ -run TestMeasureIdle -v -timeout 10m

func TestMeasureFootprint(t *testing.T) {
	if os.Getenv("DANYUE_MEASURE") == "" {
		t.Skip("set DANYUE_MEASURE=1 to measure open time and RSS with 100,000 books")
	}
	dir := fixture(t, 100_000)
	for _, line := range runChildLines(t, "footprint", dir, nil) {
		t.Log(line)
	}
}

// footprintChild opens dir and prints the open time and the resident set
// before and after Open, after the daemon's startup scan, and after the
// idle close.
func footprintChild(dir string) error {
	report := func(what string) {
		st := procStatus("/proc/self/status")
		fmt.Printf("%-28s VmRSS %6d kB  RssAnon %6d kB  RssFile %6d kB  VmHWM %6d kB\n",
			what, st["VmRSS"], st["RssAnon"], st["RssFile"], st["VmHWM"])
	}
	report("before Open")
	start := time.Now()
	s, err := Open(context.Background(), dir, Options{IdleClose: 3 * time.Second})
	if err != nil {
		return err
	}
	fmt.Printf("open took %v\n", time.Since(start))
	defer s.Close()
	report("after Open")
	if db, err := s.acquire(); err == nil {
		lsm, vlog := db.Size()
		fmt.Printf("on disk: LSM %d kB, value log %d kB\n%s\n", lsm>>10, vlog>>10, db.LevelsToString())
		s.release()
	}
	n := 0
	if err := s.Scan(context.Background(), crdt.KindBook, func(crdt.Entry) error { n++; return nil }); err != nil {
		return err
	}
	report(fmt.Sprintf("after Scan (%d books)", n))
	if err := s.Since(context.Background(), 0, 0, func(uint64, []byte) error { return nil }); err != nil {
		return err
	}
	report("after Since(0)")
	for open, _ := s.state(); open; open, _ = s.state() {
		time.Sleep(100 * time.Millisecond)
	}
	report("after the idle close")
	time.Sleep(10 * time.Second)
	report("10 s later")
	return nil
}

// procStatus parses a /proc status file into its numeric fields (kB for
// sizes).
func procStatus(path string) map[string]int {
	m := map[string]int{}
	data, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if f := strings.Fields(v); len(f) > 0 {
			m[k], _ = strconv.Atoi(f[0])
		}
	}
	return m
}

// runChildLines runs the test binary as a child of role and returns its
// output lines; if ready is non-nil it is called with the child's pid when
// the child prints "ready".
func runChildLines(t *testing.T, role, dir string, ready func(pid int)) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "DANYUE_STORE_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == "ready" && ready != nil {
			ready(cmd.Process.Pid)
			stdin.Close() // tells the child to exit
			continue
		}
		lines = append(lines, sc.Text())
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child %s: %v", role, err)
	}
	return lines
}

// TestMeasureIdle measures what an idle store costs over 60 s: CPU time and
// context switches (all threads) of a child process that opened a store of
// 100,000 books, compared with a child that opened nothing, and with one
// that keeps the database open (IdleClose < 0).
func TestMeasureIdle(t *testing.T) {
	if os.Getenv("DANYUE_MEASURE_IDLE") == "" {
		t.Skip("set DANYUE_MEASURE_IDLE=1 to measure an idle store for 60 s")
	}
	const window = 60 * time.Second
	dir := fixture(t, 100_000)
	other := filepath.Join(filepath.Dir(dir), "idle-open")
	populate(t, other, 100_000)
	var wg sync.WaitGroup
	for _, tc := range []struct{ role, dir string }{
		{"idle", "baseline"}, {"idle", dir}, {"idle", "keep-open:" + other},
	} {
		wg.Go(func() {
			runChildLines(t, tc.role, tc.dir, func(pid int) {
				before := procUsage(pid)
				time.Sleep(window) // the measurement window
				after := procUsage(pid)
				ns := after.cpuNs - before.cpuNs
				t.Logf("%-10s over %v: CPU %v (%.4f%%; utime+stime %d ticks), context switches %d voluntary + %d involuntary, threads %d",
					label(tc.dir), window, time.Duration(ns), float64(ns)/float64(window)*100,
					after.ticks-before.ticks, after.vol-before.vol, after.invol-before.invol, after.threads)
			})
		})
	}
	wg.Wait()
}

func label(dir string) string {
	switch {
	case dir == "baseline":
		return "no store"
	case strings.HasPrefix(dir, "keep-open:"):
		return "kept open"
	}
	return "default"
}

type usage struct {
	ticks, vol, invol uint64
	cpuNs             uint64 // time on CPU, all threads (schedstat)
	threads           int
}

// procUsage sums utime+stime and the context switches of every thread.
func procUsage(pid int) usage {
	var u usage
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
		f := strings.Fields(string(stat)[i+2:])
		ut, _ := strconv.ParseUint(f[11], 10, 64)
		st, _ := strconv.ParseUint(f[12], 10, 64)
		u.ticks = ut + st
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	u.threads = len(tasks)
	for _, task := range tasks {
		if data, err := os.ReadFile(filepath.Join(filepath.Dir(task), "schedstat")); err == nil {
			if f := strings.Fields(string(data)); len(f) > 0 {
				ns, _ := strconv.ParseUint(f[0], 10, 64)
				u.cpuNs += ns
			}
		}
		st := procStatus(task)
		u.vol += uint64(st["voluntary_ctxt_switches"])
		u.invol += uint64(st["nonvoluntary_ctxt_switches"])
	}
	return u
}

// idleChild opens the store in dir (or nothing, for "baseline"), does what
// a daemon does at startup, waits until the store is idle, prints "ready"
// and sits until its stdin closes.
func idleChild(dir string) error {
	var s *Store
	if dir != "baseline" {
		opt := Options{IdleClose: 3 * time.Second}
		if d, ok := strings.CutPrefix(dir, "keep-open:"); ok {
			dir, opt.IdleClose = d, -1
		}
		var err error
		if s, err = Open(context.Background(), dir, opt); err != nil {
			return err
		}
		defer s.Close()
		if err := s.Scan(context.Background(), crdt.KindBook, func(crdt.Entry) error { return nil }); err != nil {
			return err
		}
		if _, err := s.Apply(context.Background(), Batch{Entries: []crdt.Entry{book(nopTB{}, 1, 1_800_000_000_000)}}); err != nil {
			return err
		}
		deadline := time.Now().Add(time.Minute)
		for open, _ := s.state(); open && opt.IdleClose > 0 && time.Now().Before(deadline); open, _ = s.state() {
			time.Sleep(100 * time.Millisecond)
		}
		for !s.compacted() {
			time.Sleep(100 * time.Millisecond)
		}
	}
	fmt.Println("ready")
	_, err := bufio.NewReader(os.Stdin).ReadString('\n') // returns at EOF
	if err != nil && err.Error() != "EOF" {
		return err
	}
	return nil
}

// nopTB lets helpers that take a testing.TB run in a child process.
type nopTB struct{ testing.TB }

func (nopTB) Helper()                      {}
func (nopTB) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (nopTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
