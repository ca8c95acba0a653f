package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
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
	if !n.admitSync(s, remote) {
		return
	}
	refused, err := n.serve(s, func() { s.Reset() }, remote)
	// What was sent and never acknowledged is marked all the same.
	n.sends.settle()
	n.mu.Lock()
	n.peer(remote).serving--
	n.mu.Unlock()
	if err == nil || n.ctx.Err() != nil || refused {
		// Closed, not reset: a reset would discard the Error frame unread.
		s.Close()
	} else {
		s.Reset()
	}
	if err == nil || n.ctx.Err() != nil {
		return
	}
	if errors.Is(err, ErrNotMember) {
		n.log.Info("refused a sync stream from a device that is not a member of the library", "peer", remote, "device", DeviceIDOf(remote), "err", err)
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

// admitSync counts a new send stream to remote, or refuses it (and closes
// it) when remote has maxServing open already. It also closes our pull's
// connection to remote when the new stream came on a newer one.
func (n *Node) admitSync(s network.Stream, remote lpeer.ID) bool {
	n.mu.Lock()
	st := n.peer(remote)
	busy := st.serving >= maxServing
	if !busy {
		st.serving++
	}
	stale := st.pullConn
	moved := stale != nil && stale != s.Conn() && stale.Stat().Opened.Before(s.Conn().Stat().Opened)
	st.pullMoved = st.pullMoved || moved
	n.mu.Unlock()
	if moved {
		// The peer pulls on a newer connection than ours: it gave the older
		// one up (typically after a partition that only its side noticed),
		// and our pull there would wait on a dead connection until keepalives
		// time out. Closing it makes our pull reopen on the live one. Only
		// the older connection is closed, so two connections dialled at the
		// same moment from both sides settle on one instead of both closing.
		n.log.Info("peer opened a sync stream on a newer connection; closing the older one", "peer", remote)
		stale.Close()
	}
	if !busy {
		return true
	}
	// A correct puller has one stream open; a few allow for streams of a
	// dead connection not yet noticed.
	var out bytes.Buffer
	if appendFrame(&out, &wireFrame{Error: &wireError{Code: codeBusy, Message: "too many sync streams"}}) == nil {
		n.writeFrame(s, out.Bytes())
	}
	s.Close()
	n.log.Warn("refused a sync stream: too many from this peer", "peer", remote)
	return false
}

// serve runs the send side of one stream, from the puller's hello on;
// refused reports that it ended by sending the puller an Error frame.
// abort breaks the stream (a libp2p reset), which unblocks its reads and
// writes when the node closes.
func (n *Node) serve(s stream, abort func(), remote lpeer.ID) (refused bool, err error) {
	ctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, abort)()
	fr := n.newFrameReader(s)
	snd, cursor, refused, err := n.greet(ctx, s, fr, remote)
	if err != nil {
		return refused, err
	}
	n.mu.Lock()
	// The puller's cursor is its own word on how far it has merged us.
	snd.st.theyPull, snd.st.acked = true, cursor
	snd.st.fanout = snd.fo
	n.noteSyncLocked(snd.st)
	n.progressedLocked()
	n.mu.Unlock()
	// The puller sends nothing more but acks, direct lists and answers, an
	// Error frame or the end of the stream; the last two end this side too.
	if !n.spawn(func() { n.watchPuller(ctx, cancel, fr, snd.st, snd.acks, snd.fo) }) {
		return false, nil
	}
	return false, snd.run(ctx, cursor)
}

