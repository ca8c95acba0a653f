package crdt

import (
	"bytes"
	"cmp"
	"slices"
)

// Tombstone collection by causal stability.
//
// A tombstone may go only once every current member holds it: a member that
// missed it would keep showing the book, and nothing would ever send it the
// delete again. Sync here is by per-device change sequence (each device
// numbers its own changes; a peer keeps, per device it pulls from, a cursor:
// that device's store epoch and the last of its sequence numbers merged), so
// "holds it" is said in those terms. A cursor of M into D at sequence s means
// M's state includes D's state as D had it at its sequence s, every record
// in it. So a record of D's store at sequence s is held by M once M's cursor
// into D has passed s.
//
// Members pull from whom they meet, so M may hold D's records without a
// cursor into D (A-B-C relays). Each device therefore gossips a Summary: its
// own epoch and last sequence number, and its cursors, all read at one
// moment. If M's cursor into P has passed the Seq of P's summary, M holds
// all that P held then, including everything P's cursors then covered; so
// coverage flows along summaries (Stable works it out to a fixed point). A
// summary only ever understates what its device holds later, so an old
// summary delays collection and never makes it unsafe.
//
// What a collected book leaves behind, its residue, is its whole record,
// kept outside the records: it is not shipped, counted, indexed or listed,
// and it has no sequence number. Collection must change nothing anyone can
// see, now or after any later write: a book revived by a later position
// shows the title and furthest position it had before the delete (both are
// registers a delete does not reset), a deleted book listed again shows
// its old position, and read-time slots survive delete and revival (docs/design.md).
// Any field dropped from the residue would come back or not depending on
// whether collection ran before the later write arrived, which no other
// replica can reproduce. What collection saves is the book's place in the
// change log and the indexes, and its shipping to every device that pulls.
//
// The residue decides every later arrival of the book (Absorbs): a copy
// equal to it comes from a device that holds exactly what was collected,
// and is dropped; anything else brings the record back as the residue
// merged with it: a later position write revives the book as it would have
// without collection, a later delete or more read time is news to ship, and
// a copy that lacks something the residue holds (a device restored from an
// old copy, a device that joins with its own old copy of the book, a
// device that missed the book's last title) shows that its sender does not
// hold what was collected, so the record must be shipped again, to it. A
// device coming back with older state therefore cannot resurrect the book,
// and learns the delete from whoever it sends its old copy to.
//
// What the rest of the daemon must do for this to hold (the model check in
// collect_sim_test.go, and store's on real stores, do exactly this):
//
//   - Gossip: with every pull, the puller takes the sender's summaries and
//     the sender's own (store Summary), keeping the latest of each device
//     (Summaries.Add); each device collects with Stable over the current
//     members and purges what Collectible allows (store Purge).
//   - Old copies reach someone: a peer pulls from 0 a store that is behind
//     its cursor into it or behind its summary (Summaries.Behind), as it does
//     today when the cursor is past the store's end; and a pull from 0 (a
//     new, wiped or restored puller) first gets the sender's residues (store
//     Residues), since the sender no longer ships those books.
//   - Forgetting a member drops every cursor into it, so that if it ever
//     comes back all of its store is pulled again.
//   - Sequence numbers of one epoch never name two states. A store restored
//     from a copy of its database finds the loss in its acknowledged journal
//     and starts a new epoch; a copy of the whole data directory cannot
//     tell, and reuses numbers its peers think they have. Its peers can: a
//     device's cursor into it past what it can have delivered that device
//     (a mark it keeps per device of how far it ever sent it, restored
//     with the copy) is from the lost state, so that puller gets
//     everything again, later changes are numbered after the cursor, and
//     no such cursor counts for collection (Stability.Distrust) until its
//     device has pulled again.

// Cursor is how far a device has merged another device's changes: that
// device, its store epoch, and the last of its sequence numbers merged.
type Cursor struct {
	Device DeviceID
	Epoch  uint64
	Seq    uint64
}

