package library

import (
	"context"
	"errors"
	"fmt"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
)

// Who writes the member records: the device that makes a library adds
// itself (addSelf, in epoch 0); the inviter of a pairing adds the joiner
// (notePaired), and the inviter of a long code adds the device that
// redeems its ticket (redeem, invites.go), each in the library's epoch of
// the moment and as itself (the addition's stamp is the adder's). Nothing
// else adds anyone: not a hello, a summary or a residue, whatever secret
// the device that sent it holds. A device is removed by another (Forget)
// or by itself (Leave). What the records say reaches the rest of the
// library through memberChanged: the set, the names, the offers parked for
// a member, connections started, cut, and secrets rotated.

// rules reads, from the store, what besides the records decides who is a
// member (memberRules).
func (l *Library) rules() memberRules {
	lib, _ := l.store.Library()
	r := memberRules{self: l.self, epoch: lib.Epoch}
	if roster, ok := l.store.Roster(); ok {
		r.roster = make(map[crdt.DeviceID]bool, len(roster))
		for _, id := range roster {
			r.roster[crdt.DeviceID(id)] = true
		}
	}
	inviter, _ := l.store.Joining()
	r.inviter = crdt.DeviceID(inviter)
	return r
}

// loadMembers reads the member records of the current library into the
// set the gater and the API read, and this device's name history from the
// member records of every library it was in.
func (l *Library) loadMembers(ctx context.Context) error {
	lib := l.ID()
	list, err := l.store.Members(ctx, lib)
	if err != nil {
		return fmt.Errorf("read the members: %w", err)
	}
	l.members.reset(lib, list, l.rules())
	return l.store.Scan(ctx, crdt.KindMember, func(e crdt.Entry) error {
		l.names.noteMember(&e.Member)
		return nil
	})
}

// applyRules takes the store's epoch and roster into the member set, once
// they changed (a rotation, an epoch learned), and acts on what that
// changed.
func (l *Library) applyRules() {
	ch := l.members.setRules(l.rules())
	var news memberNews
	l.noteSetChange(ch, &news)
	l.actOnMembers(news)
}

// addSelf records that this device made the library it is in: the one
// addition a device writes of itself.
func (l *Library) addSelf(ctx context.Context) error {
	lib := l.ID()
	_, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.AddMember(lib, l.self, at, 0) })
	return err
}

// ensureName records this device's current name in the library, if the
// library does not have it.
func (l *Library) ensureName(ctx context.Context) error {
	lib := l.members.library()
	m, _ := l.members.get(l.self)
	if m.IsRemoved() {
		l.log.Warn("this device was removed from the library (forgotten by another device): the other devices refuse its connections; join again with a new invite", "removed_by", m.Removed.Device)
	}
	name := l.Name()
	if m.Name() == name {
		return nil
	}
	_, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.NameMember(lib, at, name) })
	return err
}

// addMember records that device id was added to the current library by
// this device, in the library's current epoch, unless it is a member
// already.
func (l *Library) addMember(ctx context.Context, id crdt.DeviceID, why string) error {
	if l.members.current(id) {
		return nil
	}
	lib, _ := l.store.Library()
	res, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
		return crdt.AddMember(crdt.LibraryID(lib.ID), id, at, lib.Epoch)
	})
	if err != nil {
		return fmt.Errorf("add device %s to the members: %w", id, err)
	}
	if len(res.Changed) > 0 {
		l.log.Info("added a device to the library's members", "device", id, "epoch", lib.Epoch, "why", why)
		return nil
	}
	// An earlier addition (a pairing, a synced record) was committed
	// first, so this write changed nothing; that commit may not have
	// reached the set yet, and callers (redeem) decide on the set as soon
	// as this returns.
	return l.takeMember(ctx, crdt.LibraryID(lib.ID), id)
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

// memberNews is what committed member records tell the library to do,
// once the batch that carried them is taken into account.
type memberNews struct {
	removed []crdt.DeviceID // devices the records removed
	gained  []crdt.DeviceID // devices that are members now
	lost    []crdt.DeviceID // devices that no longer are, not removed
	offers  []parkedOffer   // secrets offered by devices now members
	added   bool            // this device was added by another
}

type parkedOffer struct {
	from  crdt.DeviceID
	offer peer.Rekey
}

// memberChanged applies a committed member record to the set and the name
// history, and adds to news what follows from it.
func (l *Library) memberChanged(m *crdt.Member, news *memberNews) {
	l.names.noteMember(m)
	ch := l.members.update(*m)
	news.removed = append(news.removed, ch.removed...)
	l.noteSetChange(ch, news)
	if m.ID == l.self && !m.Added.IsZero() && m.AddedBy != l.self && m.Library == l.members.library() {
		news.added = true
	}
	if ch.removed != nil {
		// An offer parked from a device now removed is dropped.
		l.parked.settle(m.ID, &l.members)
	}
}

// noteSetChange adds to news what a change of the members means.
func (l *Library) noteSetChange(ch setChange, news *memberNews) {
	news.gained = append(news.gained, ch.gained...)
	for _, id := range ch.lost {
		if !l.members.removed(id) {
			news.lost = append(news.lost, id)
		}
	}
	for _, id := range ch.gained {
		if r, ok := l.parked.settle(id, &l.members); ok {
			news.offers = append(news.offers, parkedOffer{id, r})
		}
	}
}

// actOnMembers does what committed member records told the library to.
func (l *Library) actOnMembers(news memberNews) {
	l.disconnectRemoved(news.removed)
	node := l.net.current()
	for _, id := range news.gained {
		if node != nil && id != l.self {
			node.Admitted(id)
		}
	}
	for _, id := range news.lost {
		if id == l.self {
			continue
		}
		m, _ := l.members.get(id)
		l.log.Warn("a device is no longer a member: it was added during a partition before a forget (or by a device that was forgotten); pair it again",
			"device", id, "added_by", m.AddedBy, "added_in_epoch", m.AddedEpoch, "epoch", l.members.epoch())
		if node != nil {
			node.Disconnect(id)
		}
	}
	for _, p := range news.offers {
		l.spawn(func() { l.onRekey(p.from, p.offer) })
	}
	if news.added {
		l.spawn(l.dropTicket)
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
	lib, epoch := l.members.library(), l.members.epoch()
	res, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.RemoveMember(lib, m.ID, at, epoch) })
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
		l.log.Warn("a paired device gave no device id; it is not a member until it pairs again", "device", device)
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

// Members returns every member record of the library, removed devices
// included, in device id order: also those of devices that are not
// members (Standing says).
func (l *Library) Members() []crdt.Member { return l.members.list() }

// Member returns the member record of device id, if the library has one.
func (l *Library) Member(id crdt.DeviceID) (crdt.Member, bool) { return l.members.get(id) }

// Standing says whether device id is a member now, and if not why.
func (l *Library) Standing(id crdt.DeviceID) Standing { return l.members.standing(id) }

// Epoch returns the epoch of the library's secret this device is on.
func (l *Library) Epoch() uint64 {
	lib, _ := l.store.Library()
	return lib.Epoch
}
