package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/testfs"
)

// The model check of crdt/collect_sim_test.go, run on real stores: devices
// write through Batch.Build as the daemon does, pull each other's changes
// (Since from the cursor, applied with the cursor; the residues first on a
// pull from 0), gossip Summary, collect with crdt.Stable and Purge, and get
// their database restored from an old copy (the acknowledged journal stays,
// so the store finds the loss, continues its sequence and forgets its
// cursors). After every step each device shows every book as everything it
// ever received, uncollected, does; at the end all devices agree with the
// library and hold no deleted book.

type simStore struct {
	id     crdt.DeviceID
	dir    string
	s      *Store
	clock  *crdt.Clock
	known  crdt.Summaries
	shadow map[crdt.BookKey]crdt.Book
	backup string // a copy of the database, if taken
	// backupShadow is what the device had received when the copy was taken.
	backupShadow map[crdt.BookKey]crdt.Book
}

// simT is what the simulation fails through: a rapid.T or a testing.T.
type simT interface {
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

type storeSim struct {
	t     simT
	tb    testing.TB
	ctx   context.Context
	wall  uint64
	devs  []*simStore
	books []crdt.BookKey
	stats *simStats
}

// simStats counts, over all histories, what the histories exercised.
type simStats struct{ histories, collected, restores int }

func (m *storeSim) open(d *simStore) {
	s, err := Open(m.ctx, d.dir, Options{IdleClose: -1, Logger: testLogger(m.tb)})
	if err != nil {
		m.t.Fatalf("open %s: %v", d.id, err)
	}
	d.s = s
	d.clock = crdt.NewClock(d.id, s.ClockHighWater())
}

func (m *storeSim) members() []crdt.DeviceID {
	var ids []crdt.DeviceID
	for _, d := range m.devs {
		ids = append(ids, d.id)
	}
	return ids
}

func (d *simStore) receive(b crdt.Book) {
	sh, ok := d.shadow[b.Key]
	if !ok {
		sh = crdt.Book{Key: b.Key}
	}
	sh = sh.Clone()
	sh.Merge(&b)
	d.shadow[b.Key] = sh
}

// write makes a local write as the daemon does: stamped after everything
// the book holds (its residue, if collected), read inside the write.
func (m *storeSim) write(d *simStore, k crdt.BookKey, kind int) {
	m.wall += 1000
	var made crdt.Entry
	_, err := d.s.Apply(m.ctx, Batch{Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(idOf(crdt.BookEntry(crdt.Book{Key: k})))
		if err != nil {
			return nil, err
		}
		at := d.clock.NowAfter(m.wall, cur.MaxTimestamp())
		switch kind {
		case 0:
			made, err = crdt.SetPosition(k, at, 700, 0.5)
		case 1:
			made, err = crdt.Delete(k, at)
		default:
			var local *crdt.Book
			if ok {
				local = &cur.Book
			}
			made, err = crdt.AddReadTime(k, local, d.id, 1000)
		}
		return []crdt.Entry{made}, err
	}})
	if err != nil {
		m.t.Fatalf("write on %s: %v", d.id, err)
	}
	d.receive(made.Book)
}

