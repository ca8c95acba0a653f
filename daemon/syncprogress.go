package daemon

import (
	"math"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// rateAfter is how long a sync runs before its rate and time left are
// shown: over a shorter time one batch more or less swings them wildly.
const rateAfter = time.Second

// syncProgress renders how a sync from a peer goes at now (the peer
// layer's SyncProgress: toGo records to come, in received since started),
// for status and the page; nil when nothing is to come.
func syncProgress(toGo, in uint64, started, now time.Time) *api.SyncProgress {
	if toGo == 0 {
		return nil
	}
	out := &api.SyncProgress{RecordsToGo: toGo, RecordsIn: in, Since: started.UTC().Format(time.RFC3339)}
	if took := now.Sub(started); took >= rateAfter && in > 0 {
		rate := float64(in) / took.Seconds()
		left := math.Round(float64(toGo) / rate)
		out.RecordsPerSecond, out.SecondsLeft = math.Round(rate*10)/10, &left
	}
	return out
}
