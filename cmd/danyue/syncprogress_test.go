package main

import (
	"testing"

	"github.com/danyue/danyue/daemon/api"
)

func TestDescribePulling(t *testing.T) {
	secs := 95.0
	for _, tt := range []struct {
		s    api.SyncProgress
		want string
	}{
		{api.SyncProgress{RecordsToGo: 4000, RecordsIn: 512}, "4000 records to go, 512 in, measuring the rate"},
		{api.SyncProgress{RecordsToGo: 28500, RecordsIn: 3000, RecordsPerSecond: 300, SecondsLeft: &secs}, "28500 records to go, 3000 in, 300 records/s, about 1m35s left"},
	} {
		if got := describePulling(&tt.s); got != tt.want {
			t.Errorf("describePulling(%+v) = %q, want %q", tt.s, got, tt.want)
		}
	}
}
