package daemon

// Records become API documents here; nothing in them is stored.

import (
	"strconv"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
)

// viewer renders records for one device. name is the name of a write's
// device when it made the write (the stamp's device at the stamp), so a
// rename never changes how history is shown.
type viewer struct {
	self crdt.DeviceID
	name func(crdt.Timestamp) string
	keep time.Duration // the undo window; negative for none
}

func (v viewer) book(b *crdt.Book) api.Book {
	out := api.Book{
		Key:      b.Key.String(),
		Title:    b.Title.Value,
		Position: v.position(b.Position),
		Furthest: v.position(b.Furthest),
		ReadTime: api.ReadTime{
			TotalMs:      b.ReadTime.Total(),
			ThisDeviceMs: b.ReadTime.Of(v.self),
			ByDevice:     make(map[string]uint64, len(b.ReadTime)),
		},
		Deleted: !b.Visible(),
	}
	for _, s := range b.ReadTime {
		out.ReadTime.ByDevice[s.Device.String()] = s.Ms
	}
	if out.Deleted {
		at, by, name := rfc3339(b.Deleted.Wall), b.Deleted.Device.String(), v.name(b.Deleted)
		out.DeletedAt, out.DeletedBy, out.DeletedByName = &at, &by, &name
		if v.keep >= 0 {
			until := rfc3339(b.Deleted.Wall + uint64(v.keep.Milliseconds()))
			out.KeptUntil = &until
		}
	}
	if !b.Deleted.IsZero() {
		s := stamp(b.Deleted)
		out.DeletedStamp = &s
	}
	return out
}

func (v viewer) position(p crdt.Position) *api.Position {
	if p.At.IsZero() {
		return nil
	}
	return &api.Position{
		Char:       p.Char,
		Percent:    p.Percent.Float(),
		Device:     p.At.Device.String(),
		DeviceName: v.name(p.At),
		At:         rfc3339(p.At.Wall),
		Stamp:      stamp(p.At),
	}
}

// stamp formats a timestamp so that string order is timestamp order: fixed
// width wall time and counter, then the device.
// Every book rendered has one or three, so it is built by hand, not by fmt.
func stamp(t crdt.Timestamp) string {
	b := make([]byte, 0, 15+1+10+1+16)
	b = appendPadded(b, t.Wall, 15)
	b = append(b, '.')
	b = appendPadded(b, uint64(t.Logical), 10)
	b = append(b, '.')
	b = append(b, t.Device.String()...)
	return string(b)
}

// appendPadded appends n in decimal, zero-padded to width digits (as
// fmt's %0*d).
func appendPadded(b []byte, n uint64, width int) []byte {
	var d [20]byte
	digits := strconv.AppendUint(d[:0], n, 10)
	for range width - len(digits) {
		b = append(b, '0')
	}
	return append(b, digits...)
}

func (v viewer) deleted(b *crdt.Book) api.Deleted {
	name := v.name(b.Deleted)
	title := b.Title.Value
	if title == "" {
		title = b.Key.String()
	}
	return api.Deleted{
		Key:        b.Key.String(),
		Title:      b.Title.Value,
		Device:     b.Deleted.Device.String(),
		DeviceName: name,
		At:         rfc3339(b.Deleted.Wall),
		Message: "\u201c" + title + "\u201d was removed from the shelf on " + name +
			". Nothing on this device was deleted; reading it here again brings it back on every device.",
	}
}

// rfc3339 formats an HLC wall time. The logical counter is not shown: it
// orders writes, it is not a time.
func rfc3339(wallMs uint64) string {
	return time.UnixMilli(int64(wallMs)).UTC().Format(time.RFC3339Nano)
}

// viewer renders records with the name each write's device had when it
// made it.
func (d *Daemon) viewer() viewer {
	return viewer{self: d.lib.Self(), name: d.lib.NameAt, keep: d.lib.KeepDeleted()}
}
