package crdt

import (
	"cmp"
	"math"
	"strings"
	"unicode/utf8"
)

// The records of KOReader's progress sync ("kosync"), which any daemon of a
// library serves: accounts and the last position of each account in each
// document. They belong to the library and merge like every other record, so
// a KOReader device may talk to any daemon and see what another device pushed
// to another daemon.

// Limits of the kosync records, in UTF-8 bytes. KOReader sends a 32-digit
// document id, an XPointer of well under a kilobyte, a model name and a
// 32-digit device id; the limits leave room for other clients and bound what
// a record can cost.
const (
	MaxKosyncUserBytes     = 256
	MaxKosyncDocumentBytes = 256
	MaxKosyncProgressBytes = 4096
	MaxKosyncDeviceBytes   = 256
	MaxKosyncAuthBytes     = 256
)

// KosyncUser is the replicated record of one kosync account, keyed by its
// name. Auth is what a client's key is checked against: a salted hash made by
// the daemon, so that no disk holds the key itself. Its format is the
// daemon's business; the record only keeps the last one written.
type KosyncUser struct {
	Name string
	Auth Text // last writer wins
}

// Merge folds o, a record of the same account, into u and reports whether u
// changed.
func (u *KosyncUser) Merge(o *KosyncUser) bool {
	if o.Auth.compare(u.Auth) > 0 {
		u.Auth = o.Auth
		return true
	}
	return false
}

// KosyncProgress is the replicated record of one account's place in one
// document, keyed by (User, Document). All of it but the key is one
// last-writer-wins register: the write with the larger timestamp wins,
// whichever daemon took it and whenever it arrived.
type KosyncProgress struct {
	User     string
	Document string

	At         Timestamp // zero if never written; At.Device is the daemon that took the write
	Progress   string    // opaque to danyue: an XPointer or a page number, kept byte for byte
	Percentage float64   // in [0, 1]
	Device     string    // the reader device's name, as the client sent it
	DeviceID   string    // the reader device's id, as the client sent it
}

// compare orders two writes of the register: by timestamp, then by content,
// so that even equal timestamps (which only a broken peer makes) merge the
// same way everywhere.
func (p *KosyncProgress) compare(q *KosyncProgress) int {
	if c := p.At.Compare(q.At); c != 0 {
		return c
	}
	if c := cmp.Compare(p.Progress, q.Progress); c != 0 {
		return c
	}
	// Validation refuses NaN and negative zero, so this order is total on
	// valid records and matches their encodings' equality.
	if c := cmp.Compare(p.Percentage, q.Percentage); c != 0 {
		return c
	}
	if c := cmp.Compare(p.Device, q.Device); c != 0 {
		return c
	}
	return cmp.Compare(p.DeviceID, q.DeviceID)
}

// Merge folds o, a record of the same account and document, into p and
// reports whether p changed.
func (p *KosyncProgress) Merge(o *KosyncProgress) bool {
	if o.compare(p) <= 0 {
		return false
	}
	p.At, p.Progress, p.Percentage, p.Device, p.DeviceID = o.At, o.Progress, o.Percentage, o.Device, o.DeviceID
	return true
}

// SetKosyncUser records the account name with auth, the daemon's hash of its
// key, as of at. Written again, it replaces the key on every daemon.
func SetKosyncUser(at Timestamp, name, auth string) (Entry, error) {
	if err := checkStamp(at); err != nil {
		return Entry{}, err
	}
	u := KosyncUser{Name: name, Auth: Text{At: at, Value: auth}}
	if err := u.validate(); err != nil {
		return Entry{}, err
	}
	if err := CheckText("kosync user name", name); err != nil {
		return Entry{}, err
	}
	return KosyncUserEntry(u), nil
}

// KosyncRemoved is the key hash of a removed account: no key matches it. A
// removal is a value, not an empty register, so that a device of an older
// version takes the record as an ordinary change of key (which no client
// can log in with) instead of refusing it.
const KosyncRemoved = "removed"

