package library

import (
	"context"
	"errors"
	"fmt"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
)

// Who writes the member records: a device adds itself when it starts in a
// library it is not a member of yet (ensureSelf), the inviter of a pairing
// adds the joiner (notePaired) and the joiner adds itself as added by its
// inviter (joined), and a member that completes a hello with a device it
// does not know adds it (noteHello), which is how the devices of a library
// made before members were recorded learn each other. A device is removed
// by another (Forget) or by itself (Leave). What the records say reaches
// the rest of the library through memberChanged: the set, the names, the
// offers parked for a member, connections cut and secrets rotated.

// loadMembers reads the member records of the current library into the
// set the gater and the API read, and this device's name history from the
// member records of every library it was in.
func (l *Library) loadMembers(ctx context.Context) error {
	lib := l.ID()
	list, err := l.store.Members(ctx, lib)
	if err != nil {
		return fmt.Errorf("read the members: %w", err)
	}
	l.members.reset(lib, list)
	return l.store.Scan(ctx, crdt.KindMember, func(e crdt.Entry) error {
		l.names.noteMember(&e.Member)
		return nil
	})
}

// ensureSelf makes this device a member of the current library, added by
// by, if it is not one yet, and records its current name there if the
// library does not have it.
func (l *Library) ensureSelf(ctx context.Context, by crdt.DeviceID) error {
	lib := l.members.library()
	m, _ := l.members.get(l.self)
	if m.IsRemoved() {
		l.log.Warn("this device was removed from the library (forgotten by another device): the other devices refuse its connections; join again with a new invite", "removed_by", m.Removed.Device)
	}
	name := l.Name()
	if !m.Added.IsZero() && m.Name() == name {
		return nil
	}
	_, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
		e := crdt.MemberEntry(crdt.Member{Library: lib, ID: l.self})
		if m.Added.IsZero() {
			add, err := crdt.AddMember(lib, l.self, by, at)
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

// addMember records that device id was added to the current library by
// this device, unless it is known there already.
func (l *Library) addMember(ctx context.Context, id crdt.DeviceID, why string) error {
	if m, ok := l.members.get(id); ok && !m.Added.IsZero() {
		return nil
	}
	lib := l.members.library()
	res, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.AddMember(lib, id, l.self, at) })
	if err != nil {
		return fmt.Errorf("add device %s to the members: %w", id, err)
	}
	if len(res.Changed) > 0 {
		l.log.Info("added a device to the library's members", "device", id, "why", why)
		return nil
	}
	// An earlier addition (another of the device's streams admitting it, a
	// pairing, a synced record) was committed first, so this write changed
	// nothing; that commit may not have reached the set yet, and callers
	// (admitted) decide on the set as soon as this returns.
	return l.takeMember(ctx, lib, id)
}

// takeMember merges the committed member record of device id into the set,
// as the commit that wrote it does (merging is idempotent).
func (l *Library) takeMember(ctx context.Context, lib crdt.LibraryID, id crdt.DeviceID) error {
	key := crdt.MemberEntry(crdt.Member{Library: lib, ID: id})
	e, ok, err := l.store.Get(ctx, key.AppendID(nil))
	if err != nil {
		return fmt.Errorf("read the member record of device %s: %w", id, err)
	}
	if !ok || e.Kind != crdt.KindMember {
		return nil
	}
	var news memberNews
	l.memberChanged(&e.Member, &news)
	l.actOnMembers(news)
	return nil
}

// noteHello adds a device that completed a hello and is not a member yet:
// one of a library made before members were recorded, or one that joined
// by the long invite code, which carries the secret (peer/gater.go).
func (l *Library) noteHello(id crdt.DeviceID) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeWrite)
	defer cancel()
	if err := l.addMember(ctx, id, "it completed a hello"); err != nil {
		l.log.Warn("record a device that said hello", "device", id, "err", err)
	}
}

// admitted reports whether the word of device from counts: a current
// member's does, and so does that of a device the gater let in that is not
// a member yet, which is added as a hello adds it (its summaries or
// residues can arrive before its hello is through).
func (l *Library) admitted(from crdt.DeviceID) bool {
	if l.members.current(from) {
		return true
	}
	if l.members.removed(from) {
		return false
	}
	l.noteHello(from)
	return l.members.current(from)
}

// memberNews is what committed member records tell the library to do,
// once the batch that carried them is taken into account.
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
func (l *Library) memberChanged(m *crdt.Member, news *memberNews) {
	l.names.noteMember(m)
	if l.members.update(*m) {
		news.removed = append(news.removed, m.ID)
	}
	if r, ok := l.parked.settle(m.ID, &l.members); ok {
		news.offers = append(news.offers, parkedOffer{m.ID, r})
	}
}

// actOnMembers does what committed member records told the library to.
func (l *Library) actOnMembers(news memberNews) {
	l.disconnectRemoved(news.removed)
	for _, p := range news.offers {
		l.spawn(func() { l.onRekey(p.from, p.offer) })
	}
}

