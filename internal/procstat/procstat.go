// Package procstat reads what a process costs from Linux's /proc: its
// memory by kind (anonymous, file-backed, the peak), its CPU time and how
// often its threads were woken, and how the machine's CPU time went. It is
// the view of a daemon from outside that the measuring command and
// testnet's scenarios take; it is not part of the product, and it reads
// nothing of the process it runs in.
//
// Anonymous memory (RssAnon) is the figure that matters: it is what a
// phone's memory killer counts. File-backed pages (RssFile: the program's
// text, mapped tables) are clean page cache that the kernel takes back
// before it kills anything, and VmHWM, the peak of both together, is
// reported beside it, never as the target (docs/design.md, Memory).
package procstat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Status is one reading of a process's memory (/proc/PID/status), in kB.
type Status struct {
	RSS  int64 // VmRSS: Anon + File + Shmem
	Anon int64 // RssAnon: heap, stacks, anonymous mappings
	File int64 // RssFile: pages of mapped files, the executable among them
	HWM  int64 // VmHWM: the peak of RSS since start or ResetPeak
}

// ReadStatus reads the memory of process pid.
func ReadStatus(pid int) (Status, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Status{}, err
	}
	return parseStatus(string(data))
}

// parseStatus parses the text of /proc/PID/status.
func parseStatus(text string) (Status, error) {
	var s Status
	fields := map[string]*int64{"VmRSS": &s.RSS, "RssAnon": &s.Anon, "RssFile": &s.File, "VmHWM": &s.HWM}
	found := 0
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(line, ":")
		dst := fields[k]
		if !ok || dst == nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Status{}, fmt.Errorf("status field %s: %w", k, err)
		}
		*dst = n
		found++
	}
	if found != len(fields) {
		return Status{}, fmt.Errorf("status has %d of the fields VmRSS, RssAnon, RssFile and VmHWM", found)
	}
	return s, nil
}

// Usage is what a process has spent since it started.
type Usage struct {
	CPU time.Duration // utime + stime, every thread's, the ended ones too
	// Wakeups is the voluntary and involuntary context switches summed
	// over the threads alive now: each is a thread taken off a CPU, the
	// wakeups that keep a phone's CPU out of its deep sleep states.
	Wakeups int64
	Threads int
}

// ReadUsage reads the CPU time and the context switches of process pid.
func ReadUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	cpu, err := parseStatCPU(string(stat))
	if err != nil {
		return Usage{}, err
	}
	u := Usage{CPU: cpu}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil {
		return Usage{}, err
	}
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		if err != nil {
			continue // the thread ended
		}
		u.Threads++
		u.Wakeups += switches(string(data))
	}
	return u, nil
}

// switches sums a status file's voluntary and involuntary context switches.
func switches(text string) int64 {
	var n int64
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
			c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			n += c
		}
	}
	return n
}

// userHz is the unit of /proc's CPU times (USER_HZ), 100 on every Linux
// architecture Go supports.
const userHz = 100

// parseStatCPU returns utime + stime from the text of /proc/PID/stat. The
// command name, in parentheses, may hold spaces and parentheses itself, so
// the fields are counted from the last ')'.
func parseStatCPU(text string) (time.Duration, error) {
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q has no command name", text)
	}
	// After the name: state (field 3) ... utime (14), stime (15).
	f := strings.Fields(text[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the command name, want at least 13", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 63)
		if err != nil {
			return 0, fmt.Errorf("stat cpu time: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHz, nil
}

// ResetPeak makes the peak RSS of process pid (Status.HWM) start again
// from its RSS now, so that one phase of a process's life can be measured
// apart from the phase before it.
func ResetPeak(pid int) error {
	// 5 is clear_refs' "reset the peak resident set size".
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// Load returns the machine's load average over the last minute.
func Load() (float64, error) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/loadavg is empty")
	}
	return strconv.ParseFloat(f[0], 64)
}

// Machine is a reading of the whole machine's CPU time, summed over its
// CPUs (/proc/stat). Steal is time a hypervisor gave the CPUs to other
// guests: a run that went slower than usual with steal high was short of
// CPU, not slower itself.
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

// Shares returns the fractions of the machine's CPU time between before
// and m that were busy and stolen; both 0 if no time passed.
func (m Machine) Shares(before Machine) (busy, steal float64) {
	b, i, s := m.Busy-before.Busy, m.Idle-before.Idle, m.Steal-before.Steal
	total := (b + i + s).Seconds()
	if total <= 0 {
		return 0, 0
	}
	return b.Seconds() / total, s.Seconds() / total
}
