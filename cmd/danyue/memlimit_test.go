package main

import (
	"runtime/debug"
	"testing"
)

func TestDaemonMemoryLimit(t *testing.T) {
	current := func() int64 { return debug.SetMemoryLimit(-1) } // -1 reads it
	before := current()
	tests := []struct {
		name, gomemlimit string
		want             int64
	}{
		{"default", "", daemonMemoryLimit},
		{"GOMEMLIMIT set", "1GiB", before},
		{"GOMEMLIMIT off", "off", before},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env{getenv: func(k string) string {
				if k == "GOMEMLIMIT" {
					return tt.gomemlimit
				}
				return ""
			}}
			restore := setDaemonMemoryLimit(e)
			if got := current(); got != tt.want {
				t.Errorf("limit while the daemon runs: %d, want %d", got, tt.want)
			}
			restore()
			if got := current(); got != before {
				t.Errorf("limit after the daemon: %d, want %d as before", got, before)
			}
		})
	}
}
