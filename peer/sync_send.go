package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// The send side of a sync stream: the handler of streams opened by pullers.
// After the hello it sends every record changed after the puller's cursor
// (all of them if the puller last saw another epoch of this store), in
// batches of at most maxBatchRecords records and about maxBatchBytes, and
// then waits on the store and sends each new change as it commits.

// maxServing bounds the sync streams served to one peer at a time.
const maxServing = 4

// errBatchFull stops a Since pass at the batch size limit.
var errBatchFull = errors.New("batch full")

// errEpochChanged ends a stream whose store was replaced under it; the
// puller reopens and starts over in the new epoch.
var errEpochChanged = errors.New("store epoch changed")

func (n *Node) handleSync(s network.Stream) {
	if !n.track() {
		s.Reset()
		return
	}
	defer n.wg.Done()
	remote := s.Conn().RemotePeer()
	n.mu.Lock()
	st := n.peer(remote)
	busy := st.serving >= maxServing
	if !busy {
		st.serving++
	}
	stale := st.pullConn
	n.mu.Unlock()
	if stale != nil && stale != s.Conn() && stale.Stat().Opened.Before(s.Conn().Stat().Opened) {
		// The peer pulls on a newer connection than ours: it gave the older
		// one up (typically after a partition that only its side noticed),
		// and our pull there would wait on a dead connection until keepalives
		// time out. Closing it makes our pull reopen on the live one. Only
		// the older connection is closed, so two connections dialled at the
		// same moment from both sides settle on one instead of both closing.
		n.log.Info("peer opened a sync stream on a newer connection; closing the older one", "peer", remote)
		stale.Close()
	}
	if busy {
		// A correct puller has one stream open; a few allow for streams of
		// a dead connection not yet noticed.
		var out bytes.Buffer
		if appendFrameV(&out, &wireFrame{Error: &wireError{Code: codeBusy, Message: "too many sync streams"}}, streamVersion(s)) == nil {
			n.writeFrame(s, out.Bytes())
		}
		s.Close()
		n.log.Warn("refused a sync stream: too many from this peer", "peer", remote)
		return
	}
	defer func() {
		n.mu.Lock()
		st.serving--
		n.mu.Unlock()
	}()
	refused, err := n.serve(s, func() { s.Reset() }, remote, streamVersion(s))
	if err == nil || n.ctx.Err() != nil || refused {
		// Closed, not reset: a reset would discard the Error frame unread.
		s.Close()
	} else {
		s.Reset()
	}
	if err == nil || n.ctx.Err() != nil {
		return
	}
	if isRefusal(err) {
		n.mu.Lock()
		st := n.peer(remote)
		st.lastErr = err.Error()
		info := n.info(st)
		n.mu.Unlock()
		n.log.Error("refused a sync stream from peer", "peer", remote, "device", DeviceIDOf(remote), "err", err)
		n.events.emit(Event{Kind: PeerRefused, Peer: info, Err: err})
		return
	}
	n.log.Log(n.ctx, logLevelFor(err), "sync stream to peer ended", "peer", remote, "device", DeviceIDOf(remote), "err", err)
}

