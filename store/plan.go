package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// plan is one batch worked out against the state the writer's transaction
// sees (the database plus the writes of the batches before it in the same
// group): the writes it makes and the result it returns. Nothing touches
// the transaction until the whole batch has been worked out, so a batch that
// fails writes nothing.
type plan struct {
	s      *Store
	txn    *badger.Txn
	recs   map[string]*rec
	slab   []rec  // where load takes new recs from, a batch's worth at once
	order  []*rec // changed records, in the order they first changed
	seq    uint64 // last sequence number taken
	hw     crdt.Timestamp
	writes []write
	result Result
	added  map[crdt.Kind]uint64 // records created, by kind
	// deletedDelta is how many more books are deleted after the batch.
	deletedDelta int64
}

// rec is one record as the batch sees it.
type rec struct {
	id []byte
	// prev is the record as stored before this batch, at index entry seq;
	// nil if it was not stored.
	prev    *crdt.Entry
	seq     uint64
	live    bool // cur holds the record (stored, or created by this batch)
	changed bool
	cur     crdt.Entry
	residue bool // cur is the residue of a collected book (purge.go)
}

type write struct {
	key, val []byte
	del      bool
	ttl      time.Duration
}

func (g *group) plan(b *Batch) (*plan, error) {
	s := g.s
	p := &plan{s: s, txn: g.txn, recs: make(map[string]*rec, len(b.Entries)), seq: g.seq, hw: g.hw}
	if b.purge != nil {
		return p, p.purge(b.purge)
	}
	if b.forget != 0 {
		p.writes = append(p.writes, write{key: cursorKey(b.forget), del: true})
		return p, nil
	}
	if b.delivered != nil {
		p.markDelivered(b.delivered)
		return p, nil
	}
	if b.skipPast != 0 {
		return p, p.skip(b.skipPast)
	}
	if b.summaries != nil {
		p.writes = append(p.writes, write{key: keySummaries, val: b.summaries})
		return p, nil
	}
	if b.known != nil {
		p.writes = append(p.writes, write{key: keyKnown, val: b.known})
		return p, nil
	}
	p.slab = make([]rec, 0, max(1, len(b.Entries)))
	if err := s.checkExtras(b); err != nil {
		return nil, err
	}
	if b.Dedup != "" {
		v, err := getValue(p.txn, dedupKey(b.Dedup))
		if err != nil {
			return nil, ioErr(s.dir, "read a dedup key", err)
		}
		switch {
		// A key recorded without a digest (by an older version) matches
		// any request: it can only be taken for a retry.
		case v != nil && len(v) > 0 && !bytes.Equal(v, b.DedupSum):
			return nil, fmt.Errorf("apply to store %s: request %q: %w", s.dir, b.Dedup, ErrDedupMismatch)
		case v != nil:
			return nil, fmt.Errorf("apply to store %s: request %q: %w", s.dir, b.Dedup, ErrDuplicate)
		}
	}
	for i := range b.Entries {
		if err := p.merge(&b.Entries[i]); err != nil {
			return nil, err
		}
	}
	if b.Build != nil {
		more, err := p.build(b.Build)
		if err != nil {
			return nil, fmt.Errorf("apply to store %s: build: %w", s.dir, err)
		}
		for i := range more {
			if err := more[i].Validate(); err != nil {
				return nil, fmt.Errorf("apply to store %s: built entry %d: %w", s.dir, i, err)
			}
		}
		for i := range more {
			if err := p.merge(&more[i]); err != nil {
				return nil, err
			}
		}
	}
	if err := p.records(); err != nil {
		return nil, err
	}
	if err := p.extras(b, g.hw); err != nil {
		return nil, err
	}
	return p, nil
}

// build runs a batch's Build, turning a panic into an error: the batch
// fails, writing nothing, and the writer goes on.
func (p *plan) build(fn func(func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error)) (more []crdt.Entry, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return fn(p.get)
}

