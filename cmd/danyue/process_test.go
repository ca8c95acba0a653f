package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestDaemonProcessSettings(t *testing.T) {
	limit := func() int64 { return debug.SetMemoryLimit(-1) } // -1 reads it
	procs := func() int { return runtime.GOMAXPROCS(0) }      // 0 reads it
	limitBefore, procsBefore, rateBefore := limit(), procs(), runtime.MemProfileRate
	tests := []struct {
		name       string
		env        map[string]string
		wantLimit  int64
		wantProcsN int
		wantRate   int
	}{
		{"default", nil, daemonMemoryLimit, max(procsBefore, minProcs), 0},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, limitBefore, max(procsBefore, minProcs), 0},
		{"GOMEMLIMIT off", map[string]string{"GOMEMLIMIT": "off"}, limitBefore, max(procsBefore, minProcs), 0},
		{"GOMAXPROCS set", map[string]string{"GOMAXPROCS": "1"}, daemonMemoryLimit, procsBefore, 0},
		{"GODEBUG memprofilerate set", map[string]string{"GODEBUG": "gctrace=0,memprofilerate=1"}, daemonMemoryLimit, max(procsBefore, minProcs), rateBefore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env{getenv: func(k string) string { return tt.env[k] }}
			restore := setDaemonProcess(e)
			if got := limit(); got != tt.wantLimit {
				t.Errorf("memory limit while the daemon runs: %d, want %d", got, tt.wantLimit)
			}
			if got := procs(); got != tt.wantProcsN {
				t.Errorf("GOMAXPROCS while the daemon runs: %d, want %d", got, tt.wantProcsN)
			}
			if got := runtime.MemProfileRate; got != tt.wantRate {
				t.Errorf("MemProfileRate while the daemon runs: %d, want %d", got, tt.wantRate)
			}
			restore()
			if got := limit(); got != limitBefore {
				t.Errorf("memory limit after the daemon: %d, want %d as before", got, limitBefore)
			}
			if got := procs(); got != procsBefore {
				t.Errorf("GOMAXPROCS after the daemon: %d, want %d as before", got, procsBefore)
			}
			if got := runtime.MemProfileRate; got != rateBefore {
				t.Errorf("MemProfileRate after the daemon: %d, want %d as before", got, rateBefore)
			}
		})
	}
}

// TestBurstOver: a release comes at the first check without collections
// after one with, and only then; the release's own collection (one more
// cycle, counted from the check after it on) starts no burst.
func TestBurstOver(t *testing.T) {
	type check struct {
		cycles  uint64
		release bool
	}
	tests := []struct {
		name   string
		checks []check
	}{
		{"idle", []check{{0, false}, {0, false}, {0, false}}},
		{"a burst", []check{{0, false}, {3, false}, {9, false}, {9, true}, {10, false}, {10, false}}},
		{"one collection", []check{{0, false}, {1, false}, {1, true}, {2, false}}},
		{"two bursts", []check{{0, false}, {2, false}, {2, true}, {5, false}, {5, true}, {6, false}}},
		{"the start-up's collections", []check{{5, false}, {5, true}, {6, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w burstOver
			for i, c := range tt.checks {
				got := w.step(c.cycles)
				if got != c.release {
					t.Fatalf("check %d (count %d): release %v, want %v", i, c.cycles, got, c.release)
				}
				if got {
					w.released(c.cycles + 1)
				}
			}
		})
	}
}
