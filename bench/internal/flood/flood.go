// Package flood is a library member that offers a daemon n junk books as
// fast as the sync protocol takes them: what a member run amok, or a large
// library arriving at once, costs the daemon that takes it. It joins with an
// invite code (a fresh identity, so a new device of the library), serves a
// synthetic store to the daemon's pull and makes each record when the
// protocol asks for it, so it holds no more than a batch.
//
// While the daemon takes the records, a meter (Meter, run in a child
// process so that the CPU spent making and encrypting records cannot delay
// the timing) asks it for single books it has stored, one every interval:
// the latency a reader app sees on a device being flooded.
package flood

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/peer"
)

// Config says what to flood and how to watch it.
type Config struct {
	Invite  string         // the target library's invite code (long form)
	Records uint64         // records to offer
	Socket  string         // the target's API socket: its book count, and the meter's GETs
	Meter   *MeterConfig   // nil: no GETs are timed
	Logger  *slog.Logger   // the peer layer's log; nil discards it
	Tick    func(Progress) // called every second, if not nil
}

// Progress is how far a flood is.
type Progress struct {
	Elapsed      time.Duration
	Sent, Stored uint64
}

// Result is what a flood measured.
type Result struct {
	Elapsed      time.Duration // until the last record was stored
	Sent, Stored uint64
	// Bounded: the target refused the rest, the flooding member being over
	// the bounds of what one device may write (its status names it).
	Bounded   bool
	GETs      []time.Duration // the meter's single-book GETs, in the order made
	GETErrors int
}

// ErrNoSync is returned by Run when the target has taken no record a
// minute after the flood connected: it does not speak this member's sync
// protocol (an older or newer build), or refuses it.
var ErrNoSync = errors.New("the target took no record within a minute")

// noSyncAfter is how long Run waits for a first record to be taken.
const noSyncAfter = time.Minute

// Run floods the daemon behind cfg.Socket until it has stored every record
// or ctx ends, which is an error.
func Run(ctx context.Context, cfg Config) (Result, error) {
	inv, err := peer.DecodeInvite(cfg.Invite)
	if err != nil {
		return Result{}, err
	}
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return Result{}, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cl := client.New(cfg.Socket)
	defer cl.Close()
	st, err := cl.Status(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("target status: %w", err)
	}
	baseline := st.Counts.Books
	src := newSource(cfg.Records)
	// The invite's one-time ticket makes the flooding member a member: its
	// hello to the target (the inviter) presents it, as a joining device's
	// does; without it the target gives it nothing and takes nothing.
	ticket := func(crdt.DeviceID) []byte { return inv.Ticket }
	node, err := peer.New(ctx, peer.Config{Identity: key, Library: inv.Library, Name: "flood", Store: src, Logger: logger, Ticket: ticket})
	if err != nil {
		return Result{}, err
	}
	defer node.Close()
	src.self = node.Device()
	if err := node.Connect(ctx, inv.PeerAddrs()); err != nil {
		return Result{}, fmt.Errorf("connect to the target: %w", err)
	}
	var m *meter
	if cfg.Meter != nil {
		if m, err = startMeter(*cfg.Meter); err != nil {
			return Result{}, err
		}
	}
	res, err := watch(ctx, cfg, node, cl, baseline, m)
	if m != nil {
		res.GETs, res.GETErrors = m.stop()
	}
	return res, err
}

// boundedAfter is how long the target's count must stay still, while its
// status names the flooding member as over its bounds, for the flood to
// be over.
const boundedAfter = 3 * time.Second

// watch reads the target's book count every second until it has every
// record, or refuses the rest, telling the meter how many it has.
func watch(ctx context.Context, cfg Config, node *peer.Node, cl *client.Client, baseline int, m *meter) (Result, error) {
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var res Result
	grew := start
	for res.Stored < cfg.Records {
		select {
		case <-ctx.Done():
			res.Elapsed = time.Since(start)
			return res, fmt.Errorf("the target stored %d of %d records: %w", res.Stored, cfg.Records, ctx.Err())
		case <-tick.C:
		}
		res.Sent = node.Stats().RecordsSent
		st, err := cl.Status(ctx)
		if err != nil {
			return res, fmt.Errorf("target status: %w", err)
		}
		if stored := uint64(max(st.Counts.Books-baseline, 0)); stored != res.Stored {
			res.Stored, grew = stored, time.Now()
		}
		named := false
		for _, w := range st.BoundsWarnings {
			named = named || w.Device == node.Device().String()
		}
		if named && time.Since(grew) >= boundedAfter {
			res.Elapsed, res.Bounded = grew.Sub(start), true
			return res, nil
		}
		if res.Sent == 0 && res.Stored == 0 && time.Since(start) > noSyncAfter {
			return res, ErrNoSync
		}
		if m != nil {
			m.setStored(res.Stored)
		}
		if cfg.Tick != nil {
			cfg.Tick(Progress{Elapsed: time.Since(start), Sent: res.Sent, Stored: res.Stored})
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// source is the flooding member's store: n records generated on demand,
// each a new book with a position and a title, stamped now.
type source struct {
	n     uint64
	epoch uint64
	self  crdt.DeviceID
}

func newSource(n uint64) *source { return &source{n: n, epoch: rand.Uint64() | 1} }

func (s *source) Epoch() uint64 { return s.epoch }

func (s *source) Since(ctx context.Context, after uint64, limit int, fn func(uint64, []byte) error) error {
	for seq := after + 1; seq <= s.n && seq <= after+uint64(limit); seq++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := s.record(seq)
		if err != nil {
			return err
		}
		if err := fn(seq, data); err != nil {
			return err
		}
	}
	return nil
}

func (s *source) record(seq uint64) ([]byte, error) {
	key, err := crdt.ParseBookKey(KeyOf(seq))
	if err != nil {
		return nil, err
	}
	at := crdt.Timestamp{Wall: uint64(time.Now().UnixMilli()), Device: s.self}
	e, err := crdt.SetPosition(key, at, seq, 0.5)
	if err != nil {
		return nil, err
	}
	t, err := crdt.SetTitle(key, at, fmt.Sprintf("junk book %d", seq))
	if err != nil {
		return nil, err
	}
	e.Book.Merge(&t.Book)
	return e.Encode()
}

// KeyOf is the book key of record seq: the MD5 of its number.
func KeyOf(seq uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	sum := md5.Sum(b[:])
	return "md5:" + hex.EncodeToString(sum[:])
}

// Watch says everything is there at once and nothing ever changes.
func (s *source) Watch() (uint64, <-chan struct{}) { return s.n, nil }

func (s *source) Cursor(context.Context, crdt.DeviceID) (uint64, uint64, error) { return 0, 0, nil }

// SkipPast and the delivered mark have nothing to do: the source never
// goes back.
func (s *source) SkipPast(context.Context, uint64) error                        { return nil }
func (s *source) Delivered(crdt.DeviceID) uint64                                { return s.n }
func (s *source) MarkDelivered(context.Context, uint64, ...crdt.DeviceID) error { return nil }

// ApplyRemote drops what the target sends: the flood only takes.
func (s *source) ApplyRemote(context.Context, crdt.DeviceID, uint64, uint64, []crdt.Entry) error {
	return nil
}
