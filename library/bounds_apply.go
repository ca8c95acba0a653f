package library

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// How the bounds of bounds.go are applied to batches from peers, and
// told to the person: a log line per writer at most once a minute, and a
// warning in the status for an hour after the latest refusal.

// refusalWarnFor is how long a writer stays in the status after its
// latest refused record.
const refusalWarnFor = time.Hour

// writerOf returns the device of e's newest stamp.
func writerOf(e *crdt.Entry) crdt.DeviceID { return e.MaxTimestamp().Device }

// keyOf returns the bounds key of device d: d if it is or was a member,
// else 0.
func (l *Library) keyOf(d crdt.DeviceID) writerKey {
	if d != 0 && l.members.counts(d) {
		return writerKey(d)
	}
	return 0
}

// syncUnits takes the member set's charge units into the bounds, if they
// changed since the bounds took them.
func (l *Library) syncUnits() {
	l.bounds.mu.Lock()
	have := l.bounds.unitsGen
	l.bounds.mu.Unlock()
	units, gen, changed := l.members.unitsAfter(have)
	if !changed {
		return
	}
	l.bounds.mu.Lock()
	defer l.bounds.mu.Unlock()
	l.bounds.setUnitsLocked(gen, units)
}

// admission is what the bounds decided of one batch. Its maps are by unit
// (bounds_units.go).
type admission struct {
	entries  []crdt.Entry         // what is taken
	keys     map[string]writerKey // the unit of each entry taken, by record id
	reserved map[writerKey]int    // tokens and places taken for the batch
	refused  map[writerKey]int
	why      map[writerKey]verdict
	writer   map[writerKey]writerKey // the device of a record refused, by unit
	// residues: the batch is residues handed over by a device of unit
	// sender, whose bucket of residues the tokens are of.
	residues bool
	sender   writerKey
}

// refuse notes a record of device key k, of unit u, refused for why.
func (a *admission) refuse(u, k writerKey, why verdict) {
	if a.refused == nil {
		a.refused, a.why, a.writer = map[writerKey]int{}, map[writerKey]verdict{}, map[writerKey]writerKey{}
	}
	a.refused[u]++
	a.why[u], a.writer[u] = why, k
}

// admit decides which entries of a batch from a peer the bounds take.
// For every unit whose bounds allow the whole of its part of the batch,
// that part is taken at once; otherwise each of its records is read from
// the store, and what would change nothing is taken for free.
func (l *Library) admit(ctx context.Context, entries []crdt.Entry) (*admission, error) {
	l.syncUnits()
	a := &admission{keys: make(map[string]writerKey, len(entries)), reserved: map[writerKey]int{}}
	keys := make([]writerKey, len(entries))
	for i := range entries {
		keys[i] = l.keyOf(writerOf(&entries[i]))
	}
	units := make([]writerKey, len(entries))
	count := map[writerKey]int{}
	now := l.wallMs()
	slow := map[writerKey]bool{}
	l.bounds.mu.Lock()
	for i, k := range keys {
		units[i] = l.bounds.unitLocked(k)
		count[units[i]]++
	}
	for u, n := range count {
		if l.bounds.reserveLocked(u, n, now) {
			a.reserved[u] = n
		} else {
			slow[u] = true
		}
	}
	l.bounds.mu.Unlock()
	a.entries = entries
	if len(slow) > 0 {
		a.entries = make([]crdt.Entry, 0, len(entries))
	}
	for i := range entries {
		e, u := &entries[i], units[i]
		if slow[u] {
			v, charged, err := l.admitOne(ctx, a, e, u, now)
			if err != nil {
				l.settle(a)
				return nil, err
			}
			if v != admitted {
				a.refuse(u, keys[i], v)
				continue
			}
			if charged {
				a.reserved[u]++
			}
		}
		if len(slow) > 0 {
			a.entries = append(a.entries, *e)
		}
		a.keys[string(e.AppendID(nil))] = u
	}
	return a, nil
}

