package crdt

import (
	"cmp"
	"fmt"
	"math"
)

// MaxWall is the largest wall time a timestamp may carry (the last
// millisecond of the year 9999). Bounding it keeps a hostile or broken peer
// from pushing every clock in the library to the end of uint64.
const MaxWall = 253402300799999

// MaxAhead is how far ahead of the local wall clock (in milliseconds) a clock
// follows the timestamps it observes. Within it the clock is an ordinary
// hybrid logical clock; beyond it the remote writer's clock is wrong (a
// phone whose clock reset to 2099, a member stamping 9999), and following it
// would stamp every later local write, on every device, at that wrong time for
// good. One minute is the offset beyond which peers are reported as skewed:
// a clock worth a warning is not one to steer ours. Causality does not rest
// on it: a local write to a record whose stamps are ahead of the clock orders
// after them through NowAfter, so the bound costs nothing but the order of
// concurrent writes, which a wrong clock decides wrongly anyway.
const MaxAhead = 60_000

// Timestamp is a hybrid logical clock reading: wall milliseconds since the Unix
// epoch, a logical counter that orders events within (or after) one wall
// millisecond, and the device that made it. Timestamps are totally ordered by
// (Wall, Logical, Device); two devices never produce equal timestamps.
type Timestamp struct {
	Wall    uint64
	Logical uint32
	Device  DeviceID
}

// IsZero reports whether t is the zero timestamp, which orders before every
// real one and marks a register that was never written.
func (t Timestamp) IsZero() bool { return t == Timestamp{} }

// Compare returns -1, 0 or +1 as t orders before, equal to or after u.
func (t Timestamp) Compare(u Timestamp) int {
	switch {
	case t.Wall != u.Wall:
		return cmp.Compare(t.Wall, u.Wall)
	case t.Logical != u.Logical:
		return cmp.Compare(t.Logical, u.Logical)
	default:
		return cmp.Compare(t.Device, u.Device)
	}
}

// After reports whether t orders strictly after u.
func (t Timestamp) After(u Timestamp) bool { return t.Compare(u) > 0 }

func (t Timestamp) String() string {
	return fmt.Sprintf("%d.%d@%s", t.Wall, t.Logical, t.Device)
}

func (t Timestamp) validate() error {
	if t.IsZero() {
		return nil
	}
	if t.Wall > MaxWall {
		return invalidf("timestamp wall time %d is past the year 9999", t.Wall)
	}
	if t.Device == 0 {
		return invalidf("timestamp %s has no device", t)
	}
	return nil
}

// Clock is a hybrid logical clock. It reads no clock of its own: callers pass
// the wall time (Unix milliseconds) to Now and Observe, so the clock can be
// tested with literal times and skewed on purpose.
//
// Now never goes backwards and is greater than every timestamp the clock has
// made or observed, with observed timestamps counted only up to MaxAhead
// past the local wall clock. When an observed timestamp is ahead of the local
// wall clock, the clock keeps that wall value and counts on its logical
// counter until the wall clock catches up; when the counter is exhausted it
// carries into the wall value instead of wrapping. A write made after seeing
// another write orders after it whatever the wall clocks say when it is
// stamped with NowAfter the record it writes to.
type Clock struct {
	device  DeviceID
	wall    uint64
	logical uint32
}

// NewClock returns the clock of device, resuming strictly after highWater
// (the largest timestamp this device has persisted), so that it never goes
// back across restarts.
func NewClock(device DeviceID, highWater Timestamp) *Clock {
	return &Clock{device: device, wall: highWater.Wall, logical: highWater.Logical}
}

// Device returns the device whose timestamps the clock makes.
func (c *Clock) Device() DeviceID { return c.device }

// Now returns a new timestamp for a local write made at wall time wall.
func (c *Clock) Now(wall uint64) Timestamp {
	wall = min(wall, MaxWall)
	if wall > c.wall {
		c.wall, c.logical = wall, 0
	} else {
		c.tick()
	}
	return Timestamp{Wall: c.wall, Logical: c.logical, Device: c.device}
}

// NowAfter returns a new timestamp for a local write made at wall time wall
// to a record whose latest timestamp (Entry.MaxTimestamp) is floor: Now, or,
// if that does not order after floor, the first reading after floor with this
// clock's device. See StampAfter.
func (c *Clock) NowAfter(wall uint64, floor Timestamp) Timestamp {
	return StampAfter(c.Now(wall), floor)
}

// Observe makes the clock order after ts, a timestamp received from another
// device, as far as ts is at most MaxAhead past the local wall time wall;
// past that the clock moves only to wall + MaxAhead. It returns how far ts is
// ahead of wall (0 when it is not), so the caller can warn about the device
// whose clock runs fast, ts.Device. The record holding ts is merged either
// way (convergence comes first): only the clock is kept from following it.
func (c *Clock) Observe(ts Timestamp, wall uint64) (ahead uint64) {
	wall = min(wall, MaxWall)
	follow := ts
	if limit := wall + MaxAhead; ts.Wall > limit {
		follow = Timestamp{Wall: limit}
	}
	if follow.Wall > c.wall || (follow.Wall == c.wall && follow.Logical > c.logical) {
		c.wall, c.logical = follow.Wall, follow.Logical
	}
	if ts.Wall > wall {
		return ts.Wall - wall
	}
	return 0
}

// Last returns the largest timestamp the clock has made or observed, with
// this clock's device: the high-water mark to persist.
func (c *Clock) Last() Timestamp {
	return Timestamp{Wall: c.wall, Logical: c.logical, Device: c.device}
}

// StampAfter returns at if its clock reading (wall time and counter) is past
// floor's, and otherwise the next reading after floor's, with at's device.
// It is how a local write to a record that holds a stamp the clock did not
// follow (one past MaxAhead) still wins over that stamp: every register of
// the record, the tombstone included, orders before it, by timestamp and by
// the clock reading that decides visibility. When floor is the very last
// reading (MaxWall and an exhausted counter, which only a forged record
// holds), nothing orders after it and that reading is returned.
func StampAfter(at, floor Timestamp) Timestamp {
	if at.Wall > floor.Wall || (at.Wall == floor.Wall && at.Logical > floor.Logical) {
		return at
	}
	switch {
	case floor.Logical < math.MaxUint32:
		return Timestamp{Wall: floor.Wall, Logical: floor.Logical + 1, Device: at.Device}
	case floor.Wall < MaxWall:
		return Timestamp{Wall: floor.Wall + 1, Device: at.Device}
	}
	return Timestamp{Wall: MaxWall, Logical: math.MaxUint32, Device: at.Device}
}

func (c *Clock) tick() {
	if c.logical < math.MaxUint32 {
		c.logical++
		return
	}
	// The counter is exhausted: borrow the next millisecond rather than wrap,
	// which would order this write before the ones it follows.
	c.wall, c.logical = c.wall+1, 0
}