// RemoveKosyncUser records, as of at, that the account name is gone. Like
// every write to the register, a later SetKosyncUser (the account made
// again) wins over it, and it wins over every earlier one, wherever they
// arrive from.
func RemoveKosyncUser(at Timestamp, name string) (Entry, error) {
	return SetKosyncUser(at, name, KosyncRemoved)
}

// Exists reports whether the account is there: written, and not removed
// since.
func (u *KosyncUser) Exists() bool { return !u.Auth.At.IsZero() && u.Auth.Value != KosyncRemoved }

// SetKosyncProgress records p (its At is ignored) as the place of p.User in
// p.Document as of at.
func SetKosyncProgress(at Timestamp, p KosyncProgress) (Entry, error) {
	if err := checkStamp(at); err != nil {
		return Entry{}, err
	}
	p.At = at
	if p.Percentage == 0 {
		p.Percentage = 0 // -0 is a second encoding of 0: write the one form
	}
	if err := p.validate(); err != nil {
		return Entry{}, err
	}
	if err := p.checkText(); err != nil {
		return Entry{}, err
	}
	return KosyncProgressEntry(p), nil
}

func checkStamp(at Timestamp) error {
	if at.IsZero() {
		return invalidf("write without a timestamp")
	}
	return at.validate()
}

func (u *KosyncUser) validate() error {
	if err := validKosyncID("kosync user name", u.Name, MaxKosyncUserBytes); err != nil {
		return err
	}
	return u.Auth.validate("kosync user key hash", MaxKosyncAuthBytes)
}

func (p *KosyncProgress) validate() error {
	if err := validKosyncID("kosync user name", p.User, MaxKosyncUserBytes); err != nil {
		return err
	}
	if err := validKosyncID("kosync document", p.Document, MaxKosyncDocumentBytes); err != nil {
		return err
	}
	if err := p.At.validate(); err != nil {
		return err
	}
	if p.At.IsZero() {
		if p.Progress != "" || p.Percentage != 0 || math.Signbit(p.Percentage) || p.Device != "" || p.DeviceID != "" {
			return invalidf("kosync progress has content but no timestamp")
		}
		return nil
	}
	if f := p.Percentage; math.IsNaN(f) || f < 0 || f > 1 || math.Signbit(f) {
		return invalidf("kosync percentage %v is outside [0, 1]", f)
	}
	if err := validKosyncValue("kosync progress", p.Progress, MaxKosyncProgressBytes); err != nil {
		return err
	}
	if err := validKosyncValue("kosync device", p.Device, MaxKosyncDeviceBytes); err != nil {
		return err
	}
	return validKosyncValue("kosync device id", p.DeviceID, MaxKosyncDeviceBytes)
}

// checkText holds a new write to CheckText; validate, which records from
// peers also pass, does not (see CheckText).
func (p *KosyncProgress) checkText() error {
	for _, f := range []struct{ what, s string }{
		{"kosync user name", p.User}, {"kosync document", p.Document}, {"kosync progress", p.Progress},
		{"kosync device", p.Device}, {"kosync device id", p.DeviceID},
	} {
		if err := CheckText(f.what, f.s); err != nil {
			return err
		}
	}
	return nil
}

// validKosyncID checks a part of a record's identity: not empty, bounded,
// UTF-8, and without NUL, which separates user and document in the id.
func validKosyncID(what, s string, maxBytes int) error {
	if err := validText(what, s, maxBytes); err != nil {
		return err
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalidf("%s contains NUL", what)
	}
	return nil
}

// validKosyncValue checks a value the client chose: bounded UTF-8, possibly
// empty.
func validKosyncValue(what, s string, maxBytes int) error {
	switch {
	case len(s) > maxBytes:
		return invalidf("%s is %d bytes, longer than %d", what, len(s), maxBytes)
	case !utf8.ValidString(s):
		return invalidf("%s is not valid UTF-8", what)
	}
	return nil
}
