package procstat

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

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
	if got, want := after.Shares(before), "busy 60%, idle 20%, stolen by the hypervisor 20.0%"; got != want {
		t.Errorf("Shares = %q, want %q", got, want)
	}
	if got := before.Shares(before); got != "no CPU time passed" {
		t.Errorf("Shares of no time = %q", got)
	}
}

func TestResetPeak(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the peak RSS is Linux's /proc")
	}
	pid := os.Getpid()
	// A peak well above what the process holds afterwards: 64 MB touched,
	// then handed back to the OS.
	big := make([]byte, 64<<20)
	for i := range big {
		if i%4096 == 0 {
			big[i] = 1
		}
	}
	runtime.KeepAlive(big)
	big = nil
	debug.FreeOSMemory()
	before, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if before.HWMKB-before.RSSKB < 32<<10 {
		t.Fatalf("before: RSS %d kB, peak %d kB; want a peak 32 MB above the RSS", before.RSSKB, before.HWMKB)
	}
	if err := ResetPeak(pid); err != nil {
		t.Fatal(err)
	}
	after, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after.HWMKB-after.RSSKB > 16<<10 {
		t.Errorf("after ResetPeak: RSS %d kB, peak %d kB; want the peak near the RSS", after.RSSKB, after.HWMKB)
	}
}