// pull is one sync of a from b: the residues first on a pull from 0, then
// b's changes since a's cursor, at most limit (0: all), with the cursor;
// then a takes b's summaries.
func (m *storeSim) pull(a, b *simStore, limit int) {
	c, ok, err := a.s.Cursor(m.ctx, b.id)
	if err != nil {
		m.t.Fatal(err)
	}
	after := c.Seq
	if !ok || c.Epoch != b.s.Epoch() || c.Seq > b.s.LastSeq() || a.known.Behind(b.id, b.s.Epoch(), b.s.LastSeq()) {
		after = 0
	}
	var ents []crdt.Entry
	if after == 0 {
		err := b.s.Residues(m.ctx, func(data []byte) error {
			e, err := crdt.Decode(data)
			ents = append(ents, e)
			return err
		})
		if err != nil {
			m.t.Fatal(err)
		}
	}
	upto := after
	err = b.s.Since(m.ctx, after, limit, func(seq uint64, data []byte) error {
		e, err := crdt.Decode(data)
		ents, upto = append(ents, e), seq
		return err
	})
	if err != nil {
		m.t.Fatal(err)
	}
	if limit == 0 || upto == after {
		upto = max(upto, b.s.LastSeq())
	}
	for lo := 0; lo < len(ents) || lo == 0; lo += MaxBatchEntries {
		part := ents[lo:min(lo+MaxBatchEntries, len(ents))]
		batch := Batch{Entries: part}
		if lo+MaxBatchEntries >= len(ents) {
			batch.Cursor = &Cursor{Device: b.id, Epoch: b.s.Epoch(), Seq: upto}
		}
		if _, err := a.s.Apply(m.ctx, batch); err != nil {
			m.t.Fatalf("%s applies %s's changes: %v", a.id, b.id, err)
		}
		for _, e := range part {
			if e.Kind == crdt.KindBook {
				a.receive(e.Book)
			}
			a.clock.Observe(e.MaxTimestamp(), m.wall)
		}
	}
	for _, sm := range b.known {
		if sm.Device != a.id {
			a.known.Add(sm)
		}
	}
	m.wall++
	sm, err := b.s.Summary(m.ctx, b.id, b.clock.Now(m.wall))
	if err != nil {
		m.t.Fatal(err)
	}
	a.known.Add(sm)
}

func (m *storeSim) collect(d *simStore) {
	st := crdt.Stable(d.id, d.s.Epoch(), d.s.LastSeq(), m.members(), d.known)
	for {
		r, err := d.s.Purge(m.ctx, st, 2)
		if err != nil {
			m.t.Fatalf("purge on %s: %v", d.id, err)
		}
		m.stats.collected += r.Records
		if !r.More {
			return
		}
	}
}

// restore puts back the copy of d's database, keeping its acknowledged
// journal, as restoring a backup of the database alone does.
func (m *storeSim) restore(d *simStore) {
	if err := d.s.Close(); err != nil {
		m.t.Fatal(err)
	}
	db := filepath.Join(d.dir, "db")
	if err := os.RemoveAll(db); err != nil {
		m.t.Fatal(err)
	}
	if err := testfs.Copy(d.backup, db); err != nil {
		m.t.Fatal(err)
	}
	m.open(d)
	m.stats.restores++
	d.shadow = cloneShadow(d.backupShadow)
	d.known = crdt.Summaries{}
}

func (m *storeSim) backup(d *simStore) {
	if err := d.s.Close(); err != nil {
		m.t.Fatal(err)
	}
	d.backup = filepath.Join(d.dir+"-backup", "db")
	os.RemoveAll(d.dir + "-backup")
	os.MkdirAll(d.dir+"-backup", 0o700)
	if err := testfs.Copy(filepath.Join(d.dir, "db"), d.backup); err != nil {
		m.t.Fatal(err)
	}
	d.backupShadow = cloneShadow(d.shadow)
	m.open(d)
}

func cloneShadow(sh map[crdt.BookKey]crdt.Book) map[crdt.BookKey]crdt.Book {
	out := make(map[crdt.BookKey]crdt.Book, len(sh))
	for k, b := range sh {
		out[k] = b.Clone()
	}
	return out
}

// view is what d holds of book k: its record, or its residue.
func (m *storeSim) view(d *simStore, k crdt.BookKey) (crdt.Book, bool, bool) {
	e, ok := get(m.tb, d.s, idOf(crdt.BookEntry(crdt.Book{Key: k})))
	if ok {
		return e.Book, true, true
	}
	r, ok, err := d.s.Residue(m.ctx, k)
	if err != nil {
		m.t.Fatal(err)
	}
	return r, ok, false
}

func (m *storeSim) check(when string) {
	for _, d := range m.devs {
		for k, sh := range d.shadow {
			v, has, _ := m.view(d, k)
			vis := has && v.Visible()
			if vis != sh.Visible() || vis && !sameBook(v, sh) {
				m.t.Fatalf("%s: device %s shows %s as %+v (visible %v); everything it received: %+v", when, d.id, k, v, vis, sh)
			}
		}
	}
}

