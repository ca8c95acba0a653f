package peer

import (
	"math/rand/v2"
	"time"
)

// Retry schedules. Every retry in this package (dials, pulls, mDNS queries)
// doubles from a floor to a cap: a stranger or a dead address costs a few
// attempts per hour once the cap is reached, never a tight loop, while a
// peer that comes back after a short outage is found again within seconds.

type backoff struct {
	min, max time.Duration
	// jitter spreads retries of many devices started together; tests set it
	// to false for an exact schedule.
	jitter bool
}

var (
	dialBackoff  = backoff{min: time.Second, max: 5 * time.Minute, jitter: true}
	pullBackoff  = backoff{min: 200 * time.Millisecond, max: time.Minute, jitter: true}
	queryBackoff = backoff{min: time.Second, max: 4 * time.Minute, jitter: true}
)

// delay returns the wait before retry number attempt (0 for the first
// retry): min·2^attempt, capped at max, less up to a fifth at random when
// jitter is on.
func (b backoff) delay(attempt int) time.Duration {
	d := b.min
	for i := 0; i < attempt && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	if b.jitter && d >= 5 {
		d -= rand.N(d / 5)
	}
	return d
}
