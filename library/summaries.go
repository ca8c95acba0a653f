package library

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	libp2ppeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
)

// What tombstone collection exchanges with the other members (collect.go
// runs the loop): the summaries each member gossips of how far it has
// merged everyone, and the residues of collected books handed to a device
// that pulls this store from the start.

// summaries is what this device gossips (peer.Config.Summaries): its own
// summary and the latest known of every other device.
func (l *Library) summaries() []crdt.Summary {
	l.coll.mu.Lock()
	defer l.coll.mu.Unlock()
	return l.summariesLocked()
}

func (l *Library) summariesLocked() []crdt.Summary {
	list := l.coll.known.List()
	return slices.DeleteFunc(list, func(s crdt.Summary) bool { return s.Device != l.self && !l.members.current(s.Device) })
}

// onSummaries takes what a peer gossiped (peer.Config.OnSummaries). Only a
// current member's word counts. A summary that shows a device's store
// behind what it said before (restored from an old copy) makes the next
// pull from that device start from 0, so its old copies meet the residues
// here; a member's cursor into this store past its end (this one was
// restored) makes its later changes take numbers after that cursor.
func (l *Library) onSummaries(from crdt.DeviceID, list []crdt.Summary) {
	if !l.members.current(from) {
		l.log.Debug("summaries from a device that is not a member: ignored", "device", from)
		return
	}
	list, refused := l.ownOrSigned(from, list)
	if refused > 0 {
		l.log.Debug("summaries a member relayed for other devices without their signature: ignored", "from", from, "refused", refused)
	}
	t := l.takeSummaries(from, list)
	if node := l.net.current(); node != nil {
		for _, b := range t.behind {
			node.PullAllFrom(b)
		}
	}
	if last := l.store.LastSeq(); t.skipPast > last {
		// A member has merged this store further than it holds: it went
		// back (restored from an old copy). Later changes take numbers past
		// that cursor, so that no device that saw the lost state passes
		// them; the peer layer sends each puller whose cursor is past what
		// it can have had everything again.
		l.log.Warn("a member has merged this device's store further than it holds (restored from an old copy?); numbering later changes after its cursor",
			"from", from, "cursor", t.skipPast, "last", last)
		ctx, cancel := l.untilClosing(time.Minute)
		defer cancel()
		if err := l.store.SkipPast(ctx, t.skipPast); err != nil {
			l.log.Warn("number changes after a member's cursor", "err", err)
		}
	}
	if t.hand {
		l.spawn(func() { l.handResidues(from, t.handEpoch) })
	}
	if t.added {
		l.coll.wake()
	}
}

// ownOrSigned returns the summaries of list that count, of those member
// from gossiped, and how many it refused. Only what a member made itself
// counts: the sender's own summary (the connection authenticated it), and
// one of another member signed with that member's device key (relayed).
// A summary one member made up for another could make every device
// collect tombstones the other does not hold, or hold collection back for
// good (stamped far ahead, no later summary of the other would replace
// it). A relayed summary of an older build, which signs nothing, waits
// until its maker tells this device itself.
func (l *Library) ownOrSigned(from crdt.DeviceID, list []crdt.Summary) ([]crdt.Summary, int) {
	out := make([]crdt.Summary, 0, len(list))
	refused := 0
	for _, s := range list {
		switch {
		case s.Device == from, s.Device == l.self:
		case !l.members.current(s.Device):
			continue // dropped by takeSummaries anyway: not worth a check
		case !verifySummary(&s):
			refused++
			continue
		}
		out = append(out, s)
	}
	return out, refused
}

// signSummary signs s, this device's own summary, with its device key, so
// that members that relay it are believed (ownOrSigned). A summary that
// cannot be signed goes unsigned, and counts only where it is sent
// directly.
func (l *Library) signSummary(s *crdt.Summary) {
	msg, err := s.SigningBytes()
	if err != nil {
		l.log.Warn("collection: sign this device's summary", "err", err)
		return
	}
	sig, err := l.identity.Sign(msg)
	if err != nil {
		l.log.Warn("collection: sign this device's summary", "err", err)
		return
	}
	key, err := crypto.MarshalPublicKey(l.identity.GetPublic())
	if err != nil || len(sig) > crdt.MaxSummarySig || len(key) > crdt.MaxSummaryKey {
		l.log.Warn("collection: sign this device's summary", "err", err, "sig", len(sig), "key", len(key))
		return
	}
	s.Sig, s.Key = sig, key
}

