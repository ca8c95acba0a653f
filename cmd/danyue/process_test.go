package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
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

// TestBurstOver: every collection after a release is one of the daemon's
// work and makes a release due; the release's own is not, so an idle
// daemon does not release again and again.
func TestBurstOver(t *testing.T) {
	type step struct {
		release bool   // a release, after which the count is cycles
		cycles  uint64 // the count at a collection seen, or after the release
		due     bool   // a release is due after the collection
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the start-up's collections", []step{{cycles: 1, due: true}, {cycles: 3, due: true}}},
		{"the release's own", []step{{cycles: 2, due: true}, {release: true, cycles: 3}, {cycles: 3, due: false}}},
		{"a burst after a release", []step{{release: true, cycles: 3}, {cycles: 3, due: false}, {cycles: 4, due: true}}},
		{"a collection during the release", []step{{release: true, cycles: 5}, {cycles: 4, due: false}, {cycles: 5, due: false}, {cycles: 6, due: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w burstOver
			for i, s := range tt.steps {
				if s.release {
					w.released(s.cycles)
					continue
				}
				if got := w.collected(s.cycles); got != s.due {
					t.Fatalf("step %d (count %d): due %v, want %v", i, s.cycles, got, s.due)
				}
			}
		})
	}
}

// TestCollectionsAreSeen: each collection is reported.
func TestCollectionsAreSeen(t *testing.T) {
	gcs := make(chan struct{}, 1)
	stop := collections(gcs)
	defer stop()
	for i := range 3 {
		runtime.GC()
		select {
		case <-gcs:
		case <-time.After(10 * time.Second):
			t.Fatalf("collection %d was not reported", i)
		}
	}
}