// admitResidues decides which residues of a batch handed over by device
// from the bounds take: each is read from the store, what would change
// nothing is taken for free, and the rest spend the residues of from's
// unit and places of their writers' units. Once one is refused the rest
// of the batch is refused unread: the handing fails, and the sender hands
// them all over again later (summaries.go), when those taken change
// nothing, so a sender over its bound costs this device one read a batch.
func (l *Library) admitResidues(ctx context.Context, from crdt.DeviceID, entries []crdt.Entry) (*admission, error) {
	l.syncUnits()
	fromKey := l.keyOf(from)
	keys := make([]writerKey, len(entries))
	for i := range entries {
		keys[i] = l.keyOf(writerOf(&entries[i]))
	}
	a := &admission{keys: make(map[string]writerKey, len(entries)), reserved: map[writerKey]int{}, residues: true,
		entries: make([]crdt.Entry, 0, len(entries))}
	units := make([]writerKey, len(entries))
	l.bounds.mu.Lock()
	a.sender = l.bounds.unitLocked(fromKey)
	for i, k := range keys {
		units[i] = l.bounds.unitLocked(k)
	}
	l.bounds.mu.Unlock()
	now := l.wallMs()
	for i := range entries {
		e, u := &entries[i], units[i]
		if a.refused != nil {
			a.refuse(a.sender, fromKey, a.why[a.sender])
			continue
		}
		v, charged, err := l.admitOne(ctx, a, e, u, now)
		if err != nil {
			l.settle(a)
			return nil, err
		}
		if v != admitted {
			a.refuse(a.sender, fromKey, v)
			continue
		}
		if charged {
			a.reserved[u]++
		}
		a.entries = append(a.entries, *e)
		a.keys[string(e.AppendID(nil))] = u
	}
	return a, nil
}

// admitOne decides on one record of unit u, read against the store: a
// record that would change nothing is taken without a token (charged
// false). The token is of u, or for residues of a's sender.
func (l *Library) admitOne(ctx context.Context, a *admission, e *crdt.Entry, u writerKey, now uint64) (v verdict, charged bool, err error) {
	cur, found, err := l.store.Get(ctx, e.AppendID(nil))
	if err != nil {
		return admitted, false, err
	}
	if !found && e.Kind == crdt.KindBook {
		// A collected book's copy that its residue absorbs changes
		// nothing (crdt.Absorbs): a residue handed over again to a device
		// that collected it since, say.
		res, ok, err := l.store.Residue(ctx, e.Book.Key)
		if err != nil {
			return admitted, false, err
		}
		if ok && crdt.Absorbs(&res, &e.Book) {
			return admitted, false, nil
		}
	}
	claims := true
	if found {
		merged := cur.Clone()
		changed, err := merged.Merge(e)
		if err != nil || !changed {
			// A record that does not merge fails the batch in the store.
			return admitted, false, nil
		}
		mk, ck := l.keyOf(writerOf(&merged)), l.keyOf(writerOf(&cur))
		l.bounds.mu.Lock()
		claims = l.bounds.unitLocked(mk) == u && l.bounds.unitLocked(ck) != u
		l.bounds.mu.Unlock()
	}
	l.bounds.mu.Lock()
	defer l.bounds.mu.Unlock()
	if a.residues {
		v = l.bounds.admitResidueLocked(a.sender, u, claims, now)
	} else {
		v = l.bounds.admitLocked(u, claims, now)
	}
	if v == admitted && !claims {
		// admitLocked took no place; settle gives back one per token.
		l.bounds.get(u).pending++
	}
	return v, v == admitted, nil
}

