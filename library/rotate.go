package library

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/multiformats/go-multiaddr"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// Rotating the library secret. Forgetting a device closes the member set
// to it, but the private network's key comes from the library secret,
// which the forgotten device keeps: with it (under a new identity, or a
// copy of its data dir) it would come back as a newcomer. So a removal
// moves the library to a new secret, one epoch up:
//
//   - The device that rotates makes a fresh random secret, stores it next
//     to the old one (store.RotateLibrary, one atomic write), hands it to
//     every connected member over the old network (the rekey protocol,
//     peer/rekey.go, on connections the old key and Noise authenticate),
//     then restarts its node on the new key, on the same ports.
//   - A member that takes a new secret does the same, so it spreads.
//   - A device keeps a restricted node on each superseded secret: it admits
//     only non-removed members, carries only rekey offers, and offers the
//     current secret to every member that connects or that it reaches. A
//     member offline during the rotation is brought over when it next meets
//     any device that rotated. The restricted nodes close once every current
//     member has been seen on the current secret; there is no timer, since a
//     member away for a month must still be brought over without pairing
//     again, and a restricted node exchanges nothing else.
//   - Two devices rotating at once make two secrets for one epoch: every
//     device takes the one that supersedes (store.Library.Supersedes: higher
//     epoch, then larger hash), so they converge wherever the two meet.
//
// Who rotates: the device that forgets another rotates at once. A leave
// (a device removing itself) is rotated by the members that learn of it,
// each after a short random delay and only if its epoch has not moved
// since it learned: the first one's offer moves the others. A device whose
// current secret was handed over by a device it then learns was removed
// rotates too: a member offline during a forget takes offers from the
// forgotten device until it learns of the removal.
//
// A new secret is taken only from a current member (one offered by a
// device not known yet is kept, and taken if its membership arrives),
// never more than maxEpochJump epochs ahead; the epoch of the secret a
// device already has is taken from a current member (a device that joined
// by an invite, which carries no epoch, learns it so). An offer names the
// devices the sender knows were removed: the receiver refuses them and
// cuts them off before the records reach it. It also names the sender's
// members: the roster of the offered epoch, the only devices an addition
// made before that epoch still counts for (doc.go). A rotation names the
// rotator's own members, a moved device those of the offer it took; the
// first member a device meets on a newer epoch moves it there, and with it
// the roster, so an addition made during a partition before a forget adds
// nobody once the device that made it has moved.

// rekeyOfferTimeout bounds handing the new secret to the connected members
// before leaving the old network.
const rekeyOfferTimeout = 10 * time.Second

// maxEpochJump is how far ahead of this device's epoch a new secret may
// be: a member away through that many rotations pairs again, and a removed
// device cannot make an epoch no later rotation supersedes.
const maxEpochJump = 64

// maxEpoch leaves room to rotate after any epoch a device takes.
const maxEpoch = 1 << 62

// leaveRotateJitter spreads the rotations of the members that learn of a
// leave together: the first offers its secret to the others, whose epoch
// has then moved.
const leaveRotateJitter = 2 * time.Second

// rotate moves the library to a fresh secret of the next epoch, and hands
// it to the connected members; why goes to the log.
func (l *Library) rotate(ctx context.Context, why string) error {
	l.moveMu.Lock()
	defer l.moveMu.Unlock()
	cur, ok := l.store.Library()
	if !ok {
		return errors.New("rotate the library secret: no library")
	}
	next := store.Library{ID: cur.ID, Epoch: cur.Epoch + 1}
	if _, err := rand.Read(next.Secret[:]); err != nil {
		return fmt.Errorf("rotate the library secret: %w", err)
	}
	roster := l.roster()
	l.log.Info("rotating the library secret", "why", why, "epoch", next.Epoch, "members", len(roster))
	return l.moveToLocked(ctx, next, nil, roster)
}

// roster returns the members this device holds now, as a rotation names
// them for the next epoch, at most peer.MaxRekeyMembers of them (this
// device first).
func (l *Library) roster() []crdt.DeviceID {
	ids := l.members.currentIDs()
	if len(ids) > peer.MaxRekeyMembers {
		l.log.Warn("the library has more members than an epoch's roster holds; those left out must pair again", "members", len(ids), "roster", peer.MaxRekeyMembers)
		ids = slices.DeleteFunc(ids, func(id crdt.DeviceID) bool { return id == l.self })
		ids = append([]crdt.DeviceID{l.self}, ids[:peer.MaxRekeyMembers-1]...)
	}
	return ids
}