// sameBook reports whether a and b are the same record state.
func sameBook(a, b crdt.Book) bool {
	ea, eb := crdt.BookEntry(a), crdt.BookEntry(b)
	x, errX := ea.Encode()
	y, errY := eb.Encode()
	return errX == nil && errY == nil && string(x) == string(y)
}

func newSimStore(m *storeSim, root string, i int) *simStore {
	d := &simStore{id: crdt.DeviceID(0x10 + i), dir: filepath.Join(root, fmt.Sprint(i)), known: crdt.Summaries{}, shadow: map[crdt.BookKey]crdt.Book{}}
	m.open(d)
	m.devs = append(m.devs, d)
	return d
}

// TestRestoredCopyAfterPurge: a device's database is restored from a copy
// taken before a delete, after every device collected the book. The store
// finds the loss (its journal), pulls everything again from 0, which brings
// the residue, and starts a new epoch, so the other device pulls all of it
// again and meets its old copy: the book stays deleted on both, and once
// both hold that again it is collected again.
func TestRestoredCopyAfterPurge(t *testing.T) {
	m := &storeSim{t: t, tb: t, ctx: context.Background(), wall: 1_767_225_600_000, stats: &simStats{}}
	root := t.TempDir()
	a, b := newSimStore(m, root, 0), newSimStore(m, root, 1)
	defer func() { // stores are reopened on backup and restore
		a.s.Close()
		b.s.Close()
	}()
	round := func() {
		for range 2 {
			m.pull(a, b, 0)
			m.pull(b, a, 0)
		}
	}
	m.write(a, key(1), 0)
	m.write(a, key(2), 0)
	round()
	m.backup(b) // b shows book 1
	m.write(a, key(1), 1)
	round()
	m.collect(a)
	m.collect(b)
	if m.stats.collected != 2 {
		t.Fatalf("collected %d, want book 1 on both devices", m.stats.collected)
	}
	m.restore(b)
	if l, lost := b.s.Loss(); !lost {
		t.Fatal("the restored database was not found short")
	} else {
		t.Logf("restored: %d changes lost, cursors forgotten", l.Changes())
	}
	if v, _, _ := m.view(b, key(1)); !v.Visible() {
		t.Fatal("the old copy should show book 1 before it syncs")
	}
	round()
	m.check("after the restored device synced")
	for _, d := range m.devs {
		if v, has, rec := m.view(d, key(1)); !has || v.Visible() || v.Deleted.IsZero() {
			t.Fatalf("%s: book 1 is %+v (held %v, record %v), want deleted", d.id, v, has, rec)
		}
	}
	m.collect(a)
	m.collect(b)
	for _, d := range m.devs {
		if _, del, _ := d.s.BookCounts(m.ctx); del != 0 {
			t.Fatalf("%s holds %d deleted books after collecting again", d.id, del)
		}
	}
}

