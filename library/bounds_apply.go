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

// admission is what the bounds decided of one batch.
type admission struct {
	entries  []crdt.Entry         // what is taken
	keys     map[string]writerKey // the writer key of each entry taken, by record id
	reserved map[writerKey]int    // tokens and places taken for the batch
	refused  map[writerKey]int
	why      map[writerKey]verdict
}

// admit decides which entries of a batch from a peer the bounds take.
// For every writer whose bounds allow the whole of its part of the batch,
// that part is taken at once; otherwise each of its records is read from
// the store, and what would change nothing is taken for free.
func (l *Library) admit(ctx context.Context, entries []crdt.Entry) (*admission, error) {
	a := &admission{keys: make(map[string]writerKey, len(entries)), reserved: map[writerKey]int{}}
	keys := make([]writerKey, len(entries))
	count := map[writerKey]int{}
	for i := range entries {
		keys[i] = l.keyOf(writerOf(&entries[i]))
		count[keys[i]]++
	}
	now := l.wallMs()
	slow := map[writerKey]bool{}
	l.bounds.mu.Lock()
	for k, n := range count {
		if l.bounds.reserveLocked(k, n, now) {
			a.reserved[k] = n
		} else {
			slow[k] = true
		}
	}
	l.bounds.mu.Unlock()
	a.entries = entries
	if len(slow) > 0 {
		a.entries = make([]crdt.Entry, 0, len(entries))
	}
	for i := range entries {
		e, k := &entries[i], keys[i]
		if slow[k] {
			v, charged, err := l.admitOne(ctx, e, k, now)
			if err != nil {
				l.settle(a)
				return nil, err
			}
			if v != admitted {
				if a.refused == nil {
					a.refused, a.why = map[writerKey]int{}, map[writerKey]verdict{}
				}
				a.refused[k]++
				a.why[k] = v
				continue
			}
			if charged {
				a.reserved[k]++
			}
		}
		if len(slow) > 0 {
			a.entries = append(a.entries, *e)
		}
		a.keys[string(e.AppendID(nil))] = k
	}
	return a, nil
}

// admitOne decides on one record of writer k, read against the store: a
// record that would change nothing is taken without a token (charged
// false).
func (l *Library) admitOne(ctx context.Context, e *crdt.Entry, k writerKey, now uint64) (v verdict, charged bool, err error) {
	cur, found, err := l.store.Get(ctx, e.AppendID(nil))
	if err != nil {
		return admitted, false, err
	}
	claims := true
	if found {
		merged := cur.Clone()
		changed, err := merged.Merge(e)
		if err != nil || !changed {
			// A record that does not merge fails the batch in the store.
			return admitted, false, nil
		}
		claims = l.keyOf(writerOf(&merged)) == k && l.keyOf(writerOf(&cur)) != k
	}
	l.bounds.mu.Lock()
	defer l.bounds.mu.Unlock()
	v = l.bounds.admitLocked(k, claims, now)
	if v == admitted && !claims {
		// admitLocked took no place; settle gives back one per token.
		l.bounds.get(k).pending++
	}
	return v, v == admitted, nil
}

// settle gives back what a batch reserved and did not use: the places
// (the committed ones are counted by changed), and the tokens of records
// that changed nothing.
func (l *Library) settle(a *admission, changes ...store.Change) {
	used := map[writerKey]int{}
	for i := range changes {
		if k, ok := a.keys[string(changes[i].Entry.AppendID(nil))]; ok {
			used[k]++
		}
	}
	l.bounds.mu.Lock()
	defer l.bounds.mu.Unlock()
	l.bounds.settleLocked(a.reserved)
	for k, n := range a.reserved {
		if n > used[k] {
			l.bounds.refundLocked(k, n-used[k])
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
		l.bounds.get(k).live += n
	}
	l.bounds.counted = true
	return nil
}

// noteRefused logs and keeps what a batch from peer from refused.
func (l *Library) noteRefused(a *admission, from crdt.DeviceID) {
	now := l.wallMs()
	for k, n := range a.refused {
		l.bounds.mu.Lock()
		r, logNow := l.bounds.refusedLocked(k, n, a.why[k], now)
		total := l.bounds.b.Total
		l.bounds.mu.Unlock()
		if !logNow {
			continue
		}
		dev := crdt.DeviceID(k)
		l.log.Warn("refused records of a device over its bounds; they are taken when its bounds allow again, or never once it is forgotten",
			"device", dev, "name", l.writerName(k), "why", r.why.String(), "refused", r.unlogged, "refused_total", r.total,
			"bound_total", total, "via", from)
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
// the bounds of what one device may originate.
type BoundsWarning struct {
	Writer  crdt.DeviceID // 0: the devices that never were members, together
	Name    string        // its name now, "" if it never told
	Reason  string        // the bound of the latest refusal: "rate" or "total"
	Refused uint64        // records refused since the library opened (one offered again counts again)
	First   time.Time     // the first refusal
	Last    time.Time     // the latest
}

// Message says the warning to a person.
func (w BoundsWarning) Message() string {
	who := w.Name
	switch {
	case w.Writer == 0:
		who = "devices that are not members"
	case who == "":
		who = "device " + w.Writer.String()
	}
	what := "more records per minute"
	if w.Reason == "total" {
		what = "more records in all"
	}
	return fmt.Sprintf("%s wrote %s than this device takes from one device: %d records refused, the latest at %s; they are taken when it writes less, and never once it is forgotten, which is what to do if it is not yours",
		who, what, w.Refused, w.Last.UTC().Format(time.RFC3339))
}

// BoundsWarnings returns the writers whose records were refused within
// the last hour, in device id order.
func (l *Library) BoundsWarnings() []BoundsWarning {
	now := l.wallMs()
	var out []BoundsWarning
	l.bounds.mu.Lock()
	for k, wr := range l.bounds.writers {
		f := wr.refusal
		if f.total == 0 || f.lastMs+uint64(refusalWarnFor/time.Millisecond) < now {
			continue
		}
		out = append(out, BoundsWarning{Writer: crdt.DeviceID(k), Reason: f.why.reason(), Refused: f.total,
			First: time.UnixMilli(int64(f.firstMs)), Last: time.UnixMilli(int64(f.lastMs))})
	}
	l.bounds.mu.Unlock()
	for i := range out {
		if out[i].Writer != 0 {
			out[i].Name = l.names.get(out[i].Writer)
		}
	}
	slices.SortFunc(out, func(a, b BoundsWarning) int { return cmp.Compare(a.Writer, b.Writer) })
	return out
}

// errRefused is what ApplyRemote returns for a batch of which some
// records were refused.
func errRefused(a *admission) error {
	n := 0
	for _, c := range a.refused {
		n += c
	}
	return fmt.Errorf("%d records over their writers' bounds: %w", n, peer.ErrRecordsRefused)
}
