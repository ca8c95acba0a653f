package crdt

import (
	"encoding/binary"
	"fmt"
)

// Kind says which record an Entry holds.
type Kind uint8

const (
	KindBook           Kind = 1
	KindDevice         Kind = 2
	KindKosyncUser     Kind = 3
	KindKosyncProgress Kind = 4
	// KindKosyncLink records tie a KOReader document to a book.
	KindKosyncLink Kind = 5
)

// Kinds returns every record kind, for callers that count or scan all
// records.
func Kinds() []Kind {
	return []Kind{KindBook, KindDevice, KindKosyncUser, KindKosyncProgress, KindKosyncLink, KindMember}
}

func (k Kind) String() string {
	switch k {
	case KindBook:
		return "book"
	case KindDevice:
		return "device"
	case KindKosyncUser:
		return "kosync user"
	case KindKosyncProgress:
		return "kosync progress"
	case KindKosyncLink:
		return "kosync link"
	case KindMember:
		return "member"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is one replicated record of the library, the unit that is stored,
// merged and shipped between devices. Exactly the field named by Kind is
// meaningful.
type Entry struct {
	Kind           Kind
	Book           Book
	Device         Device
	KosyncUser     KosyncUser
	KosyncProgress KosyncProgress
	KosyncLink     KosyncLink
	Member         Member
}

// BookEntry wraps a book record.
func BookEntry(b Book) Entry { return Entry{Kind: KindBook, Book: b} }

// DeviceEntry wraps a device record.
func DeviceEntry(d Device) Entry { return Entry{Kind: KindDevice, Device: d} }

// KosyncUserEntry wraps a kosync account record.
func KosyncUserEntry(u KosyncUser) Entry { return Entry{Kind: KindKosyncUser, KosyncUser: u} }

// KosyncProgressEntry wraps a kosync progress record.
func KosyncProgressEntry(p KosyncProgress) Entry {
	return Entry{Kind: KindKosyncProgress, KosyncProgress: p}
}

// AppendID appends the identity of the record, unique across kinds: the kind
// byte, then the binary book key, the big-endian device id, the kosync
// account name, the account name, a NUL and the document (neither may
// hold a NUL), a link's document, or a member's library and big-endian
// device id. Two entries merge only if their ids are equal.
func (e *Entry) AppendID(b []byte) []byte {
	b = append(b, byte(e.Kind))
	switch e.Kind {
	case KindBook:
		b, _ = e.Book.Key.AppendBinary(b)
	case KindDevice:
		b = binary.BigEndian.AppendUint64(b, uint64(e.Device.ID))
	case KindKosyncUser:
		b = append(b, e.KosyncUser.Name...)
	case KindKosyncProgress:
		b = append(append(append(b, e.KosyncProgress.User...), 0), e.KosyncProgress.Document...)
	case KindKosyncLink:
		b = append(b, e.KosyncLink.Document...)
	case KindMember:
		b = append(b, e.Member.Library[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(e.Member.ID))
	}
	return b
}

// Merge folds o into e and reports whether e changed. It fails, changing
// nothing, if o is another record.
func (e *Entry) Merge(o *Entry) (bool, error) {
	if e.Kind != o.Kind {
		return false, invalidf("merge of a %s into a %s", o.Kind, e.Kind)
	}
	switch e.Kind {
	case KindBook:
		if e.Book.Key != o.Book.Key {
			return false, invalidf("merge of book %s into book %s", o.Book.Key, e.Book.Key)
		}
		return e.Book.Merge(&o.Book), nil
	case KindDevice:
		if e.Device.ID != o.Device.ID {
			return false, invalidf("merge of device %s into device %s", o.Device.ID, e.Device.ID)
		}
		return e.Device.Merge(&o.Device), nil
	case KindKosyncUser:
		if e.KosyncUser.Name != o.KosyncUser.Name {
			return false, invalidf("merge of kosync user %q into kosync user %q", o.KosyncUser.Name, e.KosyncUser.Name)
		}
		return e.KosyncUser.Merge(&o.KosyncUser), nil
	case KindKosyncProgress:
		p, q := &e.KosyncProgress, &o.KosyncProgress
		if p.User != q.User || p.Document != q.Document {
			return false, invalidf("merge of kosync progress %q/%q into %q/%q", q.User, q.Document, p.User, p.Document)
		}
		return p.Merge(q), nil
	case KindKosyncLink:
		l, m := &e.KosyncLink, &o.KosyncLink
		if l.Document != m.Document {
			return false, invalidf("merge of kosync link %q into %q", m.Document, l.Document)
		}
		return l.Merge(m), nil
	case KindMember:
		m, n := &e.Member, &o.Member
		if m.Library != n.Library || m.ID != n.ID {
			return false, invalidf("merge of member %x/%s into member %x/%s", n.Library, n.ID, m.Library, m.ID)
		}
		return m.Merge(n), nil
	}
	return false, invalidf("merge of unknown %s", e.Kind)
}

// Clone returns a copy of e that shares no memory with it.
func (e *Entry) Clone() Entry {
	c := *e
	c.Book = e.Book.Clone()
	c.Member = e.Member.Clone()
	return c
}

// MaxTimestamp returns the latest timestamp in the record: what a clock must
// observe after merging it, and what the store keeps as its clock's
// high-water mark.
func (e *Entry) MaxTimestamp() Timestamp {
	switch e.Kind {
	case KindBook:
		return e.Book.maxTimestamp()
	case KindDevice:
		return e.Device.Name.At
	case KindKosyncUser:
		return e.KosyncUser.Auth.At
	case KindKosyncProgress:
		return e.KosyncProgress.At
	case KindKosyncLink:
		return e.KosyncLink.At
	case KindMember:
		return e.Member.maxTimestamp()
	}
	return Timestamp{}
}

// Validate checks that the record could have been produced by correct
// devices. Every decoded record is validated; a record that fails is refused
// whole.
func (e *Entry) Validate() error {
	switch e.Kind {
	case KindBook:
		return e.Book.validate()
	case KindDevice:
		return e.Device.validate()
	case KindKosyncUser:
		return e.KosyncUser.validate()
	case KindKosyncProgress:
		return e.KosyncProgress.validate()
	case KindKosyncLink:
		return e.KosyncLink.validate()
	case KindMember:
		return e.Member.validate()
	}
	return invalidf("unknown record kind %d", uint8(e.Kind))
}