// checkExtras validates what a batch carries besides entries.
func (s *Store) checkExtras(b *Batch) error {
	switch {
	case len(b.Dedup) > maxDedupKey:
		return fmt.Errorf("apply to store %s: dedup key of %d bytes, longer than %d: %w", s.dir, len(b.Dedup), maxDedupKey, crdt.ErrInvalid)
	case len(b.DedupSum) > maxDedupSum:
		return fmt.Errorf("apply to store %s: dedup digest of %d bytes, longer than %d: %w", s.dir, len(b.DedupSum), maxDedupSum, crdt.ErrInvalid)
	case b.Cursor != nil && b.Cursor.Device == 0:
		return fmt.Errorf("apply to store %s: cursor without a device: %w", s.dir, crdt.ErrInvalid)
	case b.Daily != nil:
		if err := checkDay(b.Daily.Day); err != nil {
			return fmt.Errorf("apply to store %s: %w", s.dir, err)
		}
	}
	return nil
}

func (p *plan) merge(e *crdt.Entry) error {
	r, err := p.load(e.AppendID(nil))
	if err != nil {
		return err
	}
	if t := e.MaxTimestamp(); t.After(p.hw) {
		p.hw = t
	}
	if !r.live {
		r.cur, r.live = e.Clone(), true
		p.mark(r)
		return nil
	}
	if r.residue && !r.changed && p.absorbed(r, e) {
		return nil
	}
	changed, err := r.cur.Merge(e)
	if err != nil {
		return fmt.Errorf("apply to store %s: %w", p.s.dir, err)
	}
	if changed {
		p.mark(r)
	}
	return nil
}

func (p *plan) mark(r *rec) {
	if !r.changed {
		r.changed = true
		p.order = append(p.order, r)
	}
}

// get is what Build reads records with.
func (p *plan) get(id []byte) (crdt.Entry, bool, error) {
	r, err := p.load(bytes.Clone(id))
	if err != nil || !r.live {
		return crdt.Entry{}, false, err
	}
	return r.cur.Clone(), true, nil
}

// load returns the batch's view of a record, reading it from the
// transaction the first time.
func (p *plan) load(id []byte) (*rec, error) {
	if r, ok := p.recs[string(id)]; ok {
		return r, nil
	}
	if len(p.slab) == cap(p.slab) {
		// A new slab: the recs handed out keep the old one alive.
		p.slab = make([]rec, 0, cap(p.slab))
	}
	p.slab = append(p.slab, rec{id: id})
	r := &p.slab[len(p.slab)-1]
	e, seq, found, err := p.s.readRecord(p.txn, id)
	if err != nil {
		return nil, err
	}
	if found {
		prev := e.Clone()
		r.live, r.seq, r.cur, r.prev = true, seq, e, &prev
	} else if err := p.loadResidue(r); err != nil {
		return nil, err
	}
	p.recs[string(id)] = r
	return r, nil
}

// readRecord reads the record id and its sequence number.
func (s *Store) readRecord(txn *badger.Txn, id []byte) (crdt.Entry, uint64, bool, error) {
	rk := recordKey(id)
	v, err := getValue(txn, rk)
	if err != nil || v == nil {
		if err != nil {
			err = ioErr(s.dir, "read a record", err)
		}
		return crdt.Entry{}, 0, false, err
	}
	seq, ok := parseU64(v)
	if !ok {
		return crdt.Entry{}, 0, false, corruptf(s.dir, "malformed sequence number under key %s", keyName(rk))
	}
	sk := seqKey(seq)
	item, err := txn.Get(sk)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return crdt.Entry{}, 0, false, corruptf(s.dir, "record %s points to index entry %d, which is missing", keyName(rk), seq)
	}
	if err != nil {
		return crdt.Entry{}, 0, false, ioErr(s.dir, "read a record", err)
	}
	var e crdt.Entry
	if err := item.Value(func(v []byte) (err error) { e, err = crdt.Decode(v); return err }); err != nil {
		return crdt.Entry{}, 0, false, corruptf(s.dir, "record under key %s does not decode: %v", keyName(sk), err)
	}
	if !bytes.Equal(e.AppendID(nil), id) {
		return crdt.Entry{}, 0, false, corruptf(s.dir, "index entry %s holds another record than %s", keyName(sk), keyName(rk))
	}
	return e, seq, true, nil
}