// moveToLocked makes next the current secret, with roster the members of
// its epoch, hands it to the connected members, restarts the node on it
// (dialling dial too) and runs restricted nodes on the superseded secrets.
// Callers hold l.moveMu.
func (l *Library) moveToLocked(ctx context.Context, next store.Library, dial []multiaddr.Multiaddr, roster []crdt.DeviceID) error {
	ids := make([]uint64, len(roster))
	for i, id := range roster {
		ids[i] = uint64(id)
	}
	if err := l.store.RotateLibrary(ctx, next, ids); err != nil {
		return err
	}
	// The new epoch's members from here on: nothing written from now goes
	// to a device its roster leaves out, this offer included.
	l.applyRules()
	old := l.net.current()
	var listen, known []multiaddr.Multiaddr
	if old != nil {
		listen, known = old.ListenAddrs(), old.MemberAddrs()
	}
	// The nodes on the superseded secrets first: the offer below names
	// them, so that a device that rotated at the same time, and whose
	// secret loses, can be reached on the old network and brought over.
	if err := l.restartPreviousLocked(ctx, append(slices.Clone(dial), known...)); err != nil {
		return err
	}
	if old != nil {
		offer := peer.Rekey{Library: peerLibrary(next), Removed: l.members.removedIDs(), Addrs: append(old.Addrs(), l.net.previousAddrs()...), Members: l.roster()}
		octx, cancel := context.WithTimeout(ctx, rekeyOfferTimeout)
		took := old.OfferRekey(octx, offer, func(d crdt.DeviceID) bool { return !l.members.current(d) })
		cancel()
		l.log.Info("handed the new library secret to the connected members", "members", took, "epoch", next.Epoch)
	}
	l.net.take(true)
	if old != nil {
		if err := old.Close(); err != nil {
			l.log.Warn("stop the peer network on the old secret", "err", err)
		}
	}
	extra := append(dial, known...)
	err := l.startNodeOn(context.WithoutCancel(ctx), listen, extra)
	if err != nil && listen != nil {
		l.log.Warn("the peer network cannot listen where it did; listening as configured", "addrs", listen, "err", err)
		err = l.startNodeOn(context.WithoutCancel(ctx), nil, extra)
	}
	if err != nil {
		return err
	}
	l.log.Info("the library moved to a new secret", "epoch", next.Epoch)
	return nil
}

// onRekey takes a member's offer of a secret (peer.Config.OnRekey): the
// epoch of the secret this device has, or a secret that supersedes it.
func (l *Library) onRekey(from crdt.DeviceID, r peer.Rekey) bool {
	cur, ok := l.store.Library()
	if !ok || r.Library.ID != cur.ID {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeWrite)
	defer cancel()
	offered := store.Library{ID: r.Library.ID, Secret: r.Library.Secret, Epoch: r.Library.Epoch}
	if offered.Secret == cur.Secret {
		return l.takeEpoch(ctx, from, cur, offered.Epoch, r.Members)
	}
	if offered.Epoch > cur.Epoch+maxEpochJump {
		// Epochs are counted by the devices that rotate: no member is this
		// far ahead, and an epoch near the top would leave no room to
		// rotate after it.
		l.log.Warn("refused a library secret whose epoch is implausibly far ahead", "device", from, "epoch", offered.Epoch, "current", cur.Epoch)
		return false
	}
	offered.From = uint64(from)
	if !offered.Supersedes(cur) {
		if l.members.current(from) && len(r.Addrs) > 0 {
			// A member on a losing or older secret: this device's
			// restricted nodes offer it the current one.
			l.meetOnPrevious(r.Addrs)
		}
		return false
	}
	if !l.members.current(from) {
		if l.members.removed(from) {
			l.log.Warn("refused a new library secret from a removed device", "device", from)
			return false
		}
		return l.parkOffer(from, r)
	}
	l.takeOffer(from, offered, r)
	return true
}

// takeEpoch takes what a member says of the secret this device has: its
// epoch, to a device that joined by an invite (which carries none), and
// that epoch's roster, if this device knows none. Only a current member's
// word counts, and a secret has one epoch: another epoch for it is
// refused.
func (l *Library) takeEpoch(ctx context.Context, from crdt.DeviceID, cur store.Library, epoch uint64, members []crdt.DeviceID) bool {
	if !l.members.current(from) {
		return false
	}
	if epoch >= maxEpoch || (cur.Epoch != 0 && epoch != cur.Epoch) {
		l.log.Warn("refused a member's word that the library's secret is of another epoch", "device", from, "epoch", epoch, "current", cur.Epoch)
		return false
	}
	var roster []uint64
	for _, id := range members {
		roster = append(roster, uint64(id))
	}
	if err := l.store.SetLibraryEpoch(ctx, epoch, roster); err != nil {
		l.log.Warn("record the library's epoch", "err", err)
		return false
	}
	l.applyRules()
	return true
}

