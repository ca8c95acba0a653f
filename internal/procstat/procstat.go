// Package procstat reads what a process costs from Linux's /proc (CPU time,
// context switches and memory) and how the machine's CPU time went. The
// idle measurements of the daemon and of the embedded node and the flood
// tool use it; it is a measuring aid, not part of the product.
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

// ResetPeak makes the peak RSS of process pid (Sample.HWMKB) start again
// from its RSS now, so that one phase of a run can be measured apart from
// the phase before it.
func ResetPeak(pid int) error {
	// 5 is clear_refs' "reset the peak resident set size".
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
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

// Machine is a reading of the whole machine's CPU time, summed over its
// CPUs (/proc/stat). Steal is time a hypervisor gave the CPUs to other
// guests: a benchmark that ran slower than usual with steal high was short
// of CPU, not slower itself.
type Machine struct {
	Busy, Idle, Steal time.Duration
}

// ReadMachine reads the machine's CPU time.
func ReadMachine() (Machine, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseCPULine(line)
}

// userHz is the unit of /proc/stat's times (USER_HZ), 100 on every Linux
// architecture Go supports.
const userHz = 100

// parseCPULine parses /proc/stat's first line: "cpu", then user, nice,
// system, idle, iowait, irq, softirq and steal ticks (and guest times,
// which user already counts).
func parseCPULine(line string) (Machine, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return Machine{}, fmt.Errorf("/proc/stat starts with %q, not the cpu line", line)
	}
	var t [8]time.Duration
	for i := range t {
		n, err := strconv.ParseUint(f[1+i], 10, 63)
		if err != nil {
			return Machine{}, fmt.Errorf("/proc/stat's cpu line: field %d: %w", 1+i, err)
		}
		t[i] = time.Duration(n) * time.Second / userHz
	}
	const user, nice, system, idle, iowait, irq, softirq, steal = 0, 1, 2, 3, 4, 5, 6, 7
	return Machine{
		Busy:  t[user] + t[nice] + t[system] + t[irq] + t[softirq],
		Idle:  t[idle] + t[iowait],
		Steal: t[steal],
	}, nil
}

// Shares says how the machine's CPU time between two readings was spent,
// as percentages of it.
func (m Machine) Shares(before Machine) string {
	busy, idle, steal := m.Busy-before.Busy, m.Idle-before.Idle, m.Steal-before.Steal
	total := (busy + idle + steal).Seconds()
	if total <= 0 {
		return "no CPU time passed"
	}
	return fmt.Sprintf("busy %.0f%%, idle %.0f%%, stolen by the hypervisor %.1f%%",
		100*busy.Seconds()/total, 100*idle.Seconds()/total, 100*steal.Seconds()/total)
}