// verifySummary reports whether s carries the signature of the device it
// is the summary of: its key is that device's identity (the device id is
// derived from it), and the key signed it.
func verifySummary(s *crdt.Summary) bool {
	if len(s.Sig) == 0 {
		return false
	}
	pub, err := crypto.UnmarshalPublicKey(s.Key)
	if err != nil {
		return false
	}
	id, err := libp2ppeer.IDFromPublicKey(pub)
	if err != nil || peer.DeviceIDOf(id) != s.Device {
		return false
	}
	msg, err := s.SigningBytes()
	if err != nil {
		return false
	}
	ok, err := pub.Verify(msg, s.Sig)
	return err == nil && ok
}

// taken is what a gossip of summaries asks of this device once they are
// kept.
type taken struct {
	added     bool            // a summary was news
	behind    []crdt.DeviceID // devices whose store went back: pulled again from 0
	hand      bool            // the sender gets the residues, of its store epoch handEpoch
	handEpoch uint64
	skipPast  uint64 // the furthest cursor of a member into this store
}

// takeSummaries keeps the members' summaries of list, which from gossiped,
// under collection's lock, and says what follows from them.
func (l *Library) takeSummaries(from crdt.DeviceID, list []crdt.Summary) taken {
	var t taken
	l.coll.mu.Lock()
	defer l.coll.mu.Unlock()
	for _, s := range list {
		if s.Device == from && l.coll.handed[from] != s.Epoch {
			// A device that has merged nothing of this store's epoch pulls
			// it from the start, and gets no collected book that way.
			if c, ok := s.CursorInto(l.self); !ok || c.Epoch != l.store.Epoch() || l.coll.owed[from] == s.Epoch {
				l.coll.handed[from], t.hand, t.handEpoch = s.Epoch, true, s.Epoch
			}
		}
		// This device knows itself better; a device that is not a current
		// member holds nothing back, and keeping only members' bounds what
		// is kept and gossiped.
		if s.Device == l.self || !l.members.current(s.Device) {
			continue
		}
		if c, ok := s.CursorInto(l.self); ok && c.Epoch == l.store.Epoch() && c.Seq > t.skipPast {
			t.skipPast = c.Seq
		}
		old, had := l.coll.known[s.Device]
		if !l.coll.known.Add(s) {
			continue
		}
		t.added = true
		if had && old.Epoch == s.Epoch && old.Seq > s.Seq {
			t.behind = append(t.behind, s.Device)
		}
	}
	if t.added {
		l.coll.news = true
	}
	return t
}

// loadSummaries takes the other members' summaries saved before a restart,
// so that a member away now counts for what it last said it holds. Any
// summary that arrived since is later and stays.
func (l *Library) loadSummaries(ctx context.Context) {
	list, err := l.store.Summaries(ctx)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("collection: the saved summaries are ignored; members count again once they gossip", "err", err)
		}
		return
	}
	l.coll.mu.Lock()
	defer l.coll.mu.Unlock()
	for _, s := range list {
		if s.Device != l.self && l.members.current(s.Device) {
			l.coll.known.Add(s)
		}
	}
}

// handResidues hands device to (of store epoch) what is left of the books
// this device collected: it pulls this store from the start, which lists
// none of them, and should hold their deletes (crdt/collect.go).
func (l *Library) handResidues(to crdt.DeviceID, epoch uint64) {
	ctx, cancel := l.untilClosing(2 * time.Minute)
	defer cancel()
	var records [][]byte
	err := l.store.Residues(ctx, func(data []byte) error {
		records = append(records, slices.Clone(data))
		return nil
	})
	node := l.net.current()
	if err != nil || len(records) == 0 || node == nil {
		if err != nil {
			l.log.Warn("collection: read the residues to hand over", "device", to, "err", err)
		}
		return
	}
	if err := node.SendResidues(ctx, to, records); err != nil {
		l.log.Info("collection: residues not handed over; again with its next summary", "device", to, "err", err)
		l.coll.mu.Lock()
		delete(l.coll.handed, to)
		l.coll.owed[to] = epoch
		l.coll.mu.Unlock()
		return
	}
	l.coll.mu.Lock()
	if l.coll.owed[to] == epoch {
		delete(l.coll.owed, to)
	}
	l.coll.mu.Unlock()
	l.log.Info("handed what is left of collected books to a device that pulls this one from the start", "device", to, "books", len(records))
}

// onResidues merges residues a member handed over (peer.Config.OnResidues).
func (l *Library) onResidues(ctx context.Context, from crdt.DeviceID, entries []crdt.Entry) error {
	if !l.members.current(from) {
		return fmt.Errorf("residues from device %s, which is not a member of the library", from)
	}
	return l.applyFrom(ctx, from, entries, nil)
}