// greet runs the opening of a send stream: the puller's hello, ours, and
// the puller's Start frame. It returns the stream's sender and the cursor
// its batches start after; refused reports that it refused the puller with
// an Error frame.
func (n *Node) greet(ctx context.Context, s stream, fr *frameReader, remote lpeer.ID) (_ *sender, cursor uint64, refused bool, err error) {
	s.SetDeadline(time.Now().Add(handshakeTimeout))
	body, err := fr.next()
	if err != nil {
		return nil, 0, false, fmt.Errorf("read hello: %w", err)
	}
	var out bytes.Buffer
	theirs, err := readHello(body, n.cfg.Library, remote)
	if err != nil {
		if appendFrame(&out, errorFrame(err)) == nil {
			n.writeFrame(s, out.Bytes())
		}
		return nil, 0, true, err
	}
	if err := n.admitPuller(ctx, remote, theirs); err != nil {
		detail := strings.TrimPrefix(err.Error(), ErrNotMember.Error()+": ")
		if appendFrame(&out, &wireFrame{Error: &wireError{Code: codeNotMember, Message: truncateText(detail, maxErrorMessage)}}) == nil {
			n.writeFrame(s, out.Bytes())
		}
		return nil, 0, true, err
	}
	n.noteCaps(remote, theirs.Caps)
	n.learnFrom(remote, theirs.Known)
	n.noteRegression(ctx, remote, theirs)
	epoch := n.store.Epoch()
	cursor = theirs.WantSeq
	if theirs.WantEpoch == epoch {
		if cursor, err = n.storeWentBack(ctx, remote, cursor); err != nil {
			return nil, 0, false, err
		}
	}
	last, _ := n.store.Watch()
	if theirs.WantEpoch != epoch || cursor > last {
		// A cursor into another epoch of this store (it was wiped): the
		// puller's position means nothing here, so send everything.
		cursor = 0
	}
	n.sends.check(DeviceIDOf(remote))
	mine := hello{
		Library: n.cfg.Library.ID, Device: n.self, Name: n.cfg.Name,
		Epoch: epoch, Last: last, Wall: n.now(), From: cursor, Caps: ourCaps,
		Known: n.shareKnown(), Run: n.run,
	}
	if err := appendFrame(&out, &wireFrame{Hello: mine.wire()}); err != nil {
		return nil, 0, false, err
	}
	if err := n.writeFrame(s, out.Bytes()); err != nil {
		return nil, 0, false, fmt.Errorf("send hello: %w", err)
	}
	s.SetDeadline(time.Time{})
	// What the puller is known to have: the full marks of its Start frame.
	// Not what it sent us before this connection: a store can be restored
	// from an old copy under the same epoch, and only this connection's
	// echo set is sure to be of the store that is there now. The puller may
	// wait for another of its streams to catch up before it says where to
	// start: no deadline but the connection's.
	have := map[crdt.DeviceID]mark{}
	if cursor, err = readStart(fr, epoch, last, have); err != nil {
		return nil, 0, false, err
	}
	n.mu.Lock()
	st := n.peer(remote)
	n.mu.Unlock()
	pokeAdmitsUs(st)
	snd := &sender{
		n: n, st: st, s: s, epoch: epoch, peerLineage: theirs.lineage(), echo: &st.echo, have: have,
		acks: newStreamAcks(cursor), fo: newFanout(), hold: relayHold{window: n.cfg.deferWindow},
	}
	return snd, cursor, false, nil
}

// readStart reads a puller's Start frame: where to start (in epoch, our
// store's, at most last, what our hello said) and the puller's full marks,
// which it adds to have.
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
		if m.Lineage != 0 {
			have[crdt.DeviceID(m.Device)] = mark{m.Lineage, m.Seq}
		}
	}
	return st.Seq, nil
}

// sender streams batches on one sync stream.
type sender struct {
	n           *Node
	st          *peerState
	s           stream
	epoch       uint64 // of our store
	peerLineage uint64 // the puller's, for echo suppression
	echo        *echoSet
	have        map[crdt.DeviceID]mark // full marks of the puller
	acks        *streamAcks
	fo          *fanout // what the puller pulls from itself (fanout.go)
	out         bytes.Buffer
	lastBatch   time.Time   // when the last batch was sent
	hold        relayHold   // relays held back (hold.go)
	caught      caughtState // what the last Caught frame said (caught.go)
	toGo        toGo        // records left to send in this catch-up (togo.go)
}

