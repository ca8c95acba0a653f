package crdt_test

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/danyue/danyue/crdt"
	"pgregory.net/rapid"
)

// A simulated library: devices with their own Clock and a wall clock off true
// time by their own offset, making random local operations and exchanging
// records in random order, late, duplicated, and in partial syncs between
// random pairs. Each record remembers which logged operations reached it, so
// that after every step it can be compared with the oracle over exactly those.

type simDevice struct {
	id      crdt.DeviceID
	clock   *crdt.Clock
	offset  int64                 // ms the wall clock is off true time
	maxWall uint64                // the latest wall reading the clock was given
	records map[string]*simRecord // by Entry.AppendID
}

type simRecord struct {
	entry crdt.Entry
	known map[int]bool // indexes in the log of the operations merged into it
}

// message is a record in flight, with the operations it carries.
type message struct {
	entry crdt.Entry
	known []int
}

type simulation struct {
	tb       rapid.TB
	now      uint64 // true time, ms
	devices  []*simDevice
	keys     []crdt.BookKey
	log      []loggedOp
	inflight []message // deltas of local operations, never forgotten: any may be re-delivered
}

var (
	skewOffsets = []int64{0, int64(year), -int64(day)}
	simOffsets  = append(skewOffsets, int64(5*minute), -int64(3*second))
	// wildOffsets are broken clocks: one at the year 9999 (a member stamping
	// the end of time, or worse) and one at the Unix epoch (a phone whose
	// RTC reset).
	wildOffsets = []int64{int64(crdt.MaxWall - t0), -int64(t0)}
	allOffsets  = slices.Concat(simOffsets, wildOffsets)
	simChars    = []uint64{0, 1, 700, 5000, crdt.MaxChar} // few, so that equal offsets happen
	simTitles   = []string{"红楼梦", "Dream of the Red Chamber", "A"}
	simNames    = []string{"Pixel", "MacBook", "NAS"}
)

// newSimulation makes one device per wall-clock offset.
func newSimulation(t *rapid.T, offsets []int64) *simulation {
	ids := rapid.SliceOfNDistinct(rapid.Uint64Min(1), len(offsets), len(offsets), rapid.ID[uint64]).Draw(t, "device ids")
	s := &simulation{tb: t, now: t0, keys: []crdt.BookKey{keyMD5, keySHA256}}
	for i, off := range offsets {
		id := crdt.DeviceID(ids[i])
		s.devices = append(s.devices, &simDevice{id: id, clock: crdt.NewClock(id, crdt.Timestamp{}), offset: off, records: map[string]*simRecord{}})
	}
	return s
}

// run performs random steps, checking every record against the oracle after
// each, then a full exchange.
func (s *simulation) run(t *rapid.T) {
	steps := rapid.IntRange(10, 150).Draw(t, "steps")
	for range steps {
		switch rapid.SampledFrom([]string{"op", "op", "deliver", "sync", "tick"}).Draw(t, "action") {
		case "op":
			s.localOp(t)
		case "deliver":
			s.deliverInflight(t)
		case "sync":
			s.partialSync(t)
		case "tick":
			s.now += rapid.Uint64Range(0, 2*hour).Draw(t, "advance")
		}
		s.checkOracle()
	}
	s.checkConverges(t)
}

// wall reads a device's wall clock, which may also step back a little
// between readings, as real ones do. A clock set to the epoch or past the
// year 9999 reads as far as a real one can go.
func (s *simulation) wall(t *rapid.T, d *simDevice) uint64 {
	w := int64(s.now) + d.offset - int64(rapid.Uint64Range(0, 2*second).Draw(t, "jitter"))
	r := uint64(max(w, 0))
	d.maxWall = max(d.maxWall, min(r, crdt.MaxWall))
	return r
}

func (s *simulation) localOp(t *rapid.T) {
	d := rapid.SampledFrom(s.devices).Draw(t, "device")
	key := rapid.SampledFrom(s.keys).Draw(t, "key")
	op := drawOp(t, d.id, key)
	local := d.records[recordID(identityOf(op))]
	if op.kind != opReadTime {
		op.at = s.stamp(t, d, op.kind, local)
	}
	e, err := opEntry(op, local)
	if err != nil {
		t.Fatalf("%s on %v: %v", op.kind, d.id, err)
	}
	s.checkOrdersAfter(t, op, local)
	id := len(s.log)
	s.log = append(s.log, op)
	known := []int{id}
	if op.kind == opReadTime {
		// The slot value the delta carries includes every earlier addition
		// of this device to this book.
		for i, prev := range s.log[:id] {
			if prev.kind == opReadTime && prev.dev == d.id && prev.key == key {
				known = append(known, i)
			}
		}
	}
	m := message{entry: e, known: known}
	s.receive(t, d, m)
	s.inflight = append(s.inflight, m)
}