// settle gives back what a batch reserved and did not use: the places
// (the committed ones are counted by changed), and the tokens of records
// that changed nothing.
func (l *Library) settle(a *admission, changes ...store.Change) {
	used := map[writerKey]int{}
	for i := range changes {
		if u, ok := a.keys[string(changes[i].Entry.AppendID(nil))]; ok {
			used[u]++
		}
	}
	l.bounds.mu.Lock()
	defer l.bounds.mu.Unlock()
	l.bounds.settleLocked(a.reserved)
	for u, n := range a.reserved {
		if n <= used[u] {
			continue
		}
		if a.residues {
			l.bounds.refundResiduesLocked(a.sender, n-used[u])
		} else {
			l.bounds.refundLocked(u, n-used[u])
		}
	}
}

// countMoves keeps the totals of the writers current after a committed
// batch, local or remote.
func (l *Library) countMoves(changes []store.Change) {
	type move struct {
		from, to writerKey
		had      bool
	}
	moves := make([]move, 0, len(changes))
	for i := range changes {
		c := &changes[i]
		m := move{to: l.keyOf(writerOf(c.Entry))}
		if c.Prev != nil {
			m.from, m.had = l.keyOf(writerOf(c.Prev)), true
		}
		moves = append(moves, m)
	}
	l.bounds.mu.Lock()
	defer l.bounds.mu.Unlock()
	for _, m := range moves {
		l.bounds.movedLocked(m.from, m.had, m.to, true)
	}
}

// countStore counts the records of the store by last writer, once at
// start, in the background: until it is done only the rates are checked.
// Records changed while it scans are counted by the scan or by
// countMoves, and may be counted twice, which refuses sooner, never later;
// the next start counts afresh (as it does after collection removes
// records, which countMoves does not see).
func (l *Library) countStore(ctx context.Context) error {
	counts := map[writerKey]int{}
	for _, kind := range crdt.Kinds() {
		if err := l.store.Scan(ctx, kind, func(e crdt.Entry) error {
			counts[l.keyOf(writerOf(&e))]++
			return nil
		}); err != nil {
			return fmt.Errorf("count the records by writer: %w", err)
		}
	}
	l.bounds.mu.Lock()
	defer l.bounds.mu.Unlock()
	for k, n := range counts {
		l.bounds.addLiveLocked(k, n)
	}
	l.bounds.counted = true
	return nil
}

// noteRefused logs and keeps what a batch from peer from refused.
func (l *Library) noteRefused(a *admission, from crdt.DeviceID) {
	now := l.wallMs()
	for u, n := range a.refused {
		l.bounds.mu.Lock()
		var r refusal
		var logNow bool
		if a.residues {
			r, logNow = l.bounds.residuesRefusedLocked(u, a.writer[u], n, a.why[u], now)
		} else {
			r, logNow = l.bounds.refusedLocked(u, a.writer[u], n, a.why[u], now)
		}
		b := l.bounds.b
		l.bounds.mu.Unlock()
		if !logNow {
			continue
		}
		dev, unit := crdt.DeviceID(r.writer), crdt.DeviceID(u)
		if a.residues {
			why := "more residues than one device hands over in an hour"
			if r.why == overTotal {
				why = "residues of records whose writers are over their total"
			}
			l.log.Warn("refused residues of collected books a device handed over, over its bound; they are taken when it hands them over again, with this device's next summary to it, as its bound allows",
				"device", dev, "name", l.writerName(r.writer), "bound_of", unit, "bound_name", l.writerName(u), "why", why,
				"refused", r.unlogged, "refused_total", r.total, "bound_residues", b.Residues)
			continue
		}
		l.log.Warn("refused records of a device over its bounds; they are taken when its bounds allow again, or never once it is forgotten",
			"device", dev, "name", l.writerName(r.writer), "bound_of", unit, "bound_name", l.writerName(u), "why", r.why.String(),
			"refused", r.unlogged, "refused_total", r.total, "bound_total", b.Total, "via", from)
	}
}

// writerName names a bounds key for a person.
func (l *Library) writerName(k writerKey) string {
	if k == 0 {
		return "devices that are not members"
	}
	return l.names.get(crdt.DeviceID(k))
}