// Summary is what a device tells the others about how far it has merged
// everyone: its store epoch and last sequence number, and its cursors, read
// at one moment, so that holding this device's store up to Seq means
// holding everything its cursors cover. At is the device's clock reading
// when it made the summary: of two summaries of one device, the later
// replaces the earlier.
type Summary struct {
	Device  DeviceID
	Epoch   uint64
	Seq     uint64
	At      Timestamp
	Cursors []Cursor // sorted by device, at most one per device, none for Device itself
	// Sig and Key, both set or both nil, are a signature of SigningBytes
	// and the public key that makes it (a marshalled libp2p key of the
	// device's identity). What a device says of itself reaches the others
	// relayed by any member; the signature is what lets a receiver tell it
	// from what the relaying member made up. This package only carries
	// them: checking them is the caller's (library/summaries.go).
	Sig, Key []byte
}

// MaxSummarySig and MaxSummaryKey bound a summary's signature and key.
const (
	MaxSummarySig = 128
	MaxSummaryKey = 128
)

// SigningBytes returns what a summary's signature signs: a domain
// separator and the encoding of the summary without Sig and Key.
func (s *Summary) SigningBytes() ([]byte, error) {
	bare := s.Clone()
	bare.Sig, bare.Key = nil, nil
	b, err := EncodeSummaries([]Summary{bare})
	if err != nil {
		return nil, err
	}
	return append([]byte("danyue summary\x00"), b...), nil
}

// MaxSummaryCursors bounds the cursors of one summary: a device pulls from
// at most as many devices as a book has read-time slots.
const MaxSummaryCursors = MaxDevices

// Validate checks that s could have been made by a correct device.
func (s *Summary) Validate() error {
	switch {
	case s.Device == 0:
		return invalidf("summary without a device")
	case s.Epoch == 0:
		return invalidf("summary of %s without a store epoch", s.Device)
	case s.At.IsZero() || s.At.Device != s.Device:
		return invalidf("summary of %s not stamped by its own clock (%s)", s.Device, s.At)
	case len(s.Cursors) > MaxSummaryCursors:
		return invalidf("summary of %s holds %d cursors, more than %d", s.Device, len(s.Cursors), MaxSummaryCursors)
	case (len(s.Sig) == 0) != (len(s.Key) == 0) || len(s.Sig) > MaxSummarySig || len(s.Key) > MaxSummaryKey:
		return invalidf("summary of %s: a signature of %d bytes with a key of %d", s.Device, len(s.Sig), len(s.Key))
	}
	if err := s.At.validate(); err != nil {
		return err
	}
	for i, c := range s.Cursors {
		switch {
		case c.Device == 0 || c.Epoch == 0:
			return invalidf("summary of %s: cursor without a device or epoch", s.Device)
		case c.Device == s.Device:
			return invalidf("summary of %s: a cursor into itself", s.Device)
		case i > 0 && s.Cursors[i-1].Device >= c.Device:
			return invalidf("summary of %s: cursors not sorted by device, or repeated", s.Device)
		}
	}
	return nil
}

// Clone returns a copy of s that shares no memory with it.
func (s *Summary) Clone() Summary {
	c := *s
	c.Cursors = slices.Clone(s.Cursors)
	c.Sig, c.Key = bytes.Clone(s.Sig), bytes.Clone(s.Key)
	return c
}

// CursorInto returns s's cursor into device d, if it has one.
func (s *Summary) CursorInto(d DeviceID) (Cursor, bool) {
	i, ok := slices.BinarySearchFunc(s.Cursors, d, func(c Cursor, d DeviceID) int { return cmp.Compare(c.Device, d) })
	if !ok {
		return Cursor{}, false
	}
	return s.Cursors[i], true
}

// Summaries holds the latest known summary of each device.
type Summaries map[DeviceID]Summary

// Add keeps s if it is later (by At) than the summary held for its device,
// and reports whether it did. It does not validate s; decoded summaries are
// valid.
func (m Summaries) Add(s Summary) bool {
	if old, ok := m[s.Device]; ok && !s.At.After(old.At) {
		return false
	}
	m[s.Device] = s.Clone()
	return true
}