// drawOp draws a local operation of device dev, on book key if it is one
// of a book.
func drawOp(t *rapid.T, dev crdt.DeviceID, key crdt.BookKey) loggedOp {
	op := loggedOp{kind: rapid.SampledFrom([]opKind{opPosition, opReadTime, opDelete, opTitle, opRename, opKosyncUser, opKosyncProgress, opKosyncLink}).Draw(t, "op"), dev: dev}
	switch op.kind {
	case opPosition:
		op.key, op.char = key, rapid.SampledFrom(simChars).Draw(t, "char")
		op.percent = crdt.Percent(rapid.Uint32Range(0, uint32(crdt.PercentOne)).Draw(t, "percent"))
	case opReadTime:
		op.key, op.ms = key, rapid.Uint64Range(1, 3*hour).Draw(t, "ms")
	case opDelete:
		op.key = key
	case opTitle:
		op.key, op.text = key, rapid.SampledFrom(simTitles).Draw(t, "title")
	case opRename:
		op.text = rapid.SampledFrom(simNames).Draw(t, "name")
	case opKosyncUser, opKosyncProgress:
		drawKosync(t, &op)
	case opKosyncLink:
		op.key = key
		op.kosync.Document = rapid.SampledFrom(simKosyncDocs).Draw(t, "document")
		op.text = rapid.SampledFrom(append([]string{""}, simTitles...)).Draw(t, "file title")
	}
	return op
}

// stamp is the daemon's rule: a local write orders after everything in the
// record it writes (doc "Time").
func (s *simulation) stamp(t *rapid.T, d *simDevice, kind opKind, local *simRecord) crdt.Timestamp {
	var floor crdt.Timestamp
	if local != nil {
		floor = local.entry.MaxTimestamp()
	}
	at := d.clock.NowAfter(s.wall(t, d), floor)
	// Rule (doc "Time"): the clock follows other devices only up to
	// MaxAhead past its wall clock, so a local write is stamped near the
	// device's own time unless the record it writes is further ahead.
	if at.Wall > d.maxWall+crdt.MaxAhead && at.Wall > floor.Wall+1 {
		t.Fatalf("%s stamped %v, more than MaxAhead past the device's latest wall reading %d and past the record's latest stamp %v", kind, at, d.maxWall, floor)
	}
	return at
}

// opEntry performs op with the package's operations; local is the record
// as its device holds it, if it does.
func opEntry(op loggedOp, local *simRecord) (crdt.Entry, error) {
	switch op.kind {
	case opPosition:
		return crdt.SetPosition(op.key, op.at, op.char, float64(op.percent)/1e6)
	case opReadTime:
		var book *crdt.Book
		if local != nil {
			book = &local.entry.Book
		}
		return crdt.AddReadTime(op.key, book, op.dev, op.ms)
	case opDelete:
		return crdt.Delete(op.key, op.at)
	case opTitle:
		return crdt.SetTitle(op.key, op.at, op.text)
	case opRename:
		return crdt.RenameDevice(op.at, op.text)
	case opKosyncUser:
		if op.text == crdt.KosyncRemoved {
			return crdt.RemoveKosyncUser(op.at, op.kosync.User)
		}
		return crdt.SetKosyncUser(op.at, op.kosync.User, op.text)
	case opKosyncProgress:
		return crdt.SetKosyncProgress(op.at, op.kosync)
	case opKosyncLink:
		return crdt.LinkKosyncDocument(op.at, op.kosync.Document, op.key, op.text)
	}
	return crdt.Entry{}, fmt.Errorf("no operation %v", op.kind)
}

// checkOrdersAfter checks the rule (doc "Time"): a write made after a
// device has seen another write to the same record orders after it,
// whatever the wall clocks say, both by timestamp and by clock reading
// (which decides visibility).
func (s *simulation) checkOrdersAfter(t *rapid.T, op loggedOp, local *simRecord) {
	if local == nil || op.at.IsZero() {
		return
	}
	for id := range local.known {
		prev := s.log[id]
		if prev.kind == opReadTime {
			continue
		}
		if !later(op.at, prev.at) || !readingAfter(op.at, prev.at) {
			t.Fatalf("%s at %v does not order after %s at %v, which its device had seen", op.kind, op.at, prev.kind, prev.at)
		}
	}
}

// deliverInflight delivers an old delta to any device: late, out of order,
// possibly again, possibly back to its author.
func (s *simulation) deliverInflight(t *rapid.T) {
	if len(s.inflight) == 0 {
		return
	}
	m := rapid.SampledFrom(s.inflight).Draw(t, "delta")
	s.receive(t, rapid.SampledFrom(s.devices).Draw(t, "to"), m)
}

// partialSync sends some of one device's current records to another.
func (s *simulation) partialSync(t *rapid.T) {
	from := rapid.SampledFrom(s.devices).Draw(t, "from")
	to := rapid.SampledFrom(s.devices).Draw(t, "to")
	for _, rid := range sortedIDs(from) {
		if rapid.Bool().Draw(t, "send") {
			s.receive(t, to, s.stateOf(from, rid))
		}
	}
}

func (s *simulation) stateOf(d *simDevice, rid string) message {
	r := d.records[rid]
	var known []int
	for id := range r.known {
		known = append(known, id)
	}
	return message{entry: r.entry.Clone(), known: known}
}

