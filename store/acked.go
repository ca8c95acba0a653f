package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// The acknowledged journal. badger's WAL is the only place where the newest
// writes live until a memtable is flushed to a table, and badger replays it
// up to the first damaged entry and truncates the rest without a word: a
// store that came back short would look whole. So the store keeps, outside
// badger, DIR/acked: a ring of fixed slots, one per acknowledged change,
// slot seq%ackSlots holding the epoch, the sequence number and the record's
// id, each slot with its own checksum. It is written (pwrite into a file
// preallocated at creation, so a write never allocates) before the WAL is
// synced and synced beside it, so when a batch is acknowledged its journal
// slots are durable too. At open, the largest sequence number in the journal
// is what the store acknowledged: if the database holds less, the changes in
// between are lost, and the journal names their records as long as it has
// not wrapped past them (ackSlots changes; a memtable holds fewer).
// docs/upstream.md has what badger would need to report such a loss itself.
//
// A power cut during a sync may leave slots of a group whose WAL sync did
// not finish, which open then reports as lost although it was never
// acknowledged: the journal errs towards reporting, never towards silence.

const (
	ackedFile = "acked"
	ackSlots  = 16384
	slotSize  = 64
	// slotIDMax is the room for a record id in a slot: a book's id (kind,
	// algorithm and a SHA-256 at most) fits; longer ids (kosync names) are
	// cut, which only shortens how a loss names them.
	slotIDMax = slotSize - 4 - 8 - 8 - 1
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ackEntry is one acknowledged change: the record it changed.
type ackEntry struct {
	seq uint64
	id  []byte // cut to slotIDMax
}

// ackJournal is the open journal file.
type ackJournal struct {
	f     *os.File
	epoch uint64
}

// readAckJournal returns the entries of epoch in DIR/acked after sequence
// number after, in sequence order, and whether the file exists. Slots of
// another epoch (a store made anew) and slots that fail their checksum
// (never written, or torn) are skipped.
func readAckJournal(dir string, epoch, after uint64) ([]ackEntry, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, ackedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var ents []ackEntry
	for off := 0; off+slotSize <= len(data); off += slotSize {
		if e, ok := decodeSlot(data[off:off+slotSize], epoch, after); ok {
			ents = append(ents, e)
		}
	}
	slices.SortFunc(ents, func(a, b ackEntry) int { return cmp.Compare(a.seq, b.seq) })
	return ents, true, nil
}

// openAckJournal opens DIR/acked for writing, creating it (preallocated and
// synced, with its directory) if it is missing or the wrong size.
func openAckJournal(dir string, epoch uint64) (*ackJournal, error) {
	path := filepath.Join(dir, ackedFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() != ackSlots*slotSize {
		err = preallocate(f, ackSlots*slotSize)
		if err == nil {
			err = syncDir(dir)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &ackJournal{f: f, epoch: epoch}, nil
}

// preallocate writes size zero bytes from the start of f and syncs it, so
// that later writes into it change no metadata a datasync would flush.
func preallocate(f *os.File, size int64) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
		return err
	}
	return datasync(f)
}

// write puts the entries (in ascending sequence order) into their slots,
// one pwrite per contiguous run. It does not sync.
func (j *ackJournal) write(ents []ackEntry) error {
	if len(ents) > ackSlots {
		ents = ents[len(ents)-ackSlots:] // the earlier ones would be overwritten
	}
	buf := make([]byte, 0, len(ents)*slotSize)
	start := 0
	for i, e := range ents {
		buf = j.encodeSlot(buf, e)
		last := i == len(ents)-1
		if last || ents[i+1].seq != e.seq+1 || (e.seq+1)%ackSlots == 0 {
			off := int64(ents[start].seq%ackSlots) * slotSize
			if _, err := j.f.WriteAt(buf, off); err != nil {
				return err
			}
			buf, start = buf[:0], i+1
		}
	}
	return nil
}

// sync makes every slot written so far durable.
func (j *ackJournal) sync() error { return datasync(j.f) }

func (j *ackJournal) close() error { return j.f.Close() }

// encodeSlot appends e's slot: crc32c of the rest, epoch, seq, id length,
// id, zero padding.
func (j *ackJournal) encodeSlot(b []byte, e ackEntry) []byte {
	id := e.id
	if len(id) > slotIDMax {
		id = id[:slotIDMax]
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, j.epoch)
	b = binary.BigEndian.AppendUint64(b, e.seq)
	b = append(b, byte(len(id)))
	b = append(b, id...)
	b = append(b, make([]byte, slotSize-(len(b)-at))...)
	binary.BigEndian.PutUint32(b[at:], crc32.Checksum(b[at+4:at+slotSize], crcTable))
	return b
}

// decodeSlot decodes a slot of epoch holding a sequence number after after.
func decodeSlot(s []byte, epoch, after uint64) (ackEntry, bool) {
	seq := binary.BigEndian.Uint64(s[12:])
	if seq <= after || binary.BigEndian.Uint64(s[4:]) != epoch {
		return ackEntry{}, false
	}
	if binary.BigEndian.Uint32(s) != crc32.Checksum(s[4:slotSize], crcTable) {
		return ackEntry{}, false
	}
	n := int(s[20])
	if n > slotIDMax {
		return ackEntry{}, false
	}
	return ackEntry{seq: seq, id: append([]byte(nil), s[21:21+n]...)}, true
}

// journalOf lists the changes of the committed groups a sync covers, in
// sequence order.
func journalOf(groups []*group) []ackEntry {
	var ents []ackEntry
	for _, g := range groups {
		if !g.needsSync() {
			continue
		}
		for _, r := range g.written {
			for _, c := range r.res.Changed {
				ents = append(ents, ackEntry{seq: c.Seq, id: c.Entry.AppendID(nil)})
			}
		}
	}
	return ents
}

// writeJournal writes the journal slots of a sync, if the store keeps a
// journal, and syncs them.
func (s *Store) writeJournal(ents []ackEntry) error {
	if s.journal == nil || len(ents) == 0 {
		return nil
	}
	s.jmu.Lock()
	err := s.journal.write(ents)
	s.jmu.Unlock()
	if err != nil {
		return fmt.Errorf("write %s: %w", ackedFile, err)
	}
	if err := s.journal.sync(); err != nil {
		return fmt.Errorf("sync %s: %w", ackedFile, err)
	}
	return nil
}