// Behind reports whether device d's store, now at sequence number last of
// epoch, is behind the summary known of it: it was restored from an old
// copy, its sequence numbers up to the summary's no longer name what they
// named, and a peer must pull all of it again (as it does when its cursor
// is past the store's end). A peer that skipped this would keep its cursor
// and never see the old copy's records, and a collected book in them would
// never be answered with its tombstone.
func (m Summaries) Behind(d DeviceID, epoch, last uint64) bool {
	s, ok := m[d]
	return ok && s.Epoch == epoch && s.Seq > last
}

// List returns the summaries sorted by device, for gossip.
func (m Summaries) List() []Summary {
	out := make([]Summary, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Summary) int { return cmp.Compare(a.Device, b.Device) })
	return out
}

// Coverage is how far one member is known to hold a device's store: every
// record of it at a sequence number up to Seq.
type Coverage struct {
	Device DeviceID
	Seq    uint64
}

// Stability is what Stable works out for one device's store.
type Stability struct {
	// UpTo is the sequence number up to which every current member holds
	// the store: a record at or below it may be collected.
	UpTo uint64
	// Members is each current member's coverage, least first (then by
	// device): the first ones are those that hold collection back.
	Members []Coverage
	// Regressed names members whose cursor into this store is past its
	// last sequence number: the store went back in time (restored from an
	// old copy), its sequence numbers no longer name what they named, and
	// nothing is collected until those cursors are behind it again.
	Regressed []DeviceID
	// DeletedBy is the end of the undo window: a tombstone written (its
	// wall time, in ms) after it is kept, however stable, so that the book
	// can still be listed, read and restored. The caller works it out from
	// its clock (now less the window; this package reads no clock); 0
	// sets no bound. The window only ever delays collection, so members
	// that keep deletes for different times stay safe (docs/design.md).
	DeletedBy uint64
}

// Holding returns the members that hold collection back: those whose
// cursor is past the end, if any, or else those whose coverage is UpTo,
// when that is short of last.
func (st *Stability) Holding(last uint64) []DeviceID {
	var out []DeviceID
	if len(st.Regressed) > 0 {
		return slices.Clone(st.Regressed)
	}
	if st.UpTo >= last {
		return nil
	}
	for _, c := range st.Members {
		if c.Seq == st.UpTo {
			out = append(out, c.Device)
		}
	}
	return out
}

// Distrust holds collection back, as Stable does for a cursor past the
// store's end, while a device's cursor into the store of self (epoch) lies
// past what that device can have merged of it, delivered(device): such a
// cursor is from a state of the store that is gone (restored from an old
// copy under the same epoch), and the store's changes since may sit at
// sequence numbers below it that the device does not hold. It holds until
// the device has pulled the store again and its summary says so.
func (st *Stability) Distrust(self DeviceID, epoch uint64, known Summaries, delivered func(DeviceID) uint64) {
	for dev, s := range known {
		if dev == self || slices.Contains(st.Regressed, dev) {
			continue
		}
		if cur, ok := s.CursorInto(self); ok && cur.Epoch == epoch && cur.Seq > delivered(dev) {
			st.Regressed = append(st.Regressed, dev)
		}
	}
	if len(st.Regressed) > 0 {
		slices.Sort(st.Regressed)
		st.UpTo = 0
	}
}