// serve runs the send side of one stream of the given protocol version,
// from the puller's hello on; refused reports that it ended by sending the
// puller an Error frame. abort breaks the stream (a libp2p reset), which
// unblocks its reads and writes when the node closes.
func (n *Node) serve(s stream, abort func(), remote lpeer.ID, version uint64) (refused bool, err error) {
	ctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, abort)()

	s.SetDeadline(time.Now().Add(handshakeTimeout))
	fr := n.newFrameReader(s, version)
	body, err := fr.next()
	if err != nil {
		return false, fmt.Errorf("read hello: %w", err)
	}
	var out bytes.Buffer
	theirs, err := readHello(body, n.cfg.Library, remote)
	if err != nil {
		if appendFrameV(&out, errorFrame(err), version) == nil {
			n.writeFrame(s, out.Bytes())
		}
		return true, err
	}
	n.noteRegression(ctx, remote, theirs)
	epoch := n.store.Epoch()
	cursor := theirs.WantSeq
	if theirs.WantEpoch == epoch {
		if cursor, err = n.storeWentBack(ctx, remote, cursor); err != nil {
			return false, err
		}
	}
	last, _ := n.store.Watch()
	if theirs.WantEpoch != epoch || cursor > last {
		// A cursor into another epoch of this store (it was wiped): the
		// puller's position means nothing here, so send everything.
		cursor = 0
	}
	n.deliverMu.Lock()
	n.checked[DeviceIDOf(remote)] = true
	n.deliverMu.Unlock()
	mine := hello{
		Version: version, Library: n.cfg.Library.ID, Device: n.self, Name: n.cfg.Name,
		Epoch: epoch, Last: last, Wall: n.now(), From: cursor,
	}
	if err := appendFrameV(&out, &wireFrame{Hello: mine.wire()}, version); err != nil {
		return false, err
	}
	if err := n.writeFrame(s, out.Bytes()); err != nil {
		return false, fmt.Errorf("send hello: %w", err)
	}
	s.SetDeadline(time.Time{})
	// What the puller is known to have (version 4): the full marks of its
	// Start frame. Not what it sent us before this connection: a store can
	// be restored from an old copy under the same epoch, and only this
	// connection's echo set is sure to be of the store that is there now.
	have := map[crdt.DeviceID]mark{}
	if version >= 4 {
		// The puller may wait for another of its streams to catch up before
		// it says where to start: no deadline but the connection's.
		if cursor, err = readStart(fr, epoch, last, have); err != nil {
			return false, err
		}
	}

	n.mu.Lock()
	st := n.peer(remote)
	// The puller's cursor is its own word on how far it has merged us.
	st.theyPull, st.acked = true, cursor
	n.progressedLocked()
	n.mu.Unlock()
	acks := newStreamAcks(epoch, version, cursor)
	// The puller sends nothing more but acks, an Error frame or the end of
	// the stream; the last two end this side too.
	fo := newFanout()
	n.mu.Lock()
	st.fanout = fo
	n.mu.Unlock()
	if !n.spawn(func() { n.watchPuller(ctx, cancel, fr, st, acks, fo) }) {
		return false, nil
	}
	snd := sender{n: n, st: st, s: s, epoch: epoch, peerEpoch: theirs.Epoch, echo: &st.echo, have: have, acks: acks, version: version, fo: fo}
	var caught caughtState
	for {
		last, changed := n.store.Watch()
		if n.store.Epoch() != epoch {
			return false, errEpochChanged
		}
		if last > cursor && !(snd.held && snd.heldLast == last) {
			if cursor, err = snd.catchUp(ctx, cursor, last); err != nil {
				return false, err
			}
			snd.heldLast = last
			continue
		}
		if !snd.held {
			snd.pushing = true // caught up: what follows is pushed
		}
		var later <-chan time.Time
		switch {
		case snd.held:
			later = time.After(time.Until(snd.heldAt.Add(deferWindow)))
		case version >= 4:
			if later, err = snd.sayCaught(&caught, cursor); err != nil {
				return false, err
			}
		}
		select {
		case <-changed:
		case <-later:
			snd.held = false
		case <-fo.wake:
			snd.held = false
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// readStart reads a version 4 puller's Start frame: where to start (in
// epoch, our store's, at most last, what our hello said) and the puller's
// full marks, which it adds to have.
func readStart(fr *frameReader, epoch, last uint64, have map[crdt.DeviceID]mark) (uint64, error) {
	body, err := fr.next()
	if err != nil {
		return 0, fmt.Errorf("read start: %w", err)
	}
	f, err := decodeFrame(body)
	if err != nil {
		return 0, err
	}
	st := f.Start
	switch {
	case f.Error != nil:
		return 0, refusal(f.Error)
	case st == nil:
		return 0, protoErrorf("expected a start frame")
	case st.Epoch != epoch || st.Seq > last:
		return 0, protoErrorf("start at %d of epoch %d; our store is at %d of epoch %d", st.Seq, st.Epoch, last, epoch)
	case len(st.Have) > maxMarks:
		return 0, protoErrorf("start frame of %d marks", len(st.Have))
	}
	for _, m := range st.Have {
		if m.Epoch != 0 {
			have[crdt.DeviceID(m.Device)] = mark{m.Epoch, m.Seq}
		}
	}
	return st.Seq, nil
}

// A stream's first Caught frame goes out as soon as it has caught up: it
// is what a joining device waits for. Later ones only keep what pullers
// know fresh for a later join, and on a busy library one per change (with
// every device's cursor moving) would cost more than the changes: they wait
// until the stream has been idle for caughtIdle, and come at most every
// defaultCaughtEvery.
const (
	defaultCaughtEvery = 10 * time.Second
	caughtIdle         = time.Second
)

// caughtState is what a send stream last said in a Caught frame.
type caughtState struct {
	sent bool
	seq  uint64 // up to where
	ver  uint64 // the version of our knowledge it carried
	at   time.Time
}

// sayCaught sends a Caught frame for cursor, the end of what this stream
// has sent, if the store has nothing newer and the frame would say
// something new; or, when a later one is not yet due, returns a channel
// that fires when it is.
func (snd *sender) sayCaught(c *caughtState, cursor uint64) (<-chan time.Time, error) {
	n := snd.n
	// Our knowledge is read before we look at the store: what it says was
	// true of us before the moment our last sequence number is seen to be
	// cursor, and so of the puller, which has everything up to there.
	weak, full, ver := n.kn.since(c.ver, snd.st.device)
	// Of a device the puller pulls from itself it has its own cursor and
	// full marks, as good as ours: in a mesh, that is every device.
	weak, full = snd.fo.indirect(weak), snd.fo.indirect(full)
	if c.sent && c.seq == cursor && len(weak) == 0 && len(full) == 0 {
		c.ver = ver
		return nil, nil
	}
	every := n.cfg.caughtEvery
	if every == 0 {
		every = defaultCaughtEvery
	}
	if c.sent {
		wait := max(time.Until(c.at.Add(every)), time.Until(snd.lastBatch.Add(min(caughtIdle, every))))
		if wait > 0 {
			return time.After(wait), nil
		}
	}
	if last, _ := n.store.Watch(); last > cursor || n.store.Epoch() != snd.epoch {
		return nil, nil // not caught up after all: the caller goes on
	}
	snd.out.Reset()
	f := &wireFrame{Caught: &wireCaught{Epoch: snd.epoch, Seq: cursor, Cursors: weak, Full: full}}
	if err := appendFrameV(&snd.out, f, snd.version); err != nil {
		return nil, err
	}
	if err := n.writeFrame(snd.s, snd.out.Bytes()); err != nil {
		return nil, fmt.Errorf("send caught: %w", err)
	}
	*c = caughtState{sent: true, seq: cursor, ver: ver, at: time.Now()}
	return nil, nil
}

// sender streams batches on one sync stream.
type sender struct {
	n         *Node
	st        *peerState
	s         stream
	epoch     uint64 // of our store
	peerEpoch uint64 // of the puller's store, for echo suppression
	echo      *echoSet
	have      map[crdt.DeviceID]mark // full marks of the puller
	acks      *streamAcks
	version   uint64 // of the stream
	out       bytes.Buffer
	lastBatch time.Time // when the last batch was sent
	fo        *fanout   // what the puller pulls from itself (fanout.go)
	held      bool      // the last catchUp held records (or a cursor advance) back
	heldLast  uint64    // the store's last sequence number it saw then
	heldAt    time.Time // since when something is held back
	pushing   bool      // the first catch-up is done
}

// catchUp sends everything after cursor, up to at least last (the store's
// last sequence number before the caller looked), and returns the new
// cursor. On a version 4 stream with a small backlog it may hold records
// back (fanout.go): it then returns a cursor before them, with snd.held set.
func (snd *sender) catchUp(ctx context.Context, cursor, last uint64) (uint64, error) {
	snd.held = false
	// A stream's first catch-up holds nothing back: after a partition heals
	// the puller's streams from the others may still be on connections
	// that died, and it waits for this catch-up before it starts the rest.
	hold := snd.version >= 4 && snd.pushing && last-cursor <= deferBacklog
	for {
		// Wait before reading the store, so that nothing is read ahead of
		// what the puller can take either.
		if err := snd.acks.waitRoom(ctx, func() { snd.n.stats.sendWaits.Add(1) }); err != nil {
			return cursor, err
		}
		p, err := snd.pass(ctx, cursor, hold)
		if err != nil {
			return cursor, err
		}
		seq := p.seq
		if p.heldFrom != 0 {
			if snd.heldAt.IsZero() {
				snd.heldAt = time.Now()
			}
			if p.later || p.full || time.Since(snd.heldAt) >= deferWindow {
				// Ask before sending past a held record; then send what the
				// puller lacks.
				if err := snd.ask(ctx, p.held); err != nil {
					return cursor, err
				}
				hold = false
				continue
			}
			seq = p.heldFrom - 1
		} else if !p.full && seq < last {
			// A pass that was not cut short has seen everything up to last:
			// move the cursor there even if the records there were
			// superseded (or the store numbers changes it does not list).
			seq = last
		}
		held := p.heldFrom != 0
		if hold && !held && !p.full && len(p.records) == 0 && seq > cursor {
			// Only a cursor to move: it can wait for the next record, or
			// for deferWindow.
			if snd.heldAt.IsZero() {
				snd.heldAt = time.Now()
			}
			if time.Since(snd.heldAt) < deferWindow {
				snd.held = true
				return cursor, nil
			}
		}
		if seq > cursor && !(held && len(p.records) == 0) {
			// Whole: the puller will have all of our state as of seq.
			whole := snd.version >= 4 && !p.full && !held && !p.dropped
			if whole {
				now, _ := snd.n.store.Watch()
				whole = now == seq && snd.n.store.Epoch() == snd.epoch
			}
			snd.out.Reset()
			f := &wireFrame{Batch: snd.wireBatch(cursor, seq, max(seq, last), p.records, p.gaps, whole)}
			if err := appendFrameV(&snd.out, f, snd.version); err != nil {
				return cursor, err
			}
			// Counted as sent before it is written: the puller may apply it
			// and acknowledge it before the write returns here.
			if err := snd.n.reserve(ctx, snd.st.device, seq); err != nil {
				return cursor, err
			}
			snd.acks.sentBatch(seq)
			if err := snd.n.writeFrame(snd.s, snd.out.Bytes()); err != nil {
				return cursor, fmt.Errorf("send batch: %w", err)
			}
			snd.lastBatch = time.Now()
			snd.n.stats.recordsSent.Add(uint64(len(p.records)))
			if len(p.records) == 0 {
				snd.n.stats.emptyBatches.Add(1)
			}
			for _, r := range p.records {
				snd.n.stats.recordBytes.Add(uint64(len(r)))
			}
			snd.n.stats.echoesSkipped.Add(p.skipped)
			snd.echo.drop(p.echoes)
			cursor = seq
			snd.n.mu.Lock()
			snd.st.recordsOut += uint64(len(p.records))
			snd.n.mu.Unlock()
		}
		if held {
			snd.held = true
			return cursor, nil
		}
		if !p.full {
			snd.heldAt, snd.pushing = time.Time{}, true
			if snd.out.Cap() > 64<<10 {
				snd.out = bytes.Buffer{} // an idle push stream keeps a small buffer
			}
			return cursor, nil
		}
	}
}

// wireBatch returns the batch of records (at gaps) in (cursor, seq], of a
// store whose last sequence number is last, in the stream's version.
func (snd *sender) wireBatch(cursor, seq, last uint64, records [][]byte, gaps []uint64, whole bool) *wireBatch {
	if snd.version < 5 {
		return &wireBatch{Epoch: snd.epoch, Seq: seq, Last: last, Records: records, Gaps: gaps, Whole: whole}
	}
	b := &wireBatch{Seq: seq, Records: records, Gaps: gaps, Whole: whole}
	if last > seq {
		b.Last = last
	}
	if trailingGaps(gaps, seq-cursor) {
		b.Gaps = nil
	}
	return b
}

// trailingGaps reports whether gaps put their records at the last
// sequence numbers of a batch that covers span numbers: all 1 but the
// first, which brings the first record to its place. A version 5 batch
// leaves such gaps out.
func trailingGaps(gaps []uint64, span uint64) bool {
	if len(gaps) == 0 || uint64(len(gaps)) > span || gaps[0] != span-uint64(len(gaps))+1 {
		return false
	}
	for _, g := range gaps[1:] {
		if g != 1 {
			return false
		}
	}
	return true
}

// storeWentBack checks a puller's cursor into our store's epoch against
// how far it can have pulled it (Delivered). A cursor past that is from a
// state of our store that is gone: it went back under the same epoch (its
// whole data directory restored from an old copy, journal and all, or its
// last changes before a power cut lost; store.Store.SkipPast). Then our
// changes since the copy may sit at sequence numbers the puller has
// passed, so this puller gets everything again, and the store numbers its
// later changes past the cursor, so that no other device that saw the
// lost state passes them either. It returns where to send from.
func (n *Node) storeWentBack(ctx context.Context, remote lpeer.ID, cursor uint64) (uint64, error) {
	known := n.Delivered(DeviceIDOf(remote))
	if cursor <= known {
		return cursor, nil
	}
	last, _ := n.store.Watch()
	n.log.Warn("a peer has pulled this device's store further than it now holds (restored from an old copy?); numbering later changes after its cursor and sending it everything",
		"peer", remote, "its_cursor", cursor, "our_last", last, "known", known)
	if err := n.store.SkipPast(ctx, cursor); err != nil {
		return 0, fmt.Errorf("number changes after a peer's cursor: %w", err)
	}
	return 0, nil
}

// Delivered returns how far device dev can have merged this device's
// store, if the store never went back: its delivered mark for dev
// (Store.Delivered). A cursor of dev's into this store's epoch past it is
// from a state of the store that is gone (storeWentBack), and says
// nothing of what dev holds of the store now.
func (n *Node) Delivered(dev crdt.DeviceID) uint64 { return n.store.Delivered(dev) }

// reserve raises dev's delivered mark before a batch up to seq is sent to
// it. It raises the marks of every device checked in this run with it, to
// the store's last change, so that one durable write covers every batch
// to every puller until the store changes again. That is no looser for
// the others: a checked device's cursor into the store only moves by what
// the store sends it, all of the store as it is now, and a store that goes
// back brings back its marks of then.
func (n *Node) reserve(ctx context.Context, dev crdt.DeviceID, seq uint64) error {
	if seq <= n.store.Delivered(dev) {
		return nil
	}
	n.deliverMu.Lock()
	defer n.deliverMu.Unlock()
	if seq <= n.store.Delivered(dev) {
		return nil
	}
	devs := make([]crdt.DeviceID, 0, len(n.checked)+1)
	devs = append(devs, dev)
	for d := range n.checked {
		if d != dev {
			devs = append(devs, d)
		}
	}
	last, _ := n.store.Watch()
	if err := n.store.MarkDelivered(ctx, max(seq, last), devs...); err != nil {
		return fmt.Errorf("record what is sent: %w", err)
	}
	return nil
}

// noteRegression checks a puller's hello against our cursor into its store.
// A hello says how far the puller's store goes; if that is behind our cursor
// into the same epoch, its store went back in time (restored from an old
// copy) and our cursor would skip everything it writes until its sequence
// passes the old one. So our pull from it starts over from 0. The puller's
// hello is the first thing it sends on a connection, before it merges
// anything from us, which is what makes its Last trustworthy here.
func (n *Node) noteRegression(ctx context.Context, remote lpeer.ID, theirs hello) {
	epoch, seq, err := n.store.Cursor(ctx, DeviceIDOf(remote))
	if err != nil || epoch != theirs.Epoch || theirs.Last >= seq {
		return
	}
	n.log.Warn("peer's store went back in time (restored from an old copy?); pulling everything from it again",
		"peer", remote, "its_last", theirs.Last, "our_cursor", seq)
	n.mu.Lock()
	st := n.peer(remote)
	st.resendAll = true
	restart := st.cancelPull
	n.mu.Unlock()
	if restart != nil {
		restart()
	}
}
