package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
)

// Who is in the library. The members are replicated records
// (crdt.Member, one per device of the library): a device adds itself when
// it starts in a library it is not a member of yet, the inviter of a
// pairing adds the joiner and the joiner adds itself as added by its
// inviter, and a member that completes a hello with a device it does not
// know adds it, which is how the devices of a library made before members
// were recorded learn each other. A removal (danyue forget) wins over every
// addition, and the peer layer's gater refuses a removed device's
// connections on every member that has merged the removal.

// memberSet is the member records of the library this daemon is in. It has
// a lock of its own: the gater reads it on libp2p's goroutines for every
// dial and connection, and must never wait for the daemon's lock.
type memberSet struct {
	mu   sync.RWMutex
	lib  crdt.LibraryID
	byID map[crdt.DeviceID]crdt.Member
	// hinted are devices a member said were removed when it handed over a
	// new secret (rotate.go): refused before the records reach this device.
	hinted map[crdt.DeviceID]bool
}

// reset makes the set that of library lib, holding list.
func (s *memberSet) reset(lib crdt.LibraryID, list []crdt.Member) {
	byID := make(map[crdt.DeviceID]crdt.Member, len(list))
	for _, m := range list {
		byID[m.ID] = m
	}
	s.mu.Lock()
	if lib != s.lib {
		s.hinted = nil // hints are about one library
	} else {
		// A change committed while the list was read may have reached
		// the set already: merge, never go back.
		for id, m := range s.byID {
			if read, ok := byID[id]; ok {
				m.Merge(&read)
			}
			byID[id] = m
		}
	}
	s.lib, s.byID = lib, byID
	s.mu.Unlock()
}

// loadedFor reports whether the set holds the records of library lib.
func (s *memberSet) loadedFor(lib crdt.LibraryID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID != nil && s.lib == lib
}

// hint records devices a member said were removed.
func (s *memberSet) hint(ids []crdt.DeviceID) {
	if len(ids) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hinted == nil {
		s.hinted = make(map[crdt.DeviceID]bool)
	}
	for _, id := range ids {
		s.hinted[id] = true
	}
}

// current reports whether device id is a member that was not removed: the
// only devices a restricted node admits, and the only ones whose new
// secret this device takes.
func (s *memberSet) current(id crdt.DeviceID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.byID[id]
	return ok && !m.Added.IsZero() && !m.IsRemoved() && !s.hinted[id]
}

// removedIDs returns the removed devices.
func (s *memberSet) removedIDs() []crdt.DeviceID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []crdt.DeviceID
	for id, m := range s.byID {
		if m.IsRemoved() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// removed reports whether device id was removed from the library: what
// the gater asks (peer.Config.Removed).
func (s *memberSet) removed(id crdt.DeviceID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.byID[id]
	return (ok && m.IsRemoved()) || s.hinted[id]
}

func (s *memberSet) get(id crdt.DeviceID) (crdt.Member, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.byID[id]
	return m, ok
}

func (s *memberSet) library() crdt.LibraryID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lib
}

// list returns every record of the library, in device id order.
func (s *memberSet) list() []crdt.Member {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]crdt.Member, 0, len(s.byID))
	for _, m := range s.byID {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b crdt.Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// update takes the new state of a record, as committed, and reports
// whether the device was removed by it. Records of other libraries are not
// this set's.
func (s *memberSet) update(m crdt.Member) (removedNow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Library != s.lib || s.byID == nil {
		return false
	}
	// The commits of concurrent batches report their changes in no fixed
	// order, so a record's older state can arrive after its newer one:
	// merge (the records are a CRDT) rather than replace.
	old, ok := s.byID[m.ID]
	merged := m
	if ok {
		merged = old
		merged.Merge(&m)
	}
	s.byID[m.ID] = merged
	return merged.IsRemoved() && !old.IsRemoved()
}

// libraryID is the id of the library the store is in.
func (d *Daemon) libraryID() crdt.LibraryID {
	lib, _ := d.store.Library()
	return crdt.LibraryID(lib.ID)
}

// loadMembers reads the member records of the current library into the
// set the gater and the API read, and this device's name history from the
// member records of every library it was in.
func (d *Daemon) loadMembers(ctx context.Context) error {
	lib := d.libraryID()
	list, err := d.store.Members(ctx, lib)
	if err != nil {
		return fmt.Errorf("read the members: %w", err)
	}
	d.members.reset(lib, list)
	return d.store.Scan(ctx, crdt.KindMember, func(e crdt.Entry) error {
		d.names.noteMember(&e.Member)
		return nil
	})
}

// ensureSelf makes this device a member of the current library, added by
// by, if it is not one yet, and records its current name there if the
// library does not have it.
func (d *Daemon) ensureSelf(ctx context.Context, by crdt.DeviceID) error {
	lib := d.members.library()
	m, _ := d.members.get(d.self)
	if m.IsRemoved() {
		d.log.Warn("this device was removed from the library (forgotten by another device): the other devices refuse its connections; join again with a new invite", "removed_by", m.Removed.Device)
	}
	name := d.selfName()
	if !m.Added.IsZero() && m.Name() == name {
		return nil
	}
	_, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
		e := crdt.MemberEntry(crdt.Member{Library: lib, ID: d.self})
		if m.Added.IsZero() {
			add, err := crdt.AddMember(lib, d.self, by, at)
			if err != nil {
				return crdt.Entry{}, err
			}
			e = add
		}
		if m.Name() != name {
			n, err := crdt.NameMember(lib, at, name)
			if err != nil {
				return crdt.Entry{}, err
			}
			if _, err := e.Merge(&n); err != nil {
				return crdt.Entry{}, err
			}
		}
		return e, nil
	})
	return err
}

