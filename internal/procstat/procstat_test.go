package procstat

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestParseStatus(t *testing.T) {
	const full = "Name:\tdanyue\nVmHWM:\t   40960 kB\nVmRSS:\t   30720 kB\nRssAnon:\t   20480 kB\nRssFile:\t   10240 kB\nRssShmem:\t       0 kB\nvoluntary_ctxt_switches:\t7\n"
	tests := []struct {
		name    string
		text    string
		want    Status
		wantErr bool
	}{
		{name: "full", text: full, want: Status{RSS: 30720, Anon: 20480, File: 10240, HWM: 40960}},
		{name: "a kernel without RssAnon", text: "VmHWM:\t1 kB\nVmRSS:\t1 kB\nRssFile:\t1 kB\n", wantErr: true},
		{name: "not a number", text: "VmHWM:\tx kB\nVmRSS:\t1 kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\n", wantErr: true},
		{name: "empty", text: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatus(tt.text)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseStatus = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    time.Duration
		wantErr bool
	}{
		// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
		{name: "plain", text: "42 (danyue) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0", want: 3 * time.Second},
		{name: "a name with spaces and parentheses", text: "42 (a (b) c) R 1 42 42 0 -1 0 0 0 0 0 7 3 0 0", want: 100 * time.Millisecond},
		{name: "cut short", text: "42 (danyue) S 1 42", wantErr: true},
		{name: "no name", text: "42 danyue S", wantErr: true},
		{name: "negative", text: "42 (d) S 1 42 42 0 -1 0 0 0 0 0 -7 3 0 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.text)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseStatCPU = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestSwitches(t *testing.T) {
	text := "Name:\tx\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t3\n"
	if got := switches(text); got != 123 {
		t.Errorf("switches = %d, want 123", got)
	}
}

func TestParseCPULine(t *testing.T) {
	tests := []struct {
		line    string
		want    Machine
		wantErr bool
	}{
		{
			// user nice system idle iowait irq softirq steal guest guest_nice
			line: "cpu  1000 10 300 5000 40 5 15 70 0 0",
			want: Machine{Busy: 13300 * time.Millisecond, Idle: 50400 * time.Millisecond, Steal: 700 * time.Millisecond},
		},
		{line: "cpu0 1 2 3 4 5 6 7 8", wantErr: true},
		{line: "cpu 1 2 3 4 5 6 7", wantErr: true},
		{line: "cpu 1 2 3 -4 5 6 7 8", wantErr: true},
		{line: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseCPULine(tt.line)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseCPULine(%q) = %+v, %v; want %+v, error %v", tt.line, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestShares(t *testing.T) {
	before := Machine{Busy: time.Second, Idle: time.Second}
	after := Machine{Busy: 4 * time.Second, Idle: 2 * time.Second, Steal: time.Second}
	if busy, steal := after.Shares(before); busy != 0.6 || steal != 0.2 {
		t.Errorf("Shares = %v, %v; want 0.6, 0.2", busy, steal)
	}
	if busy, steal := before.Shares(before); busy != 0 || steal != 0 {
		t.Errorf("Shares of no time = %v, %v; want 0, 0", busy, steal)
	}
}

// TestReadThisProcess reads this test's own process, the one process
// whose memory and CPU the test can move.
func TestReadThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads Linux's /proc")
	}
	pid := os.Getpid()
	// A peak well above what the process holds afterwards: 64 MB of
	// anonymous memory touched, then handed back to the OS.
	big := make([]byte, 64<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	during, err := ReadStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(big)
	big = nil
	debug.FreeOSMemory()
	before, err := ReadStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	// A quarter of it is enough to see it move: not all of it leaves the
	// anonymous memory at once (under the race detector part stays).
	if during.Anon-before.Anon < 16<<10 || before.HWM-before.RSS < 32<<10 {
		t.Fatalf("anonymous %d kB while holding 64 MB, %d kB after; peak %d kB, RSS %d kB: want the 64 MB in both the anonymous memory and the peak",
			during.Anon, before.Anon, before.HWM, before.RSS)
	}
	if err := ResetPeak(pid); err != nil {
		t.Fatal(err)
	}
	after, err := ReadStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after.HWM-after.RSS > 16<<10 {
		t.Errorf("after ResetPeak: RSS %d kB, peak %d kB; want the peak near the RSS", after.RSS, after.HWM)
	}
	u, err := ReadUsage(pid)
	if err != nil {
		t.Fatal(err)
	}
	if u.Threads < 1 || u.Wakeups < 1 {
		t.Errorf("usage %+v: want at least one thread that was switched out", u)
	}
	if l, err := Load(); err != nil || l < 0 {
		t.Errorf("Load = %v, %v", l, err)
	}
}
