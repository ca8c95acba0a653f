package library

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
)

// Warnings about devices whose records arrive stamped ahead of this device's
// clock. The device to blame is the writer, the stamp's device: the peer that
// delivered a record may only have relayed it. Amounts are kept in
// milliseconds as integers: a stamp in the year 9999 is about 8,000 years
// ahead, past what a time.Duration holds (about 292 years).

// ClockWarnAfter is the amount ahead past which a writer is reported: as far
// as the clock follows (crdt.MaxAhead). A daemon reports peers whose clock
// offset is past it too.
const ClockWarnAfter = time.Minute

const clockWarnAfterMs = uint64(ClockWarnAfter / time.Millisecond)

// maxClockWarns bounds the writers remembered: the stamp's device is
// whatever the record says, so a broken member could name any number.
const maxClockWarns = 64

// ClockWarning is a device whose clock is ahead, as the records it wrote
// show.
type ClockWarning struct {
	Writer  crdt.DeviceID  // the stamp's device
	Name    string         // its name now, "" if it never told
	Stamp   crdt.Timestamp // the stamp that was furthest ahead
	AheadMs uint64         // how far ahead of this device's clock it was
	Via     crdt.DeviceID  // the peer that delivered it
}

// Message says the warning to a person.
func (w ClockWarning) Message() string {
	who := w.Name
	if who == "" {
		who = "device " + w.Writer.String()
	}
	return fmt.Sprintf("%s's clock is wrong: it wrote a change stamped %s, %s ahead of this device's clock", who, rfc3339(w.Stamp.Wall), aheadText(w.AheadMs))
}

// ClockWarnings returns the writers whose records arrived stamped more than
// ClockWarnAfter ahead of this device's clock since the library opened, in
// device id order, with their names now.
func (l *Library) ClockWarnings() []ClockWarning {
	out := l.warns.list()
	for i := range out {
		out[i].Name = l.names.get(out[i].Writer)
	}
	slices.SortFunc(out, func(a, b ClockWarning) int { return cmp.Compare(a.Writer, b.Writer) })
	return out
}

// noteAhead records a stamp that arrived from via ahead of the clock, and
// logs its writer's first.
func (l *Library) noteAhead(a aheadStamp, via crdt.DeviceID) {
	w, first := l.warns.note(ClockWarning{Writer: a.ts.Device, Name: l.names.get(a.ts.Device), Stamp: a.ts, AheadMs: a.aheadMs, Via: via})
	if !first {
		return
	}
	l.log.Warn("received a write stamped ahead of this device's clock; the writer's clock is wrong",
		"writer", w.Writer, "writer_name", w.Name, "ahead", aheadText(w.AheadMs), "ahead_ms", w.AheadMs,
		"stamp", rfc3339(w.Stamp.Wall), "via", w.Via)
}

// clockWarnings are the writers whose records arrived stamped ahead of the
// clock. It has a lock of its own: batches from peers add to it on the
// peer layer's goroutines while the API reads it.
type clockWarnings struct {
	mu       sync.Mutex
	byWriter map[crdt.DeviceID]ClockWarning
}

// note records w, and reports whether its writer had no warning yet (the
// caller logs it then). The stamp furthest ahead is kept, with its relay.
func (c *clockWarnings) note(w ClockWarning) (ClockWarning, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, known := c.byWriter[w.Writer]
	if !known && len(c.byWriter) >= maxClockWarns {
		return w, false
	}
	if c.byWriter == nil {
		c.byWriter = make(map[crdt.DeviceID]ClockWarning)
	}
	if known && w.AheadMs <= old.AheadMs {
		old.Name = w.Name
		w = old
	}
	c.byWriter[w.Writer] = w
	return w, !known
}

// list returns the warnings, one per writer.
func (c *clockWarnings) list() []ClockWarning {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ClockWarning, 0, len(c.byWriter))
	for _, w := range c.byWriter {
		out = append(out, w)
	}
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

// rfc3339 formats an HLC wall time. The logical counter is not shown: it
// orders writes, it is not a time.
func rfc3339(wallMs uint64) string {
	return time.UnixMilli(int64(wallMs)).UTC().Format(time.RFC3339Nano)
}