// records gives every changed record the next sequence number and writes
// it, removing the index entry it supersedes.
func (p *plan) records() error {
	// Sized once, and no larger: a batch of a sync carries hundreds of
	// records, most of them new, which write 5 keys where a changed one
	// writes up to 9.
	// The deleted count, a count for each of (rarely) two kinds created,
	// and the four extras.
	n := 7
	for _, r := range p.order {
		n += r.maxWrites()
	}
	p.writes = slices.Grow(p.writes, n)
	p.result.Changed = make([]Change, 0, len(p.order))
	for _, r := range p.order {
		enc, err := r.cur.Encode()
		if err != nil {
			return fmt.Errorf("apply to store %s: %w", p.s.dir, err)
		}
		p.seq++
		if r.residue {
			p.writes = append(p.writes, write{key: residueKey(r.id), del: true})
		}
		if r.prev != nil {
			p.writes = append(p.writes, write{key: seqKey(r.seq), del: true})
		} else {
			if p.added == nil {
				p.added = make(map[crdt.Kind]uint64)
			}
			p.added[r.cur.Kind]++
		}
		p.writes = append(p.writes,
			write{key: seqKey(p.seq), val: enc},
			write{key: recordKey(r.id), val: u64(p.seq)})
		p.index(r)
		p.result.Changed = append(p.result.Changed, Change{Seq: p.seq, Prev: r.prev, Entry: &r.cur})
	}
	if p.deletedDelta != 0 {
		v, err := getValue(p.txn, keyDeletedBooks)
		if err != nil {
			return ioErr(p.s.dir, "read the deleted book count", err)
		}
		count, ok := parseU64(v)
		if v != nil && !ok || int64(count)+p.deletedDelta < 0 {
			return corruptf(p.s.dir, "malformed deleted book count under key %s", keyName(keyDeletedBooks))
		}
		p.writes = append(p.writes, write{key: keyDeletedBooks, val: u64(uint64(int64(count) + p.deletedDelta))})
	}
	for kind, n := range p.added {
		k := countKey(kind)
		v, err := getValue(p.txn, k)
		if err != nil {
			return ioErr(p.s.dir, "read a record count", err)
		}
		count, ok := parseU64(v)
		if v != nil && !ok {
			return corruptf(p.s.dir, "malformed record count under key %s", keyName(k))
		}
		p.writes = append(p.writes, write{key: k, val: u64(count + n)})
	}
	return nil
}

// extras writes the cursor, daily statistic, dedup key and clock
// high-water mark.
func (p *plan) extras(b *Batch, hw crdt.Timestamp) error {
	s := p.s
	if c := b.Cursor; c != nil {
		k := cursorKey(c.Device)
		v, err := getValue(p.txn, k)
		if err != nil {
			return ioErr(s.dir, "read a cursor", err)
		}
		old, ok := parseCursor(k, v)
		if v != nil && !ok {
			return corruptf(s.dir, "malformed cursor under key %s", keyName(k))
		}
		if v == nil || old.Epoch != c.Epoch || old.Seq < c.Seq {
			p.writes = append(p.writes, write{key: k, val: encodeCursor(*c)})
		}
	}
	if d := b.Daily; d != nil && d.Ms > 0 {
		k := dailyKey(d.Day)
		v, err := getValue(p.txn, k)
		if err != nil {
			return ioErr(s.dir, "read a daily statistic", err)
		}
		cur, ok := parseU64(v)
		if v != nil && !ok {
			return corruptf(s.dir, "malformed daily statistic under key %s", keyName(k))
		}
		sum := cur + d.Ms
		if sum < cur {
			sum = math.MaxUint64
		}
		p.writes = append(p.writes, write{key: k, val: u64(sum)})
	}
	if b.Dedup != "" {
		p.writes = append(p.writes, write{key: dedupKey(b.Dedup), val: append([]byte{}, b.DedupSum...), ttl: s.opt.DedupTTL})
	}
	if p.hw.After(hw) {
		p.writes = append(p.writes, write{key: keyHW, val: encodeTimestamp(p.hw)})
	}
	return nil
}

func setAll(txn *badger.Txn, ws []write) error {
	for _, w := range ws {
		var err error
		switch {
		case w.del:
			err = txn.Delete(w.key)
		case w.ttl > 0:
			err = txn.SetEntry(badger.NewEntry(w.key, w.val).WithTTL(w.ttl))
		default:
			err = txn.Set(w.key, w.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
