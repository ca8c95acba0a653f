package library

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/peer"
)

// warnLog keeps the warnings a library logs, and passes every record on.
type warnLog struct {
	slog.Handler
	mu    *sync.Mutex
	lines *[]string
}

func newWarnLog(next slog.Handler) *warnLog {
	return &warnLog{Handler: next, mu: new(sync.Mutex), lines: new([]string)}
}

func (w *warnLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		w.mu.Lock()
		*w.lines = append(*w.lines, b.String())
		w.mu.Unlock()
	}
	return w.Handler.Handle(ctx, r)
}

func (w *warnLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &warnLog{Handler: w.Handler.WithAttrs(as), mu: w.mu, lines: w.lines}
}

func (w *warnLog) WithGroup(name string) slog.Handler {
	return &warnLog{Handler: w.Handler.WithGroup(name), mu: w.mu, lines: w.lines}
}

// matching returns the lines that hold every one of words.
func (w *warnLog) matching(words ...string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
next:
	for _, l := range *w.lines {
		for _, word := range words {
			if !strings.Contains(l, word) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// writtenBy counts the records of l's store whose last writer is dev.
func writtenBy(t *testing.T, l *Library, dev crdt.DeviceID) int {
	t.Helper()
	n := 0
	for _, kind := range crdt.Kinds() {
		if err := l.store.Scan(ctxT(t), kind, func(e crdt.Entry) error {
			if writerOf(&e) == dev {
				n++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func floodKey(i int) crdt.BookKey {
	return crdt.MustParseBookKey(fmt.Sprintf("md5:%032x", 0xf100d000+i))
}

// victim opens V, a library whose bounds are b, whose warnings are kept
// in the returned log, and whose clock moves only by what is added to the
// returned offset.
func victim(t *testing.T, b Bounds) (*Library, *warnLog, *atomic.Int64) {
	t.Helper()
	offset := new(atomic.Int64)
	base := time.Now()
	logs := newWarnLog(testLogger(t).With("device", "V").Handler())
	v := openLibrary(t, "V", func(cfg *Config) {
		cfg.Now = func() time.Time { return base.Add(time.Duration(offset.Load())) }
		cfg.Bounds = b
		cfg.Logger = slog.New(logs)
	})
	return v, logs, offset
}

// A rogue member floods the library with records of its own (as a member
// whose daemon writes too much does). The victim takes its burst and no
// more, logs once and warns naming it, and keeps taking an honest member's
// writes meanwhile. The records refused are offered again, and taken, as
// the victim's clock lets the rogue's bucket refill: nothing is lost.
// Before the bounds, the victim took the whole flood at once.
func TestRogueFloodIsBounded(t *testing.T) {
	const (
		burst = 40
		flood = 100
	)
	v, logs, offset := victim(t, Bounds{Burst: burst, PerMinute: burst / 4, Total: 10 * flood, Retry: 50 * time.Millisecond})
	r, a := openLibrary(t, "R", nil), openLibrary(t, "A", nil)
	joinByCode(t, r, v)
	joinByCode(t, a, v)
	poll.Until(t, "V to hold R and A for members, and to sync with them", time.Minute, func() bool {
		return v.members.current(r.Self()) && v.members.current(a.Self()) && connected(v, r) && connected(v, a)
	})
	ctx := ctxT(t)
	before := writtenBy(t, v, r.Self())
	for i := range flood {
		mustDo(r.SetPosition(ctx, floodKey(i), uint64(i), 0.5, "flood"))(t)
	}
	honest := crdt.MustParseBookKey("md5:00000000000000000000000000000a11")
	mustDo(a.SetPosition(ctx, honest, 1, 0.01, "honest"))(t)
	poll.Until(t, "V to refuse the rest of the flood and take A's write", time.Minute, func() bool {
		return len(v.BoundsWarnings()) > 0 && hasBook(t, v, honest)
	})
	held := writtenBy(t, v, r.Self())
	if held > burst || held <= before {
		t.Fatalf("V holds %d records of R (%d before the flood), want more, and at most its burst %d", held, before, burst)
	}
	t.Logf("V holds %d records of R after the flood, %d before", held, before)
	ws := v.BoundsWarnings()
	if len(ws) != 1 || ws[0].Writer != r.Self() || ws[0].Name != "R" || ws[0].Reason != "rate" || !strings.Contains(ws[0].Message(), "R wrote more records per minute") {
		t.Fatalf("V's warnings %+v, want one naming R", ws)
	}
	if lines := logs.matching("refused records", r.Self().String(), "name=R"); len(lines) != 1 {
		t.Fatalf("V logged %d warnings of R's refused records, want one: %q", len(lines), lines)
	}
	if n := len(v.bounds.writers); n > 4 {
		t.Errorf("V keeps bounds of %d writers, for three members", n)
	}
	// A keeps syncing through V while R is held back.
	later := crdt.MustParseBookKey("md5:00000000000000000000000000000a12")
	mustDo(a.SetPosition(ctx, later, 2, 0.02, "honest, later"))(t)
	poll.Until(t, "V to take A's later write", time.Minute, func() bool { return hasBook(t, v, later) })

	// Time passes at V: the refused records are offered again and taken.
	all := writtenBy(t, r, r.Self())
	poll.Until(t, "V to take all of R's records as its bounds allow", 2*time.Minute, func() bool {
		offset.Add(int64(4 * time.Minute))
		return writtenBy(t, v, r.Self()) == all
	})
}

// A rogue member's records in a store never pass its total: the victim
// refuses the rest, and takes more of them as other devices write over
// those it holds (the total counts the records whose last writer it is).
func TestRogueTotalIsBounded(t *testing.T) {
	const total = 30
	v := openLibrary(t, "V", func(cfg *Config) {
		cfg.Bounds = Bounds{Burst: 1000, PerMinute: 1000, Total: total, Retry: 50 * time.Millisecond}
	})
	r, a := openLibrary(t, "R", nil), openLibrary(t, "A", nil)
	joinByCode(t, r, v)
	joinByCode(t, a, v)
	poll.Until(t, "V to count its store, hold R and A for members, and sync with them", time.Minute, func() bool {
		v.bounds.mu.Lock()
		counted := v.bounds.counted
		v.bounds.mu.Unlock()
		return counted && v.members.current(r.Self()) && v.members.current(a.Self()) && connected(v, r) && connected(v, a)
	})
	ctx := ctxT(t)
	const flood = 60
	for i := range flood {
		mustDo(r.SetPosition(ctx, floodKey(i), uint64(i), 0.5, "flood"))(t)
	}
	poll.Until(t, "V to refuse R past its total", time.Minute, func() bool {
		ws := v.BoundsWarnings()
		return len(ws) == 1 && ws[0].Writer == r.Self() && ws[0].Reason == "total"
	})
	if n := writtenBy(t, v, r.Self()); n != total {
		t.Fatalf("V holds %d records of R, want its total %d", n, total)
	}
	floodAt := func(l *Library) (keys []crdt.BookKey) {
		for i := range flood {
			if hasBook(t, l, floodKey(i)) {
				keys = append(keys, floodKey(i))
			}
		}
		return keys
	}
	held := floodAt(v)
	// A reads five of the flooded books V holds: they are A's now.
	poll.Until(t, "A to have the flooded books V holds", time.Minute, func() bool { return len(floodAt(a)) >= len(held) })
	for _, k := range held[:5] {
		mustDo(a.SetPosition(ctx, k, 1, 0.01, ""))(t)
	}
	poll.Until(t, "V to take five more of R's books, within its total", time.Minute, func() bool {
		return len(floodAt(v)) == len(held)+5
	})
	if n := writtenBy(t, v, r.Self()); n != total {
		t.Fatalf("V holds %d records of R, want its total %d", n, total)
	}
}

// A rogue member mints member records for devices it invents, and floods
// the library with records of its own and of each of them (a modified
// build stamps them with their ids). The victim counts the rogue and
// every device added through it as one unit: it takes one burst of all
// of them together, logs one line and shows one warning that names the
// rogue, and keeps taking an honest member's writes. What it refused is
// taken as the victim's clock lets the unit's bucket refill. Before the
// units, each invented device had a burst of its own, and the victim
// took a burst per device.
func TestRogueInventedDevicesShareOneBound(t *testing.T) {
	const (
		burst    = 40
		invented = 4
		flood    = 50 // per device: past the burst of each
	)
	v, logs, offset := victim(t, Bounds{Burst: burst, PerMinute: burst / 4, Total: 100 * flood, Retry: 50 * time.Millisecond})
	r, a := openLibrary(t, "R", nil), openLibrary(t, "A", nil)
	joinByCode(t, r, v)
	joinByCode(t, a, v)
	poll.Until(t, "V to hold R and A for members, know R's name, and sync with them", time.Minute, func() bool {
		return v.members.current(r.Self()) && v.members.current(a.Self()) && v.names.get(r.Self()) == "R" && connected(v, r) && connected(v, a)
	})
	ctx := ctxT(t)
	rogues := []crdt.DeviceID{r.Self()}
	for i := range invented {
		d := crdt.DeviceID(0xdead_0000 + i)
		if err := r.addMember(ctx, d, "invented"); err != nil {
			t.Fatal(err)
		}
		rogues = append(rogues, d)
	}
	poll.Until(t, "V to hold the invented devices for members", time.Minute, func() bool {
		for _, d := range rogues {
			if !v.members.current(d) {
				return false
			}
		}
		return true
	})
	heldOf := func(l *Library) (n int) {
		for _, d := range rogues {
			n += writtenBy(t, l, d)
		}
		return n
	}
	before := heldOf(v)
	for i := range flood {
		for j, d := range rogues {
			mustDo(r.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
				at.Device = d
				return crdt.SetPosition(floodKey(j*flood+i), at, uint64(i+1), 0.5)
			}))(t)
		}
	}
	honest := crdt.MustParseBookKey("md5:00000000000000000000000000000a11")
	mustDo(a.SetPosition(ctx, honest, 1, 0.01, "honest"))(t)
	poll.Until(t, "V to refuse the rest of the flood and take A's write", time.Minute, func() bool {
		return len(v.BoundsWarnings()) > 0 && hasBook(t, v, honest)
	})
	held := heldOf(v)
	t.Logf("V holds %d records of R and its %d devices after the flood, %d before", held, invented, before)
	if held > burst || held <= before {
		t.Fatalf("V holds %d records of R and the devices it added (%d before the flood), want more, and at most one burst %d", held, before, burst)
	}
	ws := v.BoundsWarnings()
	if len(ws) != 1 || ws[0].Bound != r.Self() || ws[0].BoundName != "R" || !slices.Contains(rogues, ws[0].Writer) {
		t.Fatalf("V's warnings %+v, want one, of R's unit", ws)
	}
	if lines := logs.matching("refused records", "bound_of="+r.Self().String()); len(lines) != 1 {
		t.Fatalf("V logged %d warnings of refused records of R's unit, want one: %q", len(lines), lines)
	}
	later := crdt.MustParseBookKey("md5:00000000000000000000000000000a12")
	mustDo(a.SetPosition(ctx, later, 2, 0.02, "honest, later"))(t)
	poll.Until(t, "V to take A's later write", time.Minute, func() bool { return hasBook(t, v, later) })

	// Time passes at V: the refused records are offered again and taken.
	all := heldOf(r)
	poll.Until(t, "V to take all of the unit's records as its bounds allow", 2*time.Minute, func() bool {
		offset.Add(int64(4 * time.Minute))
		return heldOf(v) == all
	})
}

// deletedRecord is the encoding of a deleted book: what a residue is.
func deletedRecord(t *testing.T, key crdt.BookKey, at crdt.Timestamp) []byte {
	t.Helper()
	e := mustDo(crdt.Delete(key, at))(t)
	return mustDo(e.Encode())(t)
}

// A rogue member hands over residues of collected books, stream after
// stream, with no book behind them (a residue comes without a cursor, and
// only says it is a deleted book). The victim takes its bound of residues
// from it and refuses the rest, logs one line naming it, and takes what it
// refused once the bound allows and it is handed over again. Before the
// bound, the victim took every one.
func TestResidueFloodIsBounded(t *testing.T) {
	const (
		bound   = 20
		streams = 3
		each    = 30
	)
	v, logs, offset := victim(t, Bounds{Residues: bound})
	r := openLibrary(t, "R", nil)
	joinByCode(t, r, v)
	poll.Until(t, "V to hold R for a member, know its name, and sync with it", time.Minute, func() bool {
		return v.members.current(r.Self()) && v.names.get(r.Self()) == "R" && connected(v, r) && connected(r, v)
	})
	ctx := ctxT(t)
	var records [streams][][]byte
	for s := range streams {
		for i := range each {
			records[s] = append(records[s], deletedRecord(t, floodKey(s*each+i), r.stamp()))
		}
	}
	held := func() (n int) {
		for i := range streams * each {
			if _, ok := mustDo2(v.store.Get(ctx, bookID(floodKey(i))))(t); ok {
				n++
			}
		}
		return n
	}
	node := r.net.current()
	for s := range streams {
		if err := node.SendResidues(ctx, v.Self(), records[s]); !errors.Is(err, peer.ErrResiduesRefused) {
			t.Fatalf("stream %d of %d residues, past a bound of %d: %v, want it refused", s, each, bound, err)
		}
	}
	n := held()
	t.Logf("V holds %d of the %d residues R handed over", n, streams*each)
	if n != bound {
		t.Fatalf("V holds %d of the residues R handed over, want its bound %d", n, bound)
	}
	if lines := logs.matching("refused residues", "device="+r.Self().String(), "name=R"); len(lines) != 1 {
		t.Fatalf("V logged %d warnings of R's refused residues, want one: %q", len(lines), lines)
	}
	var warned []BoundsWarning
	for _, w := range v.BoundsWarnings() {
		if w.Reason == residuesReason {
			warned = append(warned, w)
		}
	}
	if len(warned) != 1 || warned[0].Writer != r.Self() || warned[0].Name != "R" ||
		warned[0].Refused != streams*each-bound || !strings.Contains(warned[0].Message(), "handed over more residues") {
		t.Fatalf("V's status warnings of residues: %+v, want one naming R with %d refused", warned, streams*each-bound)
	}
	// An hour later at V, the bucket is full again: the first stream
	// handed again is taken whole, what V took of it before for free.
	offset.Add(int64(time.Hour))
	if err := node.SendResidues(ctx, v.Self(), records[0]); err != nil {
		t.Fatalf("the first stream handed again an hour later: %v", err)
	}
	if n := held(); n != each {
		t.Fatalf("V holds %d residues after the first stream was handed again, want all %d of it", n, each)
	}
}