// selfName is this device's name.
func (d *Daemon) selfName() string {
	return cmp.Or(d.names.get(d.self), d.cfg.Name)
}

// addMember records that device id was added to the current library by
// this device, unless it is known there already.
func (d *Daemon) addMember(ctx context.Context, id crdt.DeviceID, why string) error {
	if m, ok := d.members.get(id); ok && !m.Added.IsZero() {
		return nil
	}
	lib := d.members.library()
	res, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.AddMember(lib, id, d.self, at) })
	if err != nil {
		return fmt.Errorf("add device %s to the members: %w", id, err)
	}
	if len(res.Changed) > 0 {
		d.log.Info("added a device to the library's members", "device", id, "why", why)
		return nil
	}
	// An earlier addition (another of the device's streams admitting it, a
	// pairing, a synced record) was committed first, so this write changed
	// nothing; that commit may not have reached the set yet, and callers
	// (admitted) decide on the set as soon as this returns.
	return d.takeMember(ctx, lib, id)
}

// takeMember merges the committed member record of device id into the set,
// as the commit that wrote it does (merging is idempotent).
func (d *Daemon) takeMember(ctx context.Context, lib crdt.LibraryID, id crdt.DeviceID) error {
	key := crdt.MemberEntry(crdt.Member{Library: lib, ID: id})
	e, ok, err := d.store.Get(ctx, key.AppendID(nil))
	if err != nil {
		return fmt.Errorf("read the member record of device %s: %w", id, err)
	}
	if !ok || e.Kind != crdt.KindMember {
		return nil
	}
	var news memberNews
	d.memberChanged(&e.Member, &news)
	d.actOnMembers(news)
	return nil
}

// noteHello adds a device that completed a hello and is not a member yet:
// one of a library made before members were recorded, or one that joined
// by the long invite code, which carries the secret (peer/gater.go).
func (d *Daemon) noteHello(id crdt.DeviceID) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeWrite)
	defer cancel()
	if err := d.addMember(ctx, id, "it completed a hello"); err != nil {
		d.log.Warn("record a device that said hello", "device", id, "err", err)
	}
}

// admitted reports whether the word of device from counts: a current
// member's does, and so does that of a device the gater let in that is not
// a member yet, which is added as a hello adds it (its summaries or
// residues can arrive before its hello is through).
func (d *Daemon) admitted(from crdt.DeviceID) bool {
	if d.members.current(from) {
		return true
	}
	if d.members.removed(from) {
		return false
	}
	d.noteHello(from)
	return d.members.current(from)
}

// handshakeWrite bounds a member write made on behalf of the peer layer or
// a pairing.
const handshakeWrite = 10 * time.Second

// memberNews is what committed member records tell the daemon to do once
// its lock is released.
type memberNews struct {
	removed []crdt.DeviceID // devices the records removed
	offers  []parkedOffer   // secrets offered by devices now members
}

type parkedOffer struct {
	from  crdt.DeviceID
	offer peer.Rekey
}

// memberChanged applies a committed member record to the set and the name
// history, and adds to news what follows from it.
func (d *Daemon) memberChanged(m *crdt.Member, news *memberNews) {
	d.names.noteMember(m)
	if d.members.update(*m) {
		news.removed = append(news.removed, m.ID)
	}
	if r, ok := d.parked.settle(m.ID, &d.members); ok {
		news.offers = append(news.offers, parkedOffer{m.ID, r})
	}
}

// actOnMembers does what committed member records told the daemon to.
func (d *Daemon) actOnMembers(news memberNews) {
	d.disconnectRemoved(news.removed)
	for _, p := range news.offers {
		d.spawn(func() { d.onRekey(p.from, p.offer) })
	}
}

// disconnectRemoved closes the connections of devices just removed; the
// gater refuses their new ones.
func (d *Daemon) disconnectRemoved(ids []crdt.DeviceID) {
	if len(ids) == 0 {
		return
	}
	node := d.net.current()
	d.removalsLearned(ids)
	for _, id := range ids {
		m, _ := d.members.get(id)
		if m.Removed.Device == id {
			if id != d.self {
				d.log.Info("a device left the library", "device", id)
				if node != nil {
					node.Disconnect(id)
				}
				d.rotateAfterLeave(id)
			}
			continue
		}
		if id == d.self {
			d.log.Warn("this device was forgotten by another device of the library: the others refuse its connections; join again with a new invite", "removed_by", m.Removed.Device)
			continue
		}
		d.log.Warn("a device was removed from the library; its connections are refused", "device", id)
		if node != nil {
			node.Disconnect(id)
		}
	}
}