// takeOffer moves this device to offered, a current member's secret that
// supersedes its own, which r carried: at once it refuses and cuts off the
// devices r names as removed, since nothing written from here on may reach
// them; the move itself runs under moveMu, on a goroutine. The new epoch's
// roster is the members r names (what this device holds now if r names
// none); of two secrets of one epoch, only the members both name.
func (l *Library) takeOffer(from crdt.DeviceID, offered store.Library, r peer.Rekey) {
	var news memberNews
	l.noteSetChange(l.members.hint(r.Removed), &news)
	l.actOnMembers(news)
	l.removalsLearned(r.Removed)
	node := l.net.current()
	for _, id := range r.Removed {
		if node != nil && id != l.self {
			node.Disconnect(id)
		}
	}
	l.log.Info("a member handed over a new library secret", "device", from, "epoch", offered.Epoch)
	l.spawn(func() {
		l.moveMu.Lock()
		defer l.moveMu.Unlock()
		cur, _ := l.store.Library()
		if !offered.Supersedes(cur) {
			// This device moved meanwhile (its own rotation, or a better
			// offer): if the sender's secret lost, bring the sender over.
			if offered.Secret != cur.Secret {
				l.meetOnPrevious(r.Addrs)
			}
			return
		}
		roster := r.Members
		if len(roster) == 0 {
			roster = l.members.currentIDs()
		}
		if had, ok := l.store.Roster(); ok && offered.Epoch == cur.Epoch {
			roster = slices.DeleteFunc(slices.Clone(roster), func(id crdt.DeviceID) bool { return !slices.Contains(had, uint64(id)) })
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*rekeyOfferTimeout)
		defer cancel()
		if err := l.moveToLocked(ctx, offered, r.Addrs, roster); err != nil {
			l.log.Error("move to the new library secret", "err", err)
		}
	})
}

// maxParked bounds the offers kept from devices not known as members.
const maxParked = 16

// parkedOffers are new secrets offered by devices not known as members
// yet. It has a lock of its own, under which the member set is asked
// whether the sender is a member: so an offer is either parked before its
// sender's membership is committed, and settle takes it, or finds the
// membership committed and is taken at once.
type parkedOffers struct {
	mu     sync.Mutex
	byFrom map[crdt.DeviceID]peer.Rekey
}

// park keeps r, offered by from, unless from is a current member of
// members by now (then taken is true and nothing is kept) or too many are
// kept (then parked is false).
func (p *parkedOffers) park(from crdt.DeviceID, r peer.Rekey, members *memberSet) (taken, parked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if members.current(from) {
		return true, false
	}
	if _, ok := p.byFrom[from]; !ok && len(p.byFrom) >= maxParked {
		return false, false
	}
	if p.byFrom == nil {
		p.byFrom = make(map[crdt.DeviceID]peer.Rekey)
	}
	p.byFrom[from] = r
	return false, true
}

// settle is called once a member record of device id is committed: an
// offer it parked is returned if it is now a current member, and dropped
// if it was removed.
func (p *parkedOffers) settle(id crdt.DeviceID, members *memberSet) (peer.Rekey, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.byFrom[id]
	if !ok {
		return peer.Rekey{}, false
	}
	switch {
	case members.current(id):
		delete(p.byFrom, id)
		return r, true
	case members.removed(id):
		delete(p.byFrom, id)
	}
	return peer.Rekey{}, false
}

// has reports whether an offer of device id is parked.
func (p *parkedOffers) has(id crdt.DeviceID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.byFrom[id]
	return ok
}

// parkOffer keeps a new secret offered by a device that is not a member
// yet, and takes it once its membership arrives (memberChanged). Right
// after a pairing, the device that paired can be offered its inviter's new
// secret a moment before the record that makes the inviter a member
// reaches it, and a rotation offers only once: refused for good, the two
// would stay on different secrets. The offer came over a connection Noise
// authenticated as from, so taking it later is taking it from from.
func (l *Library) parkOffer(from crdt.DeviceID, r peer.Rekey) bool {
	taken, parked := l.parked.park(from, r, &l.members)
	switch {
	case taken:
		// The membership was committed since onRekey asked.
		return l.onRekey(from, r)
	case !parked:
		l.log.Warn("refused a new library secret from a device that is not a member", "device", from)
		return false
	}
	l.log.Info("a device not known as a member yet offered a new library secret; it is taken if its membership arrives", "device", from, "epoch", r.Library.Epoch)
	return false
}

// removalsLearned acts on devices this device just learned were removed
// (by a record, or a member's word when it handed a secret over): if one
// of them handed this device its current secret, that secret may be known
// to whoever holds the removed device (a device removed while this one was
// away may still rotate and offer its own secret), so it rotates again.
func (l *Library) removalsLearned(ids []crdt.DeviceID) {
	cur, ok := l.store.Library()
	if !ok || cur.From == 0 {
		return
	}
	for _, id := range ids {
		if uint64(id) == cur.From {
			l.rotateSoon(fmt.Sprintf("the current secret came from device %s, which was removed", id))
			return
		}
	}
}

// rotateAfterLeave rotates the secret after device id left the library.
func (l *Library) rotateAfterLeave(id crdt.DeviceID) {
	l.rotateSoon(fmt.Sprintf("device %s left", id))
}

// rotateSoon rotates the secret after a short random delay, unless the
// epoch moves meanwhile (another member rotated for the same reason).
func (l *Library) rotateSoon(why string) {
	lib, _ := l.store.Library()
	epoch := lib.Epoch
	wait := mrand.N(leaveRotateJitter)
	l.spawn(func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-l.life.Done():
			return
		}
		if cur, _ := l.store.Library(); cur.Epoch != epoch {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*rekeyOfferTimeout)
		defer cancel()
		if err := l.rotate(ctx, why); err != nil {
			l.log.Error("rotate the library secret", "why", why, "err", err)
		}
	})
}
