package daemon

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
)

// Warnings about devices whose records arrive stamped ahead of this device's
// clock. The device to blame is the writer, the stamp's device: the peer that
// delivered a record may only have relayed it. Amounts are kept in
// milliseconds as integers: a stamp in the year 9999 is about 8,000 years
// ahead, past what a time.Duration holds (about 292 years).

// clockWarnAfterMs is the amount ahead past which a writer is reported: the
// same minute as for peers' clock offsets, and as far as the clock follows
// (crdt.MaxAhead).
const clockWarnAfterMs = uint64(clockWarnAfter / time.Millisecond)

// maxClockWarns bounds the writers remembered: the stamp's device is
// whatever the record says, so a broken member could name any number.
const maxClockWarns = 64

// clockWarn is what this device knows of one writer whose clock is ahead.
type clockWarn struct {
	stamp   crdt.Timestamp // the stamp that was furthest ahead
	aheadMs uint64         // how far ahead of the local clock it was
	via     crdt.DeviceID  // the peer that delivered it
	name    string         // the writer's name, when noted
}

// clockWarnings are the writers whose records arrived stamped ahead of the
// clock. It has a lock of its own: batches from peers add to it on the
// peer layer's goroutines while the API reads it.
type clockWarnings struct {
	mu       sync.Mutex
	byWriter map[crdt.DeviceID]clockWarn
}

// note records that ts arrived from via ahead ms ahead of the local clock,
// from a writer then called name, and reports whether its writer had no
// warning yet (the caller logs it then).
func (c *clockWarnings) note(ts crdt.Timestamp, ahead uint64, via crdt.DeviceID, name string) (clockWarn, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, known := c.byWriter[ts.Device]
	if !known && len(c.byWriter) >= maxClockWarns {
		return w, false
	}
	if c.byWriter == nil {
		c.byWriter = make(map[crdt.DeviceID]clockWarn)
	}
	if !known || ahead > w.aheadMs {
		w = clockWarn{stamp: ts, aheadMs: ahead, via: via}
	}
	w.name = name
	c.byWriter[ts.Device] = w
	return w, !known
}

// list returns the warnings, one per writer.
func (c *clockWarnings) list() []clockWarn {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]clockWarn, 0, len(c.byWriter))
	for _, w := range c.byWriter {
		out = append(out, w)
	}
	return out
}

// clockWarnings returns the warnings for GET /v1/status, the writers'
// current names filled in.
func (d *Daemon) clockWarnings() []api.ClockWarning {
	out := []api.ClockWarning{}
	for _, w := range d.warns.list() {
		dev := w.stamp.Device
		name := d.names.get(dev)
		who := name
		if who == "" {
			who = "device " + dev.String()
		}
		out = append(out, api.ClockWarning{
			Device:  dev.String(),
			Name:    name,
			AheadMs: int64(w.aheadMs), // at most crdt.MaxWall
			Stamp:   rfc3339(w.stamp.Wall),
			Via:     w.via.String(),
			Warning: fmt.Sprintf("%s's clock is wrong: it wrote a change stamped %s, %s ahead of this device's clock", who, rfc3339(w.stamp.Wall), aheadText(w.aheadMs)),
		})
	}
	slices.SortFunc(out, func(a, b api.ClockWarning) int { return cmp.Compare(a.Device, b.Device) })
	return out
}

// aheadText renders an amount of milliseconds for a person: a duration up to
// two days, then days, then years, without overflowing.
func aheadText(ms uint64) string {
	const (
		dayMs  = uint64(24 * time.Hour / time.Millisecond)
		yearMs = 31_556_952_000 // 365.2425 days, the Gregorian average
	)
	switch {
	case ms < 2*dayMs:
		return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
	case ms < 2*yearMs:
		return fmt.Sprintf("%d days", ms/dayMs)
	}
	return fmt.Sprintf("%.1f years", float64(ms)/float64(yearMs))
}
