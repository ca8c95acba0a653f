package crdt_test

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/danyue/danyue/crdt"
)

// The model check of tombstone collection: whole histories of a library
// whose devices write, delete, go offline for long, are forgotten and
// rejoin, are restored from an old copy of their store, pull from each
// other in arbitrary orders and partial prefixes (the real protocol: per
// device change sequence, cursors, summaries gossiped with every pull), and
// collect whenever the rule allows. Each device also keeps a shadow: every
// record it ever received or wrote, merged, never collected: what it would
// hold without collection. After every step, every device must show each
// book exactly as its shadow does (visible or not; if visible, equal in
// every field): collection never resurrects a book and never
// loses a delete. At the end every device comes back, every member syncs
// with every other until nothing changes, and then the members must hold
// equal books, show what the library as a whole knows, and have collected
// every deleted book (the store shrank).

// rule is the collection rule a history runs with: the real one, or a
// deliberately wrong one the model check must catch.
type rule int

const (
	ruleStable       rule = iota // crdt.Stable, residues, crdt.Absorbs
	ruleTimer                    // wrong: collect a tombstone an hour old, acknowledged or not
	ruleIgnoreMember             // wrong: the lowest other member's cursor is left out
	ruleNoResidue                // wrong: nothing is kept of a collected book
	ruleAbsorbAll                // wrong: a residue drops every copy that is not visible, stale or not
	ruleTrimResidue              // wrong: a residue keeps only key, tombstone and read time
)

func (r rule) String() string {
	return [...]string{"stable", "timer", "ignore-member", "no-residue", "absorb-all", "trim-residue"}[r]
}

// chooser draws the history's choices: from rapid, or from a seeded
// generator when hunting for a failure of a wrong rule.
type chooser interface {
	intn(label string, n int) int
}

type cState struct {
	id        crdt.DeviceID
	epoch     uint64
	seq       uint64
	clock     *crdt.Clock
	offset    int64
	records   map[crdt.BookKey]*cRecord
	residues  map[crdt.BookKey]crdt.Book
	cursors   map[crdt.DeviceID]crdt.Cursor
	known     crdt.Summaries
	shadow    map[crdt.BookKey]crdt.Book
	hw        crdt.Timestamp // in a backup: the clock's high-water mark
	collected int            // books collected, ever
}

type cRecord struct {
	book crdt.Book
	seq  uint64
}

type cDevice struct {
	cState
	online  bool
	member  bool
	backups []cState
}

type collectSim struct {
	ch      chooser
	rule    rule
	now     uint64
	devices []*cDevice
	keys    []crdt.BookKey
	nextID  crdt.DeviceID
	epochs  uint64
	// collectedBeforeCatchUp counts the books collected during the history
	// proper, so a test can tell that collection was exercised.
	collectedBeforeCatchUp int
	steps                  []string // what happened, for the failure message
}

var collectOffsets = []int64{0, -int64(hour), int64(minute)}

func newCollectSim(ch chooser, r rule) *collectSim {
	s := &collectSim{ch: ch, rule: r, now: t0, nextID: 0x10,
		keys: []crdt.BookKey{keyMD5, keySHA256, crdt.MustParseBookKey("md5:ffffffffffffffffffffffffffffffff")}}
	n := 2 + ch.intn("devices", 3)
	for range n {
		s.join()
	}
	return s
}

// join adds a new device to the library, online, with an empty store.
func (s *collectSim) join() *cDevice {
	id := s.nextID
	s.nextID++
	d := &cDevice{online: true, member: true}
	d.cState = cState{
		id: id, epoch: s.newEpoch(), clock: crdt.NewClock(id, crdt.Timestamp{}),
		offset:  collectOffsets[s.ch.intn("offset", len(collectOffsets))],
		records: map[crdt.BookKey]*cRecord{}, residues: map[crdt.BookKey]crdt.Book{},
		cursors: map[crdt.DeviceID]crdt.Cursor{}, known: crdt.Summaries{}, shadow: map[crdt.BookKey]crdt.Book{},
	}
	s.devices = append(s.devices, d)
	s.logf("join %s", id)
	return d
}

func (s *collectSim) newEpoch() uint64 {
	s.epochs++
	return s.epochs
}

func (s *collectSim) logf(format string, args ...any) {
	s.steps = append(s.steps, fmt.Sprintf(format, args...))
}

