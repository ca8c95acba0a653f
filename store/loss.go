package store

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// Loss is what the store found missing when it opened: changes it had
// acknowledged that the database did not bring back (a WAL damaged or cut
// short). The store then starts a new epoch: the database is an older state,
// in which a record changed since holds an older state at an older sequence
// number, below where a peer's cursor into the lost changes may already be,
// though that peer never had this state; a cursor (and a mark) never holds
// across epochs, so every peer pulls everything again. The sequence still
// continues after the last acknowledged change, so that no number names two
// states even within the journal. The store also forgets its own cursors
// into its peers (so that they send everything again, healing what they
// hold), and keeps the report until a later loss replaces it.
type Loss struct {
	FoundAt time.Time `json:"foundAt"`
	// Epoch is the epoch the store started when it found the loss.
	Epoch uint64 `json:"epoch"`
	// Acked is the last sequence number the store acknowledged; Kept is the
	// last one the database held. Changes Kept+1..Acked are lost.
	Acked uint64 `json:"acked"`
	Kept  uint64 `json:"kept"`
	// Records are the records those changes were to, each once, at its
	// last lost change, in sequence order, as far as the journal still
	// names them (at most maxLossRecords).
	Records []LostRecord `json:"records"`
	// Unnamed counts the lost changes whose record the journal no longer
	// names.
	Unnamed uint64 `json:"unnamed"`
}

// LostRecord is a record whose acknowledged change was lost.
type LostRecord struct {
	Seq uint64 `json:"seq"`
	ID  []byte `json:"id"` // as made by Entry.AppendID, possibly cut short
}

const maxLossRecords = 1000

var (
	keyFloor = []byte("mfloor") // the sequence continues after it (uint64)
	keyLoss  = []byte("mloss")  // the last Loss, JSON
)

// Changes returns the number of acknowledged changes lost.
func (l Loss) Changes() uint64 { return l.Acked - l.Kept }

// Kind returns the kind of the record.
func (r LostRecord) Kind() crdt.Kind {
	if len(r.ID) == 0 {
		return 0
	}
	return crdt.Kind(r.ID[0])
}

// Name renders the record for a person: a book's key, a device's id, a
// kosync account or document.
func (r LostRecord) Name() string {
	if len(r.ID) == 0 {
		return "(unknown)"
	}
	rest := r.ID[1:]
	switch r.Kind() {
	case crdt.KindBook:
		if k, err := crdt.BookKeyFromBinary(rest); err == nil {
			return "book " + k.String()
		}
	case crdt.KindDevice:
		return "device " + hex.EncodeToString(rest)
	case crdt.KindKosyncUser:
		return fmt.Sprintf("kosync user %q", rest)
	case crdt.KindKosyncProgress:
		return fmt.Sprintf("kosync progress %q", strings.ReplaceAll(string(rest), "\x00", " "))
	case crdt.KindMember:
		if len(rest) == 16+8 {
			return fmt.Sprintf("member %x of library %x", rest[16:], rest[:16])
		}
	}
	return fmt.Sprintf("%v %x", r.Kind(), rest)
}

// Loss returns the last loss the store found at an open, if any.
func (s *Store) Loss() (Loss, bool) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.loss == nil {
		return Loss{}, false
	}
	l := *s.loss
	l.Records = append([]LostRecord(nil), l.Records...)
	return l, true
}

// checkAcked compares what the database holds with the acknowledged journal
// (acked.go), records a loss if it came back short, and opens the journal
// for the writes to come. It runs once, in Open, after loadMeta.
func (s *Store) checkAcked(db *badger.DB) error {
	var floor uint64
	err := db.View(func(txn *badger.Txn) error {
		v, err := getValue(txn, keyFloor)
		if err != nil || v == nil {
			return err
		}
		floor, _ = parseU64(v)
		if v, err = getValue(txn, keyLoss); err != nil || v == nil {
			return err
		}
		var l Loss
		if json.Unmarshal(v, &l) == nil {
			s.loss = &l
		}
		return nil
	})
	if err != nil {
		return ioErr(s.dir, "read the loss record", err)
	}
	s.lastSeq = max(s.lastSeq, floor)
	ents, _, err := readAckJournal(s.dir, s.epoch, s.lastSeq)
	if err != nil {
		return ioErr(s.dir, "read "+ackedFile, err)
	}
	if n := len(ents); n > 0 && ents[n-1].seq > s.lastSeq {
		l := lossOf(ents, s.lastSeq, time.Now().UTC())
		if l.Epoch, err = newEpoch(s.epoch); err != nil {
			return fmt.Errorf("open store %s: %w", s.dir, err)
		}
		if err := s.recordLoss(db, l); err != nil {
			return err
		}
		s.logLoss(l)
		s.loss, s.lastSeq, s.epoch = &l, l.Acked, l.Epoch
	}
	if s.journal, err = openAckJournal(s.dir, s.epoch); err != nil {
		return ioErr(s.dir, "open "+ackedFile, err)
	}
	return nil
}

// lossOf works out the loss from the journal's entries after the last
// sequence number the database kept, in sequence order.
func lossOf(ents []ackEntry, kept uint64, now time.Time) Loss {
	l := Loss{FoundAt: now, Acked: ents[len(ents)-1].seq, Kept: kept}
	seen := map[string]bool{}
	named := uint64(0)
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		named++
		if !seen[string(e.id)] {
			seen[string(e.id)] = true
			l.Records = append(l.Records, LostRecord{Seq: e.seq, ID: e.id})
		}
	}
	slices.Reverse(l.Records)
	l.Unnamed = l.Changes() - named
	if n := len(l.Records); n > maxLossRecords {
		l.Records = l.Records[n-maxLossRecords:]
	}
	return l
}

// recordLoss keeps the loss and what follows from it, durably, before the
// store serves anything: the new epoch, the sequence continuing after
// Acked, and every cursor into a peer forgotten so that peers send
// everything again.
func (s *Store) recordLoss(db *badger.DB, l Loss) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	err = db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pCursor}, PrefetchValues: false})
		var cursors [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			cursors = append(cursors, it.Item().KeyCopy(nil))
		}
		it.Close()
		for _, k := range cursors {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		if err := txn.Set(keyFloor, u64(l.Acked)); err != nil {
			return err
		}
		if err := txn.Set(keyEpoch, u64(l.Epoch)); err != nil {
			return err
		}
		return txn.Set(keyLoss, data)
	})
	if err == nil {
		err = s.syncWAL(db)
	}
	if err != nil {
		return ioErr(s.dir, "record the loss of acknowledged changes", err)
	}
	return nil
}

// logLoss tells, at error level, which acknowledged changes were lost.
func (s *Store) logLoss(l Loss) {
	const show = 20
	var names []string
	for i := len(l.Records) - 1; i >= 0 && len(names) < show; i-- {
		names = append(names, l.Records[i].Name())
	}
	more := len(l.Records) - len(names)
	s.log.Error("store: acknowledged changes were lost (a damaged or cut write-ahead log); asking every peer to send everything again",
		"dir", s.dir, "new_epoch", l.Epoch, "changes", l.Changes(), "seq_from", l.Kept+1, "seq_to", l.Acked,
		"records", len(l.Records), "newest", strings.Join(names, ", "), "not_shown", more, "unnamed_changes", l.Unnamed)
}