// renameSelf gives this device a new name, in the member set and in its
// device record (which devices of older versions read). History keeps the
// names it was shown with: each write is shown with the name its device had
// when it made it.
func (d *Daemon) renameSelf(ctx context.Context, name string) error {
	if _, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.RenameDevice(at, name) }); err != nil {
		return err
	}
	lib := d.libraryID()
	_, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.NameMember(lib, at, name) })
	return err
}

// errNoMember is returned for a device that is not in the library.
var errNoMember = errors.New("no such device")

// errAmbiguous is returned for a name several members have.
var errAmbiguous = errors.New("several devices have that name")

// findMember resolves a device given by id or by name to a record of the
// current library.
func (d *Daemon) findMember(ref string) (crdt.Member, error) {
	if id, err := crdt.ParseDeviceID(ref); err == nil {
		if m, ok := d.members.get(id); ok {
			return m, nil
		}
	}
	var found []crdt.Member
	for _, m := range d.members.list() {
		if d.memberName(&m) == ref {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return crdt.Member{}, fmt.Errorf("%w: %q is neither the id nor the name of a device of this library", errNoMember, ref)
	case 1:
		return found[0], nil
	}
	ids := make([]string, len(found))
	for i, m := range found {
		ids[i] = m.ID.String()
	}
	return crdt.Member{}, fmt.Errorf("%w: %q names %v; give the id", errAmbiguous, ref, ids)
}

// memberName is a member's newest name: from its member record, else from
// its device record.
func (d *Daemon) memberName(m *crdt.Member) string {
	if n := m.Name(); n != "" {
		return n
	}
	return d.names.get(m.ID)
}

// errForgetSelf refuses to forget this device itself.
var errForgetSelf = errors.New("a device cannot forget itself")

// forget removes a device from the library. The gater refuses it at once
// here, and on every other member as the removal reaches it; then the
// library secret rotates (rotate.go), so that neither the forgotten device
// nor a new identity made with the secret it kept can reach the library.
func (d *Daemon) forget(ctx context.Context, ref string) (crdt.Member, error) {
	m, err := d.findMember(ref)
	if err != nil {
		return crdt.Member{}, err
	}
	if m.ID == d.self {
		return crdt.Member{}, errForgetSelf
	}
	if m.IsRemoved() {
		return m, nil
	}
	lib := d.members.library()
	res, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.RemoveMember(lib, m.ID, at) })
	if err != nil {
		return crdt.Member{}, err
	}
	if err := d.rotate(ctx, fmt.Sprintf("device %s was forgotten", m.ID)); err != nil {
		return crdt.Member{}, fmt.Errorf("the device is forgotten, but the library secret did not change: %w", err)
	}
	for _, c := range res.Changed {
		if c.Entry.Kind == crdt.KindMember && c.Entry.Member.ID == m.ID && c.Entry.Member.Library == lib {
			return c.Entry.Member, nil
		}
	}
	got, _ := d.members.get(m.ID)
	return got, nil
}

// notePaired adds the device a short-code pairing let in, as added by this
// device, the inviter. Its device id is what it said in the pairing's
// associated data, which the PAKE authenticated.
func (d *Daemon) notePaired(device string) {
	id, err := crdt.ParseDeviceID(device)
	if err != nil {
		d.log.Warn("a paired device gave no device id; it is added when it first syncs", "device", device)
		return
	}
	if m, ok := d.members.get(id); ok && m.IsRemoved() {
		d.log.Warn("a forgotten device paired again: it stays forgotten, and every member refuses its connections; wipe its data dir (a new device) and pair that", "device", id)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeWrite)
	defer cancel()
	if err := d.addMember(ctx, id, "it paired by short code"); err != nil {
		d.log.Warn("record a paired device", "device", id, "err", err)
	}
}

// joined records, in the library this device is joining, that it was
// added by the inviter whose invite it used (a long code, or the one a
// short-code pairing handed over), or by itself if the invite does not say
// who made it; and that the inviter is a member, as a hello with it would.
// The inviter's own record, which the earliest addition makes win, arrives
// by sync; until then this one lets this device take the inviter's word:
// a new secret the inviter rotates to a moment after the pairing, which
// this device would otherwise refuse as a stranger's.
func (d *Daemon) joined(ctx context.Context, inv peer.Invite) error {
	lib, by := crdt.LibraryID(inv.Library.ID), d.self
	if inv.Peer != "" {
		by = peer.DeviceIDOf(inv.Peer)
	}
	if _, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.AddMember(lib, d.self, by, at) }); err != nil {
		return err
	}
	if by == d.self {
		return nil
	}
	_, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.AddMember(lib, by, d.self, at) })
	return err
}
