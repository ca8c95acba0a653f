package crdt_test

import (
	"slices"

	"github.com/danyue/danyue/crdt"
)

// The oracle: what a record must be, computed from the full log of the
// operations that reached it, by plain loops over that log. It shares no code
// with the package's merge (it orders timestamps itself and never calls
// Merge or a compare method), so a bug in one is not hidden by the same bug
// in the other: the optimized code is checked against a naive model
// (docs/style.md, Tests).

type opKind int

const (
	opPosition opKind = iota
	opReadTime
	opDelete
	opTitle
	opRename
	opKosyncUser
	opKosyncProgress
	opKosyncLink
)

func (k opKind) String() string {
	return [...]string{"position", "read", "delete", "title", "rename", "kosync user", "kosync progress", "kosync link"}[k]
}

// loggedOp is one local operation as the user asked for it, with the
// timestamp its device's clock gave it.
type loggedOp struct {
	kind    opKind
	key     crdt.BookKey   // books only
	dev     crdt.DeviceID  // the device that performed it
	at      crdt.Timestamp // zero for read time, which carries no timestamp
	char    uint64
	percent crdt.Percent
	ms      uint64              // read time added
	text    string              // title, device name, kosync key hash, or a link's title
	kosync  crdt.KosyncProgress // kosync ops: the account (User), and for progress what was written; a link's Document
}

// later is the timestamp order of the package doc ("wall ms, logical
// counter, device"), written out.
func later(a, b crdt.Timestamp) bool {
	if a.Wall != b.Wall {
		return a.Wall > b.Wall
	}
	if a.Logical != b.Logical {
		return a.Logical > b.Logical
	}
	return a.Device > b.Device
}

// oracleBook is the record of book key after the given operations (any
// order; operations on other records are ignored):
//   - position: the position write with the latest timestamp;
//   - furthest: the position write with the largest offset, the latest among
//     equal offsets;
//   - read time: per device, the sum of the read time that device added (its
//     own slot, written only by itself);
//   - deleted: the latest delete;
//   - title: the title write with the latest timestamp.
func oracleBook(key crdt.BookKey, log []loggedOp) crdt.Book {
	b := crdt.Book{Key: key}
	var wroteFurthest bool
	sums := map[crdt.DeviceID]uint64{}
	for _, op := range log {
		if op.key != key {
			continue
		}
		switch op.kind {
		case opPosition:
			p := crdt.Position{At: op.at, Char: op.char, Percent: op.percent}
			if later(op.at, b.Position.At) {
				b.Position = p
			}
			if !wroteFurthest || op.char > b.Furthest.Char || (op.char == b.Furthest.Char && later(op.at, b.Furthest.At)) {
				b.Furthest, wroteFurthest = p, true
			}
		case opReadTime:
			sums[op.dev] += op.ms
		case opDelete:
			if later(op.at, b.Deleted) {
				b.Deleted = op.at
			}
		case opTitle:
			if later(op.at, b.Title.At) {
				b.Title = crdt.Text{At: op.at, Value: op.text}
			}
		}
	}
	var devices []crdt.DeviceID
	for d := range sums {
		devices = append(devices, d)
	}
	slices.Sort(devices)
	for _, d := range devices {
		b.ReadTime = append(b.ReadTime, crdt.Slot{Device: d, Ms: sums[d]})
	}
	return b
}

// oracleVisible is the tombstone rule, from the log alone: visible when
// never deleted, or when the latest position write is strictly later than
// the latest delete by clock reading.
func oracleVisible(key crdt.BookKey, log []loggedOp) bool {
	var lastWrite, lastDelete crdt.Timestamp
	deleted := false
	for _, op := range log {
		switch {
		case op.key != key:
		case op.kind == opPosition && later(op.at, lastWrite):
			lastWrite = op.at
		case op.kind == opDelete:
			deleted = true
			if later(op.at, lastDelete) {
				lastDelete = op.at
			}
		}
	}
	// Ties on the clock reading go to the delete, whichever device made
	// them: only wall time and counter are compared.
	return !deleted || lastWrite.Wall > lastDelete.Wall ||
		(lastWrite.Wall == lastDelete.Wall && lastWrite.Logical > lastDelete.Logical)
}

// oracleDevice is the record of device id: the latest name it gave itself.
func oracleDevice(id crdt.DeviceID, log []loggedOp) crdt.Device {
	d := crdt.Device{ID: id}
	for _, op := range log {
		if op.kind == opRename && op.dev == id && later(op.at, d.Name.At) {
			d.Name = crdt.Text{At: op.at, Value: op.text}
		}
	}
	return d
}
