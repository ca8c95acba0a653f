// Package procstat reads what a process costs from Linux's /proc: CPU time,
// context switches and memory. The idle measurements of the daemon and of
// the embedded node use it; it is a measuring aid, not part of the product.
package procstat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Sample is one reading of a process.
type Sample struct {
	CPU      time.Duration // on CPU, summed over its threads
	Switches int64         // voluntary and involuntary context switches, summed over its threads
	RSSKB    int64
	HWMKB    int64 // peak RSS
	Threads  int
}

// Read samples the process pid.
func Read(pid int) (Sample, error) {
	var s Sample
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil {
		return s, err
	}
	s.Threads = len(tasks)
	for _, task := range tasks {
		// schedstat's first field is the time on CPU in nanoseconds: finer
		// than /proc/PID/stat's 10 ms ticks, which an idle minute rounds to
		// zero or one.
		if sched, err := os.ReadFile(task + "/schedstat"); err == nil {
			ns, _ := strconv.ParseInt(strings.Fields(string(sched))[0], 10, 64)
			s.CPU += time.Duration(ns)
		}
		data, err := os.ReadFile(task + "/status")
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				s.Switches += n
			}
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			s.RSSKB = n
		case "VmHWM":
			s.HWMKB = n
		}
	}
	return s, nil
}

// Window is how long an idle measurement samples: a minute, or
// DANYUE_MEASURE_SECONDS seconds.
func Window() (time.Duration, error) {
	v := os.Getenv("DANYUE_MEASURE_SECONDS")
	if v == "" {
		return time.Minute, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("DANYUE_MEASURE_SECONDS=%q is not a number of seconds", v)
	}
	return time.Duration(n) * time.Second, nil
}

// Report is what a process cost between two samples.
func Report(before, after Sample, window time.Duration) string {
	cpu := after.CPU - before.CPU
	switches := after.Switches - before.Switches
	return fmt.Sprintf("RSS %.1f MB (peak %.1f MB), %d threads; CPU %v = %.4f%% of one core; context switches %d = %.2f/s",
		float64(after.RSSKB)/1024, float64(after.HWMKB)/1024, after.Threads,
		cpu, 100*cpu.Seconds()/window.Seconds(), switches, float64(switches)/window.Seconds())
}
