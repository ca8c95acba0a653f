package daemon

import (
	"testing"
	"time"
)

// What status says of a sync in progress: nothing once nothing is to
// come, no rate in its first second, and then the rate so far and the
// time left at that rate.
func TestSyncProgress(t *testing.T) {
	type progress struct {
		ToGo, In uint64
		Started  time.Time
	}
	start := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name        string
		p           progress
		at          time.Duration
		nil         bool
		rate, secs  float64
		rateUnknown bool
	}{
		{name: "nothing to go", p: progress{In: 500, Started: start}, at: 10 * time.Second, nil: true},
		{name: "first second", p: progress{ToGo: 4000, In: 512, Started: start}, at: 500 * time.Millisecond, rateUnknown: true},
		{name: "nothing in yet", p: progress{ToGo: 4000, Started: start}, at: 5 * time.Second, rateUnknown: true},
		{name: "halfway", p: progress{ToGo: 3000, In: 3000, Started: start}, at: 10 * time.Second, rate: 300, secs: 10},
		{name: "slow", p: progress{ToGo: 100_000, In: 1000, Started: start}, at: 4 * time.Second, rate: 250, secs: 400},
	} {
		got := syncProgress(tt.p.ToGo, tt.p.In, tt.p.Started, start.Add(tt.at))
		switch {
		case tt.nil:
			if got != nil {
				t.Errorf("%s: %+v, want none", tt.name, got)
			}
		case got == nil || got.RecordsToGo != tt.p.ToGo || got.RecordsIn != tt.p.In || got.Since != "2026-12-06T02:00:00Z":
			t.Errorf("%s: %+v", tt.name, got)
		case tt.rateUnknown:
			if got.RecordsPerSecond != 0 || got.SecondsLeft != nil {
				t.Errorf("%s: rate %v, %v seconds left; want neither yet", tt.name, got.RecordsPerSecond, got.SecondsLeft)
			}
		case got.RecordsPerSecond != tt.rate || got.SecondsLeft == nil || *got.SecondsLeft != tt.secs:
			t.Errorf("%s: rate %v, seconds left %v; want %v, %v", tt.name, got.RecordsPerSecond, got.SecondsLeft, tt.rate, tt.secs)
		}
	}
}