// disconnectRemoved closes the connections of devices just removed; the
// gater refuses their new ones.
func (l *Library) disconnectRemoved(ids []crdt.DeviceID) {
	if len(ids) == 0 {
		return
	}
	node := l.net.current()
	l.removalsLearned(ids)
	for _, id := range ids {
		m, _ := l.members.get(id)
		if m.Removed.Device == id {
			if id != l.self {
				l.log.Info("a device left the library", "device", id)
				if node != nil {
					node.Disconnect(id)
				}
				l.rotateAfterLeave(id)
			}
			continue
		}
		if id == l.self {
			l.log.Warn("this device was forgotten by another device of the library: the others refuse its connections; join again with a new invite", "removed_by", m.Removed.Device)
			continue
		}
		l.log.Warn("a device was removed from the library; its connections are refused", "device", id)
		if node != nil {
			node.Disconnect(id)
		}
	}
}

// Rename gives this device a new name, in the member set and in its device
// record (which devices of older versions read). History keeps the names it
// was shown with: each write is shown with the name its device had when it
// made it. An invalid name is an error wrapping crdt.ErrInvalid.
func (l *Library) Rename(ctx context.Context, name string) error {
	if _, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.RenameDevice(at, name) }); err != nil {
		return err
	}
	lib := l.ID()
	if _, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.NameMember(lib, at, name) }); err != nil {
		return err
	}
	return l.store.SetDeviceName(ctx, name) // outlives a repair (library.Open)
}

// ErrNoMember is returned for a device that is not in the library.
var ErrNoMember = errors.New("no such device")

// ErrAmbiguous is returned for a name several members have.
var ErrAmbiguous = errors.New("several devices have that name")

// FindMember resolves a device given by id or by name to a record of the
// current library: ErrNoMember if none has that id or name, ErrAmbiguous if
// several have that name.
func (l *Library) FindMember(ref string) (crdt.Member, error) {
	if id, err := crdt.ParseDeviceID(ref); err == nil {
		if m, ok := l.members.get(id); ok {
			return m, nil
		}
	}
	var found []crdt.Member
	for _, m := range l.members.list() {
		if l.MemberName(&m) == ref {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return crdt.Member{}, fmt.Errorf("%w: %q is neither the id nor the name of a device of this library", ErrNoMember, ref)
	case 1:
		return found[0], nil
	}
	ids := make([]string, len(found))
	for i, m := range found {
		ids[i] = m.ID.String()
	}
	return crdt.Member{}, fmt.Errorf("%w: %q names %v; give the id", ErrAmbiguous, ref, ids)
}

// MemberName is a member's newest name: from its member record, else from
// its device record.
func (l *Library) MemberName(m *crdt.Member) string {
	if n := m.Name(); n != "" {
		return n
	}
	return l.names.get(m.ID)
}

// ErrForgetSelf refuses to forget this device itself.
var ErrForgetSelf = errors.New("a device cannot forget itself")

// Forget removes a device, given by id or by name (FindMember), from the
// library, and returns its record. The gater refuses it at once here, and
// on every other member as the removal reaches it; then the library secret
// rotates (rotate.go), so that neither the forgotten device nor a new
// identity made with the secret it kept can reach the library. Forgetting
// this device itself is ErrForgetSelf; forgetting a removed device again
// changes nothing.
func (l *Library) Forget(ctx context.Context, ref string) (crdt.Member, error) {
	m, err := l.FindMember(ref)
	if err != nil {
		return crdt.Member{}, err
	}
	if m.ID == l.self {
		return crdt.Member{}, ErrForgetSelf
	}
	if m.IsRemoved() {
		return m, nil
	}
	lib := l.members.library()
	res, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.RemoveMember(lib, m.ID, at) })
	if err != nil {
		return crdt.Member{}, err
	}
	if err := l.rotate(ctx, fmt.Sprintf("device %s was forgotten", m.ID)); err != nil {
		return crdt.Member{}, fmt.Errorf("the device is forgotten, but the library secret did not change: %w", err)
	}
	for _, c := range res.Changed {
		if c.Entry.Kind == crdt.KindMember && c.Entry.Member.ID == m.ID && c.Entry.Member.Library == lib {
			return c.Entry.Member, nil
		}
	}
	got, _ := l.members.get(m.ID)
	return got, nil
}

// notePaired adds the device a short-code pairing let in, as added by this
// device, the inviter. Its device id is what it said in the pairing's
// associated data, which the PAKE authenticated.
func (l *Library) notePaired(device string) {
	id, err := crdt.ParseDeviceID(device)
	if err != nil {
		l.log.Warn("a paired device gave no device id; it is added when it first syncs", "device", device)
		return
	}
	if m, ok := l.members.get(id); ok && m.IsRemoved() {
		l.log.Warn("a forgotten device paired again: it stays forgotten, and every member refuses its connections; wipe its data dir (a new device) and pair that", "device", id)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeWrite)
	defer cancel()
	if err := l.addMember(ctx, id, "it paired by short code"); err != nil {
		l.log.Warn("record a paired device", "device", id, "err", err)
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
func (l *Library) joined(ctx context.Context, inv peer.Invite) error {
	lib, by := crdt.LibraryID(inv.Library.ID), l.self
	if inv.Peer != "" {
		by = peer.DeviceIDOf(inv.Peer)
	}
	if _, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.AddMember(lib, l.self, by, at) }); err != nil {
		return err
	}
	if by == l.self {
		return nil
	}
	_, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.AddMember(lib, by, l.self, at) })
	return err
}

// Members returns every member record of the library, removed devices
// included, in device id order.
func (l *Library) Members() []crdt.Member { return l.members.list() }

// Member returns the member record of device id, if the library has one.
func (l *Library) Member(id crdt.DeviceID) (crdt.Member, bool) { return l.members.get(id) }
