package crdt

import "cmp"

// Percent is a fraction of a book in millionths: 0 is the start, 1_000_000 the
// end. A fixed-point value, so that a position survives the wire unchanged and
// encodes small.
type Percent uint32

// PercentOne is the end of the book.
const PercentOne Percent = 1_000_000

// Float returns the fraction as a number in [0, 1].
func (p Percent) Float() float64 { return float64(p) / float64(PercentOne) }

// Position is a place in a book written at a moment by a device: an offset in
// UTF-16 code units into the normalized text and the fraction of the book it
// is at.
type Position struct {
	At      Timestamp // zero if never written; At.Device is the writer
	Char    uint64
	Percent Percent
}

// compare orders positions as a last-writer-wins register: by timestamp, and
// by content for equal timestamps, which only a broken peer can produce but
// must still merge the same way on every device.
func (p Position) compare(q Position) int {
	if c := p.At.Compare(q.At); c != 0 {
		return c
	}
	if c := cmp.Compare(p.Char, q.Char); c != 0 {
		return c
	}
	return cmp.Compare(p.Percent, q.Percent)
}

// compareFurthest orders positions as a max register of the offset: the
// largest offset wins, and among equal offsets the later write.
func (p Position) compareFurthest(q Position) int {
	if c := cmp.Compare(p.Char, q.Char); c != 0 {
		return c
	}
	return p.compare(q)
}

// Text is a last-writer-wins string register: a book's title or a device's
// name.
type Text struct {
	At    Timestamp // zero if never written
	Value string
}

func (t Text) compare(u Text) int {
	if c := t.At.Compare(u.At); c != 0 {
		return c
	}
	return cmp.Compare(t.Value, u.Value)
}

// Slot is one device's share of a book's read time: the milliseconds that
// device has spent reading it, ever. Only that device increases it.
type Slot struct {
	Device DeviceID
	Ms     uint64
}

// ReadTime is a grow-only counter: one slot per device, sorted by device.
// The total is derived by summing; nothing stores or sets it.
type ReadTime []Slot

// Total returns the read time over all devices.
func (r ReadTime) Total() uint64 {
	var t uint64
	for _, s := range r {
		t += s.Ms
	}
	return t
}

// Of returns the read time of one device.
func (r ReadTime) Of(d DeviceID) uint64 {
	for _, s := range r {
		if s.Device == d {
			return s.Ms
		}
	}
	return 0
}

// merge sets every slot of r to the max of itself and o, returning the result
// and whether anything changed. It allocates only when o has devices r lacks,
// and never shares o's backing array.
func (r ReadTime) merge(o ReadTime) (ReadTime, bool) {
	changed, missing := false, 0
	i := 0
	for _, s := range o {
		for i < len(r) && r[i].Device < s.Device {
			i++
		}
		if i < len(r) && r[i].Device == s.Device {
			if s.Ms > r[i].Ms {
				r[i].Ms, changed = s.Ms, true
			}
			continue
		}
		missing++
	}
	if missing == 0 {
		return r, changed
	}
	out := make(ReadTime, 0, len(r)+missing)
	i = 0
	for _, s := range o {
		for i < len(r) && r[i].Device < s.Device {
			out = append(out, r[i])
			i++
		}
		if i < len(r) && r[i].Device == s.Device {
			out = append(out, Slot{s.Device, max(s.Ms, r[i].Ms)})
			i++
			continue
		}
		out = append(out, s)
	}
	return append(out, r[i:]...), true
}

// Book is the replicated record of one book.
type Book struct {
	Key      BookKey
	Position Position  // last writer wins
	Furthest Position  // largest offset wins
	ReadTime ReadTime  // per-device max
	Deleted  Timestamp // the tombstone: last delete wins; zero if never deleted
	Title    Text      // last writer wins
}

// Visible reports whether the book is on the shelf: never deleted, or written
// (its position set) strictly after its last delete. The device is left out
// of this comparison: a delete and a write at the same clock reading (wall
// time and counter) on two devices are a tie, and ties go to the delete, as
// in seed 004, because removing a book is the stronger wish. Read time and
// title writes do not bring a deleted book back; reading it again does.
func (b *Book) Visible() bool {
	if b.Deleted.IsZero() {
		return true
	}
	p, d := b.Position.At, b.Deleted
	return p.Wall > d.Wall || (p.Wall == d.Wall && p.Logical > d.Logical)
}

// Merge folds o, a record or delta of the same book, into b and reports
// whether b changed. Merge is commutative, associative and idempotent:
// replicas that have merged the same set of records are equal, whatever the
// order, duplication or delay of delivery.
func (b *Book) Merge(o *Book) bool {
	changed := false
	if o.Position.compare(b.Position) > 0 {
		b.Position, changed = o.Position, true
	}
	if o.Furthest.compareFurthest(b.Furthest) > 0 {
		b.Furthest, changed = o.Furthest, true
	}
	var rtChanged bool
	if b.ReadTime, rtChanged = b.ReadTime.merge(o.ReadTime); rtChanged {
		changed = true
	}
	if o.Deleted.After(b.Deleted) {
		b.Deleted, changed = o.Deleted, true
	}
	if o.Title.compare(b.Title) > 0 {
		b.Title, changed = o.Title, true
	}
	return changed
}

// Clone returns a copy of b that shares no memory with it.
func (b *Book) Clone() Book {
	c := *b
	c.ReadTime = append(ReadTime(nil), b.ReadTime...)
	return c
}

// maxTimestamp returns the latest timestamp anywhere in the record.
func (b *Book) maxTimestamp() Timestamp {
	m := b.Position.At
	for _, t := range []Timestamp{b.Furthest.At, b.Deleted, b.Title.At} {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// Device is the replicated record of one device of the library, so that
// others can say "last read on Pixel".
type Device struct {
	ID   DeviceID
	Name Text
}

// Merge folds o, a record of the same device, into d and reports whether d
// changed.
func (d *Device) Merge(o *Device) bool {
	if o.Name.compare(d.Name) > 0 {
		d.Name = o.Name
		return true
	}
	return false
}