// Stable works out, for the store of device self (epoch, last sequence
// number last), up to where every current member holds it, from the
// summaries known. members lists the current members (self may be among
// them; a forgotten device is simply not listed and holds nothing back). A
// member with no summary, or whose summary covers nothing, holds everything
// back. Summaries of devices that are not members still count as relays:
// what they say about their own state was true when they said it.
func Stable(self DeviceID, epoch, last uint64, members []DeviceID, known Summaries) Stability {
	cov := stableCoverage(self, epoch, last, known)
	st := Stability{UpTo: last}
	seen := map[DeviceID]bool{}
	for _, m := range members {
		if seen[m] {
			continue
		}
		seen[m] = true
		c := Coverage{Device: m, Seq: last}
		if m != self {
			c.Seq = cov[m]
		}
		st.Members = append(st.Members, c)
		st.UpTo = min(st.UpTo, c.Seq)
	}
	for _, c := range st.Members {
		if s, ok := known[c.Device]; ok && c.Device != self {
			if cur, ok := s.CursorInto(self); ok && cur.Epoch == epoch && cur.Seq > last {
				st.Regressed = append(st.Regressed, c.Device)
			}
		}
	}
	if len(st.Regressed) > 0 {
		st.UpTo = 0
	}
	slices.SortFunc(st.Members, func(a, b Coverage) int {
		if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
			return c
		}
		return cmp.Compare(a.Device, b.Device)
	})
	return st
}

// stableCoverage returns, for each device with a summary, the sequence
// number of self's store that its state held when it made that summary:
// directly by its cursor into self, or through a device P whose summary its
// cursor into P had passed. Coverage only grows, bounded by last, so the
// iteration ends; it reaches the fixed point in at most one round per
// device.
func stableCoverage(self DeviceID, epoch, last uint64, known Summaries) map[DeviceID]uint64 {
	cov := make(map[DeviceID]uint64, len(known))
	devices := make([]DeviceID, 0, len(known))
	for d := range known {
		if d != self {
			devices = append(devices, d)
		}
	}
	slices.Sort(devices)
	for changed := true; changed; {
		changed = false
		for _, d := range devices {
			s := known[d]
			best := cov[d]
			for _, c := range s.Cursors {
				var v uint64
				if c.Device == self {
					if c.Epoch == epoch {
						v = min(c.Seq, last)
					}
				} else if p, ok := known[c.Device]; ok && p.Epoch == c.Epoch && c.Seq >= p.Seq {
					v = cov[c.Device]
				}
				best = max(best, v)
			}
			if best > cov[d] {
				cov[d], changed = best, true
			}
		}
	}
	return cov
}

// Collectible reports whether the record e, stored at sequence number seq
// of this device's store, may be collected under st: a deleted book that
// every current member holds, deleted at or before st.DeletedBy. Nothing
// else is ever collected.
func Collectible(e *Entry, seq uint64, st *Stability) bool {
	return MayBeCollected(e) && seq <= st.UpTo && !inWindow(e, st)
}

// HeldByWindow reports whether the record e at sequence number seq is
// kept only by the undo window: every member holds it, and it will be
// collectible once st.DeletedBy reaches its tombstone's wall time. A
// caller that skips scanning until stability moves on must also scan again
// when its clock passes the earliest of those (store.PurgeResult.Held).
func HeldByWindow(e *Entry, seq uint64, st *Stability) bool {
	return MayBeCollected(e) && seq <= st.UpTo && inWindow(e, st)
}

// inWindow reports whether e's tombstone is newer than st.DeletedBy.
func inWindow(e *Entry, st *Stability) bool {
	return st.DeletedBy != 0 && e.Book.Deleted.Wall > st.DeletedBy
}

// MayBeCollected reports whether the record state e is one that collection
// may take out of a store (a deleted book), under some stability. Such a
// state can also come back byte for byte after it was collected: an old
// copy of the book merged with its residue is exactly the record that was
// collected.
func MayBeCollected(e *Entry) bool {
	return e.Kind == KindBook && !e.Book.Deleted.IsZero() && !e.Book.Visible()
}

// Absorbs reports whether residue, the record of a collected book, makes in,
// an arriving record of the same book, a no-op: in equals it, so its sender
// holds exactly what was collected. Otherwise the caller brings the record
// back as residue merged with in (see above).
func Absorbs(residue, in *Book) bool {
	return in.Key == residue.Key && in.Position == residue.Position && in.Furthest == residue.Furthest &&
		in.Deleted == residue.Deleted && in.Title == residue.Title && slices.Equal(in.ReadTime, residue.ReadTime)
}