// run plays a history of steps and then the final catch-up, returning the
// first broken property.
func (s *collectSim) run(steps int) error {
	actions := []string{"op", "op", "op", "op", "pull", "pull", "sync", "sync", "sync", "collect", "collect", "collect",
		"round", "round", "offline", "online", "tick", "backup", "backup", "restore", "restore", "forget", "rejoin", "join"}
	for range steps {
		a := actions[s.ch.intn("action", len(actions))]
		switch a {
		case "op":
			s.op(s.pick("writer", func(d *cDevice) bool { return true }))
		case "pull":
			s.pullRandom(1 + s.ch.intn("limit", 4))
		case "round":
			// Every online member pulls all of every other, as a library
			// that stays connected for a while does.
			for _, a := range s.devices {
				for _, b := range s.devices {
					if a != b && a.online && b.online && a.member && b.member {
						s.pull(a, b, 0)
					}
				}
			}
		case "sync":
			s.pullRandom(0) // a whole pull each way
			s.pullRandom(0)
		case "collect":
			s.collect(s.pick("collector", func(d *cDevice) bool { return true }), 1+s.ch.intn("limit", 3))
		case "offline", "online":
			d := s.pick(a, func(d *cDevice) bool { return true })
			d.online = a == "online"
			s.logf("%s %s", a, d.id)
		case "tick":
			s.now += []uint64{second, hour, day, 30 * day}[s.ch.intn("advance", 4)]
		case "backup":
			d := s.pick("backup", func(d *cDevice) bool { return true })
			d.backups = append(d.backups, d.snapshot())
			s.logf("backup %s at seq %d", d.id, d.seq)
		case "restore":
			d := s.pick("restore", func(d *cDevice) bool { return len(d.backups) > 0 })
			if d != nil {
				b := d.backups[s.ch.intn("backup", len(d.backups))]
				s.restore(d, b, s.ch.intn("restore kind", 2) == 0)
			}
		case "forget":
			if d := s.pick("forget", func(d *cDevice) bool { return d.member }); d != nil && s.members() > 2 {
				s.forget(d)
			}
		case "rejoin":
			if d := s.pick("rejoin", func(d *cDevice) bool { return !d.member }); d != nil {
				d.member = true
				s.logf("rejoin %s", d.id)
			}
		case "join":
			if len(s.devices) < 6 {
				d := s.join()
				// A device joins with books of its own, possibly ones the
				// library deleted long ago, and a clock possibly behind.
				for range s.ch.intn("own books", 3) {
					s.op(d)
				}
			}
		}
		if err := s.check(); err != nil {
			return err
		}
	}
	return s.catchUp()
}

func (s *collectSim) members() int {
	n := 0
	for _, d := range s.devices {
		if d.member {
			n++
		}
	}
	return n
}

func (s *collectSim) memberIDs() []crdt.DeviceID {
	var ids []crdt.DeviceID
	for _, d := range s.devices {
		if d.member {
			ids = append(ids, d.id)
		}
	}
	return ids
}