// run sends everything after cursor, and then each change as the store
// commits it, until the stream fails or ctx ends.
func (snd *sender) run(ctx context.Context, cursor uint64) error {
	n := snd.n
	n.mu.Lock()
	addrs := snd.st.caps&capAddrs != 0
	n.mu.Unlock()
	// The hello carried the book as it was: later addresses follow in
	// Addrs frames, to a puller that reads them.
	var book <-chan struct{}
	if addrs {
		book = n.book.watch()
	}
	for {
		last, changed := n.store.Watch()
		if n.store.Epoch() != snd.epoch {
			return errEpochChanged
		}
		if snd.hold.pending(cursor, last) {
			var err error
			if cursor, err = snd.catchUp(ctx, cursor, last); err != nil {
				return err
			}
			continue
		}
		// Nothing to look at: wait for the store, the end of a hold's
		// window or the next Caught frame, or the puller's direct list.
		var later <-chan time.Time
		if wait, held := snd.hold.idle(time.Now()); held {
			later = time.After(wait)
		} else {
			var err error
			if later, err = snd.sayCaught(cursor); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-later:
			snd.hold.wake()
		case <-snd.fo.wake:
			snd.hold.wake()
		case <-book:
			book = n.book.watch()
			if err := snd.sendAddrs(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// catchUp sends everything after cursor, up to at least last (the store's
// last sequence number before the caller looked), and returns the new
// cursor. It may hold records back (hold.go): it then returns a cursor
// before them, with snd.hold.held set.
func (snd *sender) catchUp(ctx context.Context, cursor, last uint64) (uint64, error) {
	holding := snd.hold.begin(cursor, last)
	snd.toGo.count(ctx, snd.n, cursor, last)
	for {
		// Wait before reading the store, so that nothing is read ahead of
		// what the puller can take either.
		if err := snd.acks.waitRoom(ctx, func() { snd.n.stats.sendWaits.Add(1) }); err != nil {
			return cursor, err
		}
		p, err := snd.pass(ctx, cursor, holding)
		if err != nil {
			return cursor, err
		}
		s := snd.hold.next(p.view(), cursor, last, holding, time.Now())
		if s.ask {
			// Ask before sending past a held record; then send what the
			// puller lacks.
			if err := snd.ask(ctx, p.held); err != nil {
				return cursor, err
			}
			holding = false
			continue
		}
		if s.send {
			if err := snd.sendBatch(cursor, s.seq, last, &p, s.whole); err != nil {
				return cursor, err
			}
			cursor = s.seq
		}
		if s.done {
			if !snd.hold.held && snd.out.Cap() > 64<<10 {
				snd.out = bytes.Buffer{} // an idle push stream keeps a small buffer
			}
			return cursor, nil
		}
	}
}

// sendBatch sends the records of p as the batch (cursor, seq] of a store
// whose last sequence number is last; whole, if the store has nothing
// newer than seq, marks it so.
func (snd *sender) sendBatch(cursor, seq, last uint64, p *passResult, whole bool) error {
	n := snd.n
	if whole {
		now, _ := n.store.Watch()
		whole = now == seq && n.store.Epoch() == snd.epoch
	}
	snd.out.Reset()
	b := newBatch(cursor, seq, max(seq, last), p.records, p.gaps, whole)
	b.Left = snd.toGo.sent(len(p.records))
	if err := appendFrame(&snd.out, &wireFrame{Batch: b}); err != nil {
		return err
	}
	// Counted as sent before it is written: the puller may apply it and
	// acknowledge it, and whoever watches its store see it, before the
	// write returns here. A write that fails ends the stream.
	n.sends.note(snd.st.device, seq)
	snd.acks.sentBatch(seq)
	n.stats.batchSent(p)
	n.mu.Lock()
	snd.st.recordsOut += uint64(len(p.records))
	n.noteSyncLocked(snd.st)
	n.mu.Unlock()
	if err := n.writeFrame(snd.s, snd.out.Bytes()); err != nil {
		return fmt.Errorf("send batch: %w", err)
	}
	snd.lastBatch = time.Now()
	snd.echo.drop(p.echoes)
	return nil
}

// newBatch returns the batch of records (at gaps) in (cursor, seq], of a
// store whose last sequence number is last, without what the stream fixes.
func newBatch(cursor, seq, last uint64, records [][]byte, gaps []uint64, whole bool) *wireBatch {
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
// first, which brings the first record to its place. A batch leaves such
// gaps out.
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
