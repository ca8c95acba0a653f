package rendezvous

import (
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Burns remembers, across invitations, which addresses spent codes
// without proving they knew them (burns), so that an address burning code
// after code is named as an attack and refused for a while. An inviter
// keeps one for all its invitations (Config.Burns). It is safe for
// concurrent use.
//
// An address is refused once it has burned AttackBurns codes within
// BurnWindow, until BurnWindow after its last burn: longer than a code
// lives, so the next code is safe from it for its whole life. One burn is
// never refused: a person who mistyped a code must be able to type the
// next one from the same device. The memory is bounded (maxBurners
// addresses; the one whose last burn is oldest goes first), so an attacker
// rotating addresses can push old ones out, but each of its burns is still
// named when it happens.
type Burns struct {
	mu  sync.Mutex
	now func() time.Time
	by  map[netip.Addr]*burner
}

type burner struct {
	times []time.Time // the burns within BurnWindow, oldest first
	last  time.Time   // the last burn
	until time.Time   // refused until then
}

const (
	// BurnWindow is how far back burns are counted.
	BurnWindow = 10 * time.Minute
	// AttackBurns is the number of burns from one address within
	// BurnWindow that is reported as an attack, and refused.
	AttackBurns = 2
	maxBurners  = 256
	// maxTimes caps the burns kept per address; its count says "at
	// least" past it.
	maxTimes = 64
)

// NewBurns returns an empty record.
func NewBurns() *Burns {
	return &Burns{now: time.Now, by: make(map[netip.Addr]*burner)}
}

// Burner is an address that burned codes within BurnWindow.
type Burner struct {
	Addr netip.Addr
	// Burns is how many codes it burned within BurnWindow.
	Burns int
	// Last is its last burn.
	Last time.Time
	// RefusedUntil is when its refusal ends; zero if it is not refused.
	RefusedUntil time.Time
}

// add records a burn by a at the time at, and returns a's burns within
// BurnWindow, this one included.
func (b *Burns) add(a netip.Addr, at time.Time) Burner {
	b.mu.Lock()
	defer b.mu.Unlock()
	a = a.Unmap()
	e := b.by[a]
	if e == nil {
		if len(b.by) >= maxBurners {
			b.evict()
		}
		e = &burner{}
		b.by[a] = e
	}
	e.times, e.last = append(prune(e.times, at), at), at
	if len(e.times) > maxTimes {
		e.times = e.times[len(e.times)-maxTimes:]
	}
	if len(e.times) >= AttackBurns {
		e.until = at.Add(BurnWindow)
	}
	return b.view(a, e, at)
}

// refused returns a's record if a is refused now.
func (b *Burns) refused(a netip.Addr) (Burner, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a = a.Unmap()
	now := b.now()
	e := b.by[a]
	if e == nil || !now.Before(e.until) {
		return Burner{}, false
	}
	return b.view(a, e, now), true
}

// Recent returns the addresses that burned codes within BurnWindow, the
// latest burn first.
func (b *Burns) Recent() []Burner {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	var out []Burner
	for a, e := range b.by {
		e.times = prune(e.times, now)
		if len(e.times) == 0 && !now.Before(e.until) {
			delete(b.by, a)
			continue
		}
		if len(e.times) > 0 {
			out = append(out, b.view(a, e, now))
		}
	}
	slices.SortFunc(out, func(x, y Burner) int { return y.Last.Compare(x.Last) })
	return out
}

func (b *Burns) view(a netip.Addr, e *burner, now time.Time) Burner {
	v := Burner{Addr: a, Burns: len(prune(e.times, now)), Last: e.last}
	if now.Before(e.until) {
		v.RefusedUntil = e.until
	}
	return v
}

// evict drops the address whose last burn is the oldest.
func (b *Burns) evict() {
	var oldest netip.Addr
	var at time.Time
	for a, e := range b.by {
		if !oldest.IsValid() || e.last.Before(at) {
			oldest, at = a, e.last
		}
	}
	delete(b.by, oldest)
}

// prune drops the times older than BurnWindow before now.
func prune(times []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(times) && !times[i].After(now.Add(-BurnWindow)) {
		i++
	}
	return times[i:]
}