// pick draws one of the devices ok accepts, nil if there is none.
func (s *collectSim) pick(label string, ok func(*cDevice) bool) *cDevice {
	var c []*cDevice
	for _, d := range s.devices {
		if ok(d) {
			c = append(c, d)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[s.ch.intn(label, len(c))]
}

// forget removes a member. Every member drops its cursor into the
// forgotten device, so that if it ever comes back all of its store is pulled
// again (and an old copy of a collected book in it is answered).
func (s *collectSim) forget(f *cDevice) {
	f.member = false
	for _, d := range s.devices {
		if d.member {
			delete(d.cursors, f.id)
		}
	}
	s.logf("forget %s", f.id)
}

// copy returns a deep copy of the state, without its clock.
func (c *cState) copy() cState {
	n := *c
	n.records = map[crdt.BookKey]*cRecord{}
	for k, r := range c.records {
		n.records[k] = &cRecord{book: r.book.Clone(), seq: r.seq}
	}
	n.residues = cloneBooks(c.residues)
	n.cursors = maps.Clone(c.cursors)
	n.known = crdt.Summaries{}
	for _, sm := range c.known {
		n.known.Add(sm)
	}
	n.shadow = cloneBooks(c.shadow)
	n.clock = nil
	return n
}

func (d *cDevice) snapshot() cState {
	c := d.copy()
	c.hw = d.clock.Last()
	return c
}

// restore puts back an old copy of the device's store: older records,
// residues, cursors and summaries; the clock resumes from the copy's
// high-water mark. Sequence numbers of one epoch must never name two
// states (the sync protocol rests on it, collection or not), so the store
// either knows it went back, from its acknowledged journal, which a copy of
// the database alone does not roll back (the loss path: the sequence
// continues after the last acknowledged change and the cursors into peers
// are forgotten, so that it pulls everything again), or, for a copy of the
// whole data directory, is treated as a new epoch once a peer finds it
// behind, so that every peer pulls all of it again. The code keeps the
// epoch and gets the same: a puller whose cursor into the store lies past
// what the device can have sent it (its delivered mark for that puller,
// restored with the copy: peer.Node.Delivered) is sent everything again,
// later changes are numbered after that cursor (store.Store.SkipPast),
// and collection trusts no such cursor until its device has pulled again
// (Stability.Distrust).
func (s *collectSim) restore(d *cDevice, b cState, dbOnly bool) {
	seq, epoch, collected := d.seq, d.epoch, d.collected
	// Copies taken before this restore are not restored later: one that
	// is older than this copy, restored after the device synced, brings
	// back records at sequence numbers its peers' cursors passed while
	// those numbers named nothing, and the journal cannot tell (a gap of
	// the loss path, with or without collection, that this model found).
	d.backups = nil
	d.cState = b.copy()
	d.clock = crdt.NewClock(d.id, b.hw)
	d.collected = collected
	s.now += hour
	// The journal speaks of the current epoch only: a copy from an earlier
	// epoch is found out like a copy of the whole directory.
	if dbOnly && b.epoch == epoch {
		d.seq = max(seq, b.seq)
		clear(d.cursors)
		s.logf("restore %s's database (journal kept: sequence continues at %d, cursors forgotten)", d.id, seq)
		return
	}
	d.epoch = s.newEpoch()
	s.logf("restore %s's whole data directory: new epoch", d.id)
}

func cloneBooks(m map[crdt.BookKey]crdt.Book) map[crdt.BookKey]crdt.Book {
	n := make(map[crdt.BookKey]crdt.Book, len(m))
	for k, b := range m {
		n[k] = b.Clone()
	}
	return n
}

func maxStamp(b crdt.Book) crdt.Timestamp {
	e := crdt.BookEntry(b)
	return e.MaxTimestamp()
}

func (s *collectSim) wall(d *cDevice) uint64 { return uint64(int64(s.now) + d.offset) }

// view is what the device holds of a book: its record, or the residue of
// a collected one.
func (d *cDevice) view(k crdt.BookKey) (crdt.Book, bool) {
	if r, ok := d.records[k]; ok {
		return r.book, true
	}
	b, ok := d.residues[k]
	return b, ok
}

// op makes a local write on d, stamped after everything the book holds
// (the daemon's rule), and applies it like the store does.
func (s *collectSim) op(d *cDevice) {
	k := s.keys[s.ch.intn("key", len(s.keys))]
	cur, has := d.view(k)
	at := d.clock.NowAfter(s.wall(d), maxStamp(cur))
	var e crdt.Entry
	var err error
	switch kind := s.ch.intn("op", 4); kind {
	case 0:
		e, err = crdt.SetPosition(k, at, uint64(s.ch.intn("char", 3))*700, 0.5)
	case 1:
		e, err = crdt.Delete(k, at)
	case 2:
		var local *crdt.Book
		if has {
			local = &cur
		}
		e, err = crdt.AddReadTime(k, local, d.id, uint64(1+s.ch.intn("ms", 3))*1000)
	case 3:
		e, err = crdt.SetTitle(k, at, simTitles[s.ch.intn("title", len(simTitles))])
	}
	if err != nil {
		panic(fmt.Sprintf("local write refused: %v", err))
	}
	s.logf("%s writes %s: %+v", d.id, k, e.Book)
	d.apply(&e.Book, s.rule)
}

// apply merges b into the device's store as the store does: into the
// record, or, for a collected book, into its residue (crdt.Absorbs); a
// change takes the next sequence number. The shadow merges it too.
func (d *cState) apply(b *crdt.Book, r rule) {
	old := d.shadow[b.Key]
	sh := old.Clone()
	if sh.Key.IsZero() {
		sh = crdt.Book{Key: b.Key}
	}
	sh.Merge(b)
	d.shadow[b.Key] = sh
	if rec, ok := d.records[b.Key]; ok {
		if rec.book.Merge(b) {
			d.seq++
			rec.seq = d.seq
		}
		return
	}
	nb := b.Clone()
	if res, ok := d.residues[b.Key]; ok {
		if crdt.Absorbs(&res, b) || (r == ruleAbsorbAll && !b.Visible()) ||
			(r == ruleTrimResidue && b.Deleted == res.Deleted && !b.Visible() && slices.Equal(b.ReadTime, res.ReadTime)) {
			return
		}
		nb = res.Clone()
		nb.Merge(b)
		delete(d.residues, b.Key)
	}
	d.seq++
	d.records[b.Key] = &cRecord{book: nb, seq: d.seq}
}

// summary is what the device gossips about itself now.
func (d *cDevice) summary(s *collectSim) crdt.Summary {
	sm := crdt.Summary{Device: d.id, Epoch: d.epoch, Seq: d.seq, At: d.clock.Now(s.wall(d))}
	for _, c := range d.cursors {
		sm.Cursors = append(sm.Cursors, c)
	}
	slices.SortFunc(sm.Cursors, func(a, b crdt.Cursor) int { return cmp.Compare(a.Device, b.Device) })
	return sm
}

func (s *collectSim) pullRandom(limit int) {
	a := s.pick("puller", func(d *cDevice) bool { return d.online })
	b := s.pick("sender", func(d *cDevice) bool { return d.online && d != a })
	if a == nil || b == nil || !a.member || !b.member {
		return // a forgotten device can exchange nothing with the library
	}
	s.pull(a, b, limit)
}

// pull is one sync of a from b, as the peer protocol does it: from a's
// cursor into b (from 0 for another epoch, or if b's store is behind that
// cursor or behind b's last known summary: restored from an old copy),
// b's records in sequence order, at most limit of them (0: all), each
// merged with the cursor; then a takes b's summaries and b's own. A pull
// from 0 (a puller that holds nothing of b's store: new, wiped, or after a
// loss) first gets b's residues, as records: b no longer ships the books
// they stand for, and the puller may hold old copies of them.
func (s *collectSim) pull(a, b *cDevice, limit int) {
	cur := a.cursors[b.id]
	if cur.Epoch != b.epoch || cur.Seq > b.seq || a.known.Behind(b.id, b.epoch, b.seq) {
		cur = crdt.Cursor{Device: b.id, Epoch: b.epoch}
	}
	if cur.Seq == 0 {
		for _, k := range sortedKeys(b.residues) {
			res := b.residues[k]
			res = res.Clone()
			a.apply(&res, s.rule)
		}
	}
	var recs []*cRecord
	for _, r := range b.records {
		if r.seq > cur.Seq {
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(x, y *cRecord) int { return cmp.Compare(x.seq, y.seq) })
	upTo := b.seq
	if limit > 0 && len(recs) > limit {
		recs, upTo = recs[:limit], recs[limit].seq-1
	}
	for _, r := range recs {
		bk := r.book.Clone()
		a.apply(&bk, s.rule)
		a.clock.Observe(maxStamp(bk), s.wall(a))
	}
	cur.Seq = upTo
	a.cursors[b.id] = cur
	for _, sm := range b.known {
		if sm.Device != a.id {
			a.known.Add(sm)
		}
	}
	a.known.Add(b.summary(s))
	s.logf("%s pulls %d records of %s, cursor %d", a.id, len(recs), b.id, upTo)
}

// collect collects at most limit books on d as the rule allows.
func (s *collectSim) collect(d *cDevice, limit int) {
	members := s.memberIDs()
	if s.rule == ruleIgnoreMember {
		members = slices.DeleteFunc(members, func(m crdt.DeviceID) bool {
			return m == firstOther(members, d.id)
		})
	}
	st := crdt.Stable(d.id, d.epoch, d.seq, members, d.known)
	n := 0
	keys := sortedKeys(d.records)
	for _, k := range keys {
		r := d.records[k]
		e := crdt.BookEntry(r.book)
		ok := crdt.Collectible(&e, r.seq, &st)
		if s.rule == ruleTimer {
			ok = !r.book.Visible() && r.book.Deleted.Wall+hour < s.wall(d)
		}
		if !ok || n >= limit {
			continue
		}
		n++
		switch s.rule {
		case ruleNoResidue:
		case ruleTrimResidue:
			d.residues[k] = crdt.Book{Key: k, Deleted: r.book.Deleted, ReadTime: slices.Clone(r.book.ReadTime)}
		default:
			d.residues[k] = r.book.Clone()
		}
		delete(d.records, k)
		d.collected++
		s.logf("%s collects %s (seq %d, up to %d)", d.id, k, r.seq, st.UpTo)
	}
}

func sortedKeys[V any](m map[crdt.BookKey]V) []crdt.BookKey {
	return slices.SortedFunc(maps.Keys(m), func(x, y crdt.BookKey) int { return cmp.Compare(x.String(), y.String()) })
}

func firstOther(members []crdt.DeviceID, self crdt.DeviceID) crdt.DeviceID {
	for _, m := range members {
		if m != self {
			return m
		}
	}
	return 0
}