func TestPurgeModel(t *testing.T) {
	if testing.Short() {
		t.Skip("opens real stores")
	}
	stats := &simStats{}
	defer func() {
		t.Logf("%d histories: %d books collected, %d databases restored from an old copy", stats.histories, stats.collected, stats.restores)
		if !t.Failed() && (stats.collected == 0 || stats.restores == 0) {
			t.Error("the histories never collected or never restored: the check is too weak")
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		stats.histories++
		root := t.TempDir()
		m := &storeSim{t: rt, tb: t, ctx: context.Background(), wall: 1_767_225_600_000,
			books: []crdt.BookKey{key(1), key(2), key(3)}, stats: stats}
		n := rapid.IntRange(2, 3).Draw(rt, "devices")
		for i := range n {
			d := &simStore{id: crdt.DeviceID(0x10 + i), dir: filepath.Join(root, fmt.Sprint(i)), known: crdt.Summaries{}, shadow: map[crdt.BookKey]crdt.Book{}}
			m.open(d)
			m.devs = append(m.devs, d)
		}
		defer func() {
			for _, d := range m.devs {
				d.s.Close()
			}
		}()
		pick := func(label string) *simStore { return rapid.SampledFrom(m.devs).Draw(rt, label) }
		steps := rapid.IntRange(5, 40).Draw(rt, "steps")
		for range steps {
			switch rapid.SampledFrom([]string{"write", "write", "write", "pull", "pull", "round", "collect", "collect", "backup", "restore"}).Draw(rt, "action") {
			case "write":
				m.write(pick("writer"), rapid.SampledFrom(m.books).Draw(rt, "book"), rapid.IntRange(0, 2).Draw(rt, "kind"))
			case "pull":
				a, b := pick("puller"), pick("sender")
				if a != b {
					m.pull(a, b, rapid.IntRange(0, 2).Draw(rt, "limit"))
				}
			case "round":
				for _, a := range m.devs {
					for _, b := range m.devs {
						if a != b {
							m.pull(a, b, 0)
						}
					}
				}
			case "collect":
				m.collect(pick("collector"))
			case "backup":
				m.backup(pick("backup"))
			case "restore":
				if d := pick("restore"); d.backup != "" {
					m.restore(d)
				}
			}
			m.check("during the history")
		}
		// Catch up: everyone with everyone, collecting, until settled.
		for range 4 {
			for _, a := range m.devs {
				for _, b := range m.devs {
					if a != b {
						m.pull(a, b, 0)
					}
				}
			}
			for _, d := range m.devs {
				m.collect(d)
			}
			m.check("catching up")
		}
		lib := map[crdt.BookKey]crdt.Book{}
		for _, d := range m.devs {
			for k, b := range d.shadow {
				l, ok := lib[k]
				if !ok {
					l = crdt.Book{Key: k}
				}
				l.Merge(&b)
				lib[k] = l
			}
		}
		for _, d := range m.devs {
			if _, del, err := d.s.BookCounts(m.ctx); err != nil || del != 0 {
				rt.Fatalf("after catching up, %s holds %d deleted books (%v)", d.id, del, err)
			}
			for k, l := range lib {
				v, has, _ := m.view(d, k)
				if vis := has && v.Visible(); vis != l.Visible() || vis && !sameBook(v, l) {
					rt.Fatalf("after catching up, %s shows %s as %+v; the library: %+v", d.id, k, v, l)
				}
			}
		}
	})
}

// TestRestoredCopyBelowACursor: a record changed after the copy was taken
// comes back, restored, at the older number it had in the copy, below a
// cursor that a peer took while the record sat at a later number, so the
// peer never had it. The store starts a new epoch when it finds the loss,
// and the peer pulls everything again. (Found by TestPurgeModel.)
func TestRestoredCopyBelowACursor(t *testing.T) {
	m := &storeSim{t: t, tb: t, ctx: context.Background(), wall: 1_767_225_600_000, stats: &simStats{}}
	root := t.TempDir()
	a, b := newSimStore(m, root, 0), newSimStore(m, root, 1)
	defer func() {
		a.s.Close()
		b.s.Close()
	}()
	m.write(a, key(1), 0) // a's seq 1: book 1 at a position
	m.backup(a)
	m.write(a, key(2), 0) // seq 2
	m.write(a, key(1), 2) // book 1 moves to seq 3
	m.pull(b, a, 1)       // b takes seq 2 only: its cursor is 2
	if c, _, _ := b.s.Cursor(m.ctx, a.id); c.Seq != 2 {
		t.Fatalf("b's cursor into a: %+v, want seq 2", c)
	}
	old := a.s.Epoch()
	m.restore(a) // book 1 is back at seq 1, below b's cursor
	m.pull(b, a, 0)
	if v, has, _ := m.view(b, key(1)); !has || !v.Visible() {
		t.Fatalf("b holds book 1 as %+v (%v): the restored store's record below b's cursor never reached it", v, has)
	}
	if a.s.Epoch() == old {
		t.Fatal("the restored store kept its epoch")
	}
}