// receive merges a message into a device's record, through the wire form
// like the daemon does, after the device's clock has observed it.
func (s *simulation) receive(t *rapid.T, d *simDevice, m message) bool {
	in, err := crdt.Decode(encode(t, m.entry))
	if err != nil {
		t.Fatalf("decode a record we encoded: %v", err)
	}
	rid := recordID(in)
	r := d.records[rid]
	if r == nil {
		r = &simRecord{entry: emptyOf(in), known: map[int]bool{}}
		d.records[rid] = r
	}
	d.clock.Observe(in.MaxTimestamp(), s.wall(t, d))
	if last := d.clock.Last(); last.Wall > d.maxWall+crdt.MaxAhead {
		t.Fatalf("after observing %v the clock is at %v, more than MaxAhead past the device's latest wall reading %d", in.MaxTimestamp(), last, d.maxWall)
	}
	before := encode(t, r.entry)
	changed, err := r.entry.Merge(&in)
	if err != nil {
		t.Fatal(err)
	}
	if after := encode(t, r.entry); changed == bytes.Equal(before, after) {
		t.Fatalf("Merge reported changed=%v, but before %x after %x", changed, before, after)
	}
	for _, id := range m.known {
		r.known[id] = true
	}
	return changed
}

// checkOracle compares every record of every device with the oracle over the
// operations that reached it.
func (s *simulation) checkOracle() {
	s.tb.Helper()
	for di, d := range s.devices {
		for _, r := range d.records {
			var seen []loggedOp
			for id, op := range s.log {
				if r.known[id] {
					seen = append(seen, op)
				}
			}
			want := crdt.DeviceEntry(oracleDevice(r.entry.Device.ID, seen))
			if r.entry.Kind == crdt.KindBook {
				want = crdt.BookEntry(oracleBook(r.entry.Book.Key, seen))
				if got, vis := r.entry.Book.Visible(), oracleVisible(r.entry.Book.Key, seen); got != vis {
					s.tb.Fatalf("device %d: Visible() = %v, oracle says %v\nrecord %+v", di, got, vis, r.entry.Book)
				}
			}
			if k, ok := oracleKosync(r.entry, seen); ok {
				want = k
			}
			if !bytes.Equal(encode(s.tb, r.entry), encode(s.tb, want)) {
				s.tb.Fatalf("device %d disagrees with the oracle over %d operations\n got %+v\nwant %+v", di, len(seen), r.entry, want)
			}
		}
	}
}

// checkConverges exchanges everything between every ordered pair in random
// order, then checks that all replicas hold identical bytes equal to the
// oracle over the whole log, and that nothing more (a second exchange, every
// old delta again) changes anything.
func (s *simulation) checkConverges(t *rapid.T) {
	var pairs [][2]int
	for i := range s.devices {
		for j := range s.devices {
			if i != j {
				pairs = append(pairs, [2]int{i, j})
			}
		}
	}
	for round := range 2 {
		for _, p := range rapid.Permutation(pairs).Draw(t, "exchange order") {
			from, to := s.devices[p[0]], s.devices[p[1]]
			for _, rid := range sortedIDs(from) {
				if s.receive(t, to, s.stateOf(from, rid)) && round == 1 {
					t.Fatalf("the second full exchange still changed a record")
				}
			}
		}
	}
	for _, m := range s.inflight {
		for _, d := range s.devices {
			if s.receive(t, d, m) {
				t.Fatalf("an old delta changed a converged record")
			}
		}
	}
	s.checkOracle()
	first := s.devices[0]
	for _, d := range s.devices[1:] {
		if !slices.Equal(sortedIDs(d), sortedIDs(first)) {
			t.Fatalf("devices hold different records")
		}
		for rid, r := range d.records {
			if !bytes.Equal(encode(t, r.entry), encode(t, first.records[rid].entry)) {
				t.Fatalf("replicas did not converge:\n%+v\n%+v", r.entry, first.records[rid].entry)
			}
			if len(r.known) != len(first.records[rid].known) {
				t.Fatalf("replicas converged without every operation")
			}
		}
	}
}

// readingAfter reports whether a's clock reading (wall time and counter) is
// past b's: the order that decides whether a write revives a deleted book.
func readingAfter(a, b crdt.Timestamp) bool {
	return a.Wall > b.Wall || (a.Wall == b.Wall && a.Logical > b.Logical)
}

// identityOf returns the empty record op writes to.
func identityOf(op loggedOp) crdt.Entry {
	switch op.kind {
	case opRename:
		return crdt.DeviceEntry(crdt.Device{ID: op.dev})
	case opKosyncUser:
		return crdt.KosyncUserEntry(crdt.KosyncUser{Name: op.kosync.User})
	case opKosyncProgress:
		return crdt.KosyncProgressEntry(crdt.KosyncProgress{User: op.kosync.User, Document: op.kosync.Document})
	case opKosyncLink:
		return crdt.KosyncLinkEntry(crdt.KosyncLink{Document: op.kosync.Document})
	}
	return crdt.BookEntry(crdt.Book{Key: op.key})
}

func recordID(e crdt.Entry) string { return string(e.AppendID(nil)) }

func sortedIDs(d *simDevice) []string {
	ids := make([]string, 0, len(d.records))
	for id := range d.records {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
