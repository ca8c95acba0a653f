// Package crdt holds the replicated data of a danyue library and the rules by
// which two replicas merge. It is pure: no I/O, no goroutines, no clock of its
// own. Time comes in as arguments, and every operation returns its effect as
// data (the change to apply and ship, whether a merge changed anything) for
// the caller to persist, acknowledge and send.
//
// # Records
//
// A library is a set of records (Entry), each a Book, keyed by its BookKey, a
// Device, keyed by its DeviceID, a Member, keyed by (library, device): who is
// in the library, or one of the records of KOReader's progress sync: a
// KosyncUser, keyed by its name, a KosyncProgress, keyed by (user,
// document), and a KosyncLink, keyed by its document. Every field of a
// record is a small conflict-free type with its own merge rule:
//
//	Book.Position  last-writer-wins register of {char, percent}: the larger
//	               timestamp wins; the writer is the timestamp's device
//	Book.Furthest  max register of the position: the larger char wins, then
//	               the larger timestamp
//	Book.ReadTime  grow-only counter: one slot per device, merged by per-slot
//	               max; the total is the sum of the slots, derived, never
//	               stored and never settable
//	Book.Deleted   tombstone: last-writer-wins register of the delete's
//	               timestamp
//	Book.Title     last-writer-wins register
//	Device.Name    last-writer-wins register
//	KosyncUser.Auth
//	               last-writer-wins register of the daemon's salted hash
//	               of the account's key (never the key itself)
//	KosyncProgress last-writer-wins register of {progress, percentage,
//	               device, device id}: the larger timestamp wins, so the
//	               newest write by causal time wins, not the last to arrive
//	Member         the addition of the newest epoch of the library's
//	               secret, the earliest of it; the earliest removal (a
//	               removal wins over every addition); a bounded grow-only
//	               set of names, so the name a device had at any time is
//	               known (member.go)
//
// A register's ties (equal timestamps, which correct devices never produce)
// are broken by content, so that even a broken peer cannot make two replicas
// disagree.
//
// # Visibility
//
// A book is visible when it was never deleted or when its position was written
// strictly after its tombstone. A delete and a write at the same clock reading
// (wall time and counter, whichever devices made them) leave it deleted; a later position write brings it back ("whoever still
// reads it revives it"). Read time and title writes do not revive a book. The
// read-time slots survive delete and revival, so a revived book shows all the
// time ever spent on it.
//
// # Merge
//
// Merge is commutative, associative and idempotent: replicas that have
// received the same records are equal, whatever the order, delay or
// duplication of delivery. It reports whether the local record changed; a
// merge that changes nothing needs no new sequence number and no event, which
// is what keeps relayed changes from echoing forever.
//
// # Local operations
//
// SetPosition, AddReadTime, Delete, SetTitle, RenameDevice, SetKosyncUser and
// SetKosyncProgress validate their input and return a delta: a record holding only what the operation wrote.
// AddReadTime raises the calling device's own slot to its current value plus
// the delta, so re-delivering the change any number of times adds nothing
// (seed 000's doubling bug cannot be expressed: no operation writes a total or
// another device's slot).
//
// # Time
//
// Timestamps are hybrid logical clock readings (wall ms, logical counter,
// device), ordered in that order. A Clock never goes backwards and orders
// every new timestamp after all it has made or observed, as long as what it
// observed was at most MaxAhead (a minute) past its own wall clock; only
// concurrent writes are decided by wall time, then device.
//
// A timestamp further ahead than that comes from a clock that is wrong (a
// phone whose clock reset to 2099, a member stamping the year 9999). Its
// record is still merged, like any other: it is the library's data, and
// refusing it on some devices would make their replicas diverge for good.
// Only the local clock is protected: it follows such a timestamp no further
// than wall + MaxAhead, so the stamps of later local writes stay within
// MaxAhead of real time instead of being pinned at the wrong clock's time on
// every device for good. Observe reports how far ahead the timestamp was, in
// full, for the caller to warn about its writer (the timestamp's device, not
// whoever relayed it).
//
// Causality survives the bound because every local write is stamped against
// the record it writes: Clock.NowAfter (StampAfter) gives it the clock's
// reading or, if the record already holds a stamp at or past that reading,
// the next reading after the record's latest stamp. So a write made after a
// device has seen another write to the same record wins over it whatever the
// wall clocks say, by timestamp and by the clock reading that decides
// visibility: a position write revives a book deleted at a far-future time,
// a delete hides a book read at one. No merge rule relates two records, so
// nothing needs a write to one record to order after another record's.
//
// # Encoding
//
// Entries encode as deterministic CBOR with small integer keys and a format
// version; equal records encode to equal bytes. Decode enforces limits on
// size, nesting, arrays and maps, validates the record, and returns either a
// whole valid record or an error. It accepts only the encoding Encode makes,
// so decoding then encoding gives back the input, and it reports a record of
// a format version it does not know with ErrVersion, not ErrInvalid.
package crdt
