package main

import (
	"fmt"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// printPulling says, for each peer a long sync is pulling from, how far it
// is: the records to go, and once the daemon knows them, the rate and the
// time left.
func printPulling(e *env, peers []api.Peer) {
	for _, p := range peers {
		if p.Pulling != nil {
			fmt.Fprintf(e.stdout, "syncing from %s: %s\n", orDash(printable(p.Name)), describePulling(p.Pulling))
		}
	}
}

// describePulling says how a sync goes, for people.
func describePulling(s *api.SyncProgress) string {
	out := fmt.Sprintf("%d records to go, %d in", s.RecordsToGo, s.RecordsIn)
	if s.SecondsLeft == nil {
		return out + ", measuring the rate"
	}
	left := (time.Duration(*s.SecondsLeft) * time.Second).Round(time.Second)
	return out + fmt.Sprintf(", %.0f records/s, about %v left", s.RecordsPerSecond, left)
}
