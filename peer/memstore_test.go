package peer

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
)

// memStore is the in-memory Store the tests and benchmarks sync: a map of
// records merged with crdt, a sequence log in which a record's newer change
// supersedes its older entry, the cursors of other devices, and a Watch
// channel closed at every commit. It is meant to be obviously right, not
// fast.
type memStore struct {
	mu      sync.Mutex
	epoch   uint64
	clock   *crdt.Clock
	recs    map[string]*memRec
	log     []memLogEntry // in sequence order
	last    uint64
	changed chan struct{}
	cursors map[crdt.DeviceID][2]uint64
	// delivered holds the delivered marks (Store.Delivered).
	delivered map[crdt.DeviceID]uint64
	applied   int // ApplyRemote calls
	// residues: what collect left of a book, by record id (collect_test.go).
	residues map[string]crdt.Entry
}

type memRec struct {
	e    crdt.Entry
	data []byte
	seq  uint64
}

type memLogEntry struct {
	seq uint64
	rec *memRec
}

var epochs struct {
	sync.Mutex
	n uint64
}

// newMemStore returns an empty store of device dev in a new epoch.
func newMemStore(dev crdt.DeviceID) *memStore {
	epochs.Lock()
	epochs.n++
	e := epochs.n<<32 | uint64(time.Now().UnixNano()&0xffffffff)
	epochs.Unlock()
	return &memStore{
		epoch:     e,
		clock:     crdt.NewClock(dev, crdt.Timestamp{}),
		recs:      make(map[string]*memRec),
		changed:   make(chan struct{}),
		delivered: make(map[crdt.DeviceID]uint64),
		cursors:   make(map[crdt.DeviceID][2]uint64),
	}
}

func (s *memStore) Epoch() uint64 { return s.epoch }

// copyStore returns a copy of s, as a backup of its data directory would
// be: same epoch, records, sequence numbers and cursors.
func (s *memStore) copyStore() *memStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &memStore{
		epoch: s.epoch, clock: crdt.NewClock(s.clock.Device(), s.clock.Now(uint64(time.Now().UnixMilli()))),
		recs: make(map[string]*memRec, len(s.recs)), last: s.last, delivered: maps.Clone(s.delivered), changed: make(chan struct{}),
		cursors: make(map[crdt.DeviceID][2]uint64, len(s.cursors)), residues: make(map[string]crdt.Entry),
	}
	copied := make(map[*memRec]*memRec, len(s.recs))
	for id, r := range s.recs {
		nr := &memRec{e: r.e.Clone(), data: r.data, seq: r.seq}
		c.recs[id], copied[r] = nr, nr
	}
	for _, le := range s.log {
		nr := copied[le.rec]
		if nr == nil {
			nr = &memRec{} // superseded or collected: never listed
		}
		c.log = append(c.log, memLogEntry{seq: le.seq, rec: nr})
	}
	for d, cur := range s.cursors {
		c.cursors[d] = cur
	}
	for id, e := range s.residues {
		c.residues[id] = e.Clone()
	}
	return c
}

func (s *memStore) Since(ctx context.Context, after uint64, limit int, fn func(uint64, []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].seq > after })
	for n := 0; i < len(s.log) && n < limit; i++ {
		le := s.log[i]
		if le.rec.seq != le.seq {
			continue // superseded by a later change of the same record
		}
		n++
		if err := fn(le.seq, le.rec.data); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) Watch() (uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.changed
}

func (s *memStore) Cursor(ctx context.Context, from crdt.DeviceID) (uint64, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cursors[from]
	return c[0], c[1], nil
}

func (s *memStore) ApplyRemote(ctx context.Context, from crdt.DeviceID, epoch, seq uint64, entries []crdt.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied++
	changed := false
	for i := range entries {
		s.clock.Observe(entries[i].MaxTimestamp(), uint64(time.Now().UnixMilli()))
		c, err := s.merge(entries[i])
		if err != nil {
			return err
		}
		changed = changed || c
	}
	s.cursors[from] = [2]uint64{epoch, seq}
	if changed {
		s.commit()
	}
	return nil
}

// write makes a local change.
func (s *memStore) write(e crdt.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed, err := s.merge(e)
	if changed {
		s.commit()
	}
	return err
}

// merge folds e into its record and gives the record the next sequence
// number if that changed it. s.mu must be held.
func (s *memStore) merge(e crdt.Entry) (bool, error) {
	id := string(e.AppendID(nil))
	rec := s.recs[id]
	if res, ok := s.residues[id]; ok && rec == nil {
		// As the store does: a collected book comes back as its residue
		// merged with what arrived, unless that is an old copy of the
		// delete.
		if crdt.Absorbs(&res.Book, &e.Book) {
			return false, nil
		}
		delete(s.residues, id)
		rec = &memRec{e: res}
		s.recs[id] = rec
		if _, err := rec.e.Merge(&e); err != nil {
			return false, err
		}
	} else if rec == nil {
		rec = &memRec{e: e.Clone()}
		s.recs[id] = rec
	} else if changed, err := rec.e.Merge(&e); err != nil || !changed {
		return false, err
	}
	data, err := rec.e.Encode()
	if err != nil {
		return false, err
	}
	s.last++
	rec.data, rec.seq = data, s.last
	s.log = append(s.log, memLogEntry{seq: s.last, rec: rec})
	return true, nil
}

func (s *memStore) commit() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// snapshot returns every record's encoding by record id.
func (s *memStore) snapshot() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.recs))
	for id, r := range s.recs {
		out[id] = string(r.data)
	}
	return out
}

func (s *memStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

func (s *memStore) book(key crdt.BookKey) (crdt.Book, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := crdt.BookEntry(crdt.Book{Key: key})
	r := s.recs[string(e.AppendID(nil))]
	if r == nil {
		return crdt.Book{}, false
	}
	return r.e.Book.Clone(), true
}

// setPosition is a local position write at the store's clock.
func (s *memStore) setPosition(key crdt.BookKey, char uint64) error {
	s.mu.Lock()
	at := s.clock.Now(uint64(time.Now().UnixMilli()))
	s.mu.Unlock()
	e, err := crdt.SetPosition(key, at, char, 0.5)
	if err != nil {
		return err
	}
	return s.write(e)
}

func (s *memStore) now() crdt.Timestamp {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock.Now(uint64(time.Now().UnixMilli()))
}

func bookKey(i int) crdt.BookKey {
	return crdt.MustParseBookKey(fmt.Sprintf("md5:%032x", i))
}

// fill writes n books with positions and titles.
func (s *memStore) fill(n int) error {
	for i := range n {
		at := s.now()
		e, err := crdt.SetPosition(bookKey(i), at, uint64(i*100), 0.25)
		if err != nil {
			return err
		}
		t, err := crdt.SetTitle(bookKey(i), at, fmt.Sprintf("Book number %d", i))
		if err != nil {
			return err
		}
		if _, err := e.Merge(&t); err != nil {
			return err
		}
		if err := s.write(e); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) SkipPast(ctx context.Context, seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > s.last {
		s.last = seq
		s.commit()
	}
	return nil
}

func (s *memStore) Delivered(dev crdt.DeviceID) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered[dev]
}

func (s *memStore) MarkDelivered(ctx context.Context, seq uint64, devs ...crdt.DeviceID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > s.last {
		return fmt.Errorf("mark delivered up to %d, past the last change %d", seq, s.last)
	}
	for _, d := range devs {
		s.delivered[d] = max(s.delivered[d], seq)
	}
	return nil
}
