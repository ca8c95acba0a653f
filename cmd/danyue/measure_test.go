package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/client"
)

// TestMeasureIdle measures what an idle daemon costs: RSS, CPU and context
// switches over 60 s, with 10,000 books and one connected peer. It is a
// measuring command, not a check (machines are noisy): run it with
//
//	DANYUE_MEASURE_IDLE=1 go test -run TestMeasureIdle -v ./cmd/danyue/
func TestMeasureIdle(t *testing.T) {
	if os.Getenv("DANYUE_MEASURE_IDLE") == "" {
		t.Skip("set DANYUE_MEASURE_IDLE=1 to measure the idle daemon (takes about 2.5 minutes)")
	}
	window := 60 * time.Second
	if v := os.Getenv("DANYUE_MEASURE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		window = time.Duration(n) * time.Second
	}
	books := 10000
	a := startDaemonProc(t, "idle-a")
	b := startDaemonProc(t, "idle-b")
	ctx := context.Background()
	ca := client.New(filepath.Join(a.data, "api.sock"))
	defer ca.Close()
	cb := client.New(filepath.Join(b.data, "api.sock"))
	defer cb.Close()
	code, err := ca.Invite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Join(ctx, code); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	errs := make(chan error, 16)
	for w := range 16 {
		go func() {
			var err error
			for i := w; i < books; i += 16 {
				if _, e := ca.SetPosition(ctx, fmt.Sprintf("md5:%032x", i+1), int64(i), 0.5, fmt.Sprintf("Book %d", i)); e != nil {
					err = e
				}
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d books on A in %v", books, time.Since(start))
	for {
		st, err := cb.Status(ctx)
		if err == nil && st.Counts.Books == books {
			break
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("B did not receive the %d books: %+v %v", books, st.Counts, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("B has all %d books %v after the first write", books, time.Since(start))
	// Idle means idle for a while: let the write burst's aftermath
	// (flushes, compaction, GC) finish and the store close its database,
	// which it does after a minute without work.
	time.Sleep(75 * time.Second)

	pid := a.cmd.Process.Pid
	before := sample(t, pid)
	time.Sleep(window)
	after := sample(t, pid)
	cpu := after.cpu - before.cpu
	switches := after.switches - before.switches
	t.Logf("idle daemon with %d books and 1 peer, over %v:", books, window)
	t.Logf("  RSS %.1f MB (peak %.1f MB), %d threads", float64(after.rssKB)/1024, float64(after.hwmKB)/1024, after.threads)
	t.Logf("  CPU %v = %.4f%% of one core", cpu, 100*cpu.Seconds()/window.Seconds())
	t.Logf("  context switches %d = %.2f/s", switches, float64(switches)/window.Seconds())
}

type procSample struct {
	cpu      time.Duration
	switches int64
	rssKB    int64
	hwmKB    int64
	threads  int
}

// sample reads a process's CPU time and context switches (summed over its
// threads) and its memory from /proc.
func sample(t *testing.T, pid int) procSample {
	t.Helper()
	var s procSample
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil {
		t.Fatal(err)
	}
	s.threads = len(tasks)
	for _, task := range tasks {
		// schedstat's first field is the time on CPU in nanoseconds: finer
		// than /proc/PID/stat's 10 ms ticks, which an idle minute rounds to
		// zero or one.
		if sched, err := os.ReadFile(task + "/schedstat"); err == nil {
			ns, _ := strconv.ParseInt(strings.Fields(string(sched))[0], 10, 64)
			s.cpu += time.Duration(ns)
		}
		data, err := os.ReadFile(task + "/status")
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				s.switches += n
			}
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			s.rssKB = n
		case "VmHWM":
			s.hwmKB = n
		}
	}
	return s
}