// BoundsWarning is a device whose records this device refused, being over
// the bounds of what one device may originate: the bounds of its unit
// (bounds_units.go), which it may share with the devices that added it
// and those they added.
type BoundsWarning struct {
	Writer crdt.DeviceID // the device of the latest record refused; 0: the devices that never were members
	Name   string        // its name now, "" if it never told
	// Bound is the device whose unit's bounds Writer's records spend:
	// Writer itself, or the device where its "added by" chain ends.
	Bound     crdt.DeviceID
	BoundName string
	// Reason is the bound of the latest refusal: "rate" or "total" of
	// what Writer wrote, or "residues": residues of collected books that
	// Writer handed over past its unit's bound of them.
	Reason  string
	Refused uint64    // records of the unit refused since the library opened (one offered again counts again)
	First   time.Time // the first refusal
	Last    time.Time // the latest
}

// Message says the warning to a person.
func (w BoundsWarning) Message() string {
	who := deviceWords(w.Writer, w.Name)
	if w.Bound != w.Writer {
		who = fmt.Sprintf("%s, counted with %s and the devices added through it,", who, deviceWords(w.Bound, w.BoundName))
	}
	if w.Reason == residuesReason {
		return fmt.Sprintf("%s handed over more residues of collected books than this device takes from one device: %d refused, the latest at %s; they are taken when it hands them over again, as the bound allows, and never once it is forgotten, which is what to do if it is not yours",
			who, w.Refused, w.Last.UTC().Format(time.RFC3339))
	}
	what := "more records per minute"
	if w.Reason == "total" {
		what = "more records in all"
	}
	return fmt.Sprintf("%s wrote %s than this device takes from one device: %d records refused, the latest at %s; they are taken when it writes less, and never once it is forgotten, which is what to do if it is not yours",
		who, what, w.Refused, w.Last.UTC().Format(time.RFC3339))
}

// deviceWords names device d, of name name, in a sentence.
func deviceWords(d crdt.DeviceID, name string) string {
	switch {
	case d == 0:
		return "devices that are not members"
	case name == "":
		return "device " + d.String()
	}
	return name
}

// residuesReason is BoundsWarning.Reason for residues refused.
const residuesReason = "residues"

// BoundsWarnings returns a warning for each unit whose records, or whose
// handings of residues, were refused within the last hour, in device id
// order of their writers (or senders).
func (l *Library) BoundsWarnings() []BoundsWarning {
	now := l.wallMs()
	var out []BoundsWarning
	warn := func(u writerKey, f refusal, reason string) {
		if f.total == 0 || f.lastMs+uint64(refusalWarnFor/time.Millisecond) < now {
			return
		}
		out = append(out, BoundsWarning{Writer: crdt.DeviceID(f.writer), Bound: crdt.DeviceID(u), Reason: reason, Refused: f.total,
			First: time.UnixMilli(int64(f.firstMs)), Last: time.UnixMilli(int64(f.lastMs))})
	}
	l.bounds.mu.Lock()
	for u, wr := range l.bounds.writers {
		warn(u, wr.refusal, wr.refusal.why.reason())
	}
	for u, s := range l.bounds.senders {
		warn(u, s.refusal, residuesReason)
	}
	l.bounds.mu.Unlock()
	for i := range out {
		if out[i].Writer != 0 {
			out[i].Name = l.names.get(out[i].Writer)
		}
		if out[i].Bound != 0 {
			out[i].BoundName = l.names.get(out[i].Bound)
		}
	}
	slices.SortFunc(out, func(a, b BoundsWarning) int {
		return cmp.Or(cmp.Compare(a.Writer, b.Writer), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// errRefused is what ApplyRemote returns for a batch of which some
// records were refused.
func errRefused(a *admission) error {
	n := 0
	for _, c := range a.refused {
		n += c
	}
	if a.residues {
		return fmt.Errorf("%d residues over their sender's bound: %w", n, peer.ErrRecordsRefused)
	}
	return fmt.Errorf("%d records over their writers' bounds: %w", n, peer.ErrRecordsRefused)
}
