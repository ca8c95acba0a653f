package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multistream"
)

// The pull side of a sync stream. Each side of a connection pulls from the
// other on a stream it opens: it says where it is (hello with its cursor),
// and from then on only reads batches and applies each, whole or not at all,
// together with the cursor advance.

// pullLoop pulls from st for as long as ctx (the connection) lives,
// reopening the stream with backoff when it breaks. A refusal (protocol,
// library) ends it until the next connection; one as not a member waits
// until st pulls from us, or the backoff passes (members.go).
func (n *Node) pullLoop(ctx context.Context, st *peerState) {
	notMember := false // the peer refused us as not a member, and said so
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err := n.pull(ctx, st)
		if ctx.Err() != nil {
			return
		}
		n.mu.Lock()
		st.lastErr = err.Error()
		info := n.info(st)
		moved := st.pullMoved
		st.pullMoved = false
		n.mu.Unlock()
		if moved {
			// Not a failure: the peer came back on a newer connection (a
			// device that changed networks), where the pull goes on.
			n.log.Debug("pulling again from peer on its newer connection", "peer", st.id, "device", st.device)
			attempt = -1
			continue
		}
		if errors.Is(err, errReoffer) {
			n.log.Info("pulling again from peer: some records it sent were refused, and may be taken now", "peer", st.id, "device", st.device)
			attempt = -1
			continue
		}
		if errors.Is(err, errSyncWithdrawn) {
			// Expected after every forget and leave, and as a peer stops:
			// not a refusal worth an ERROR, and not a version mismatch.
			n.log.Info("peer stopped serving sync on this connection; syncing again when it reconnects", "peer", st.id, "device", st.device, "why", "it is shutting down, or it moved to the library's new secret (a device was forgotten or left) and this connection is on the old one")
			return
		}
		if errors.Is(err, ErrNotMember) {
			// Not yet, perhaps: the peer may make this device a member (an
			// inviter writing a pairing's addition), and pulls from it once
			// it has.
			if !notMember {
				n.log.Warn("the peer does not hold this device for a member of the library; waiting until it does", "peer", st.id, "device", st.device, "err", err)
				n.events.emit(Event{Kind: PeerRefused, Peer: info, Err: err})
			}
			notMember = true
			t := time.NewTimer(pullBackoff.delay(attempt))
			select {
			case <-t.C:
			case <-st.admitsUs:
				t.Stop()
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		if isRefusal(err) {
			n.log.Error("cannot sync with peer", "peer", st.id, "device", st.device, "err", err)
			n.events.emit(Event{Kind: PeerRefused, Peer: info, Err: err})
			return
		}
		level := logLevelFor(err)
		n.log.Log(ctx, level, "sync stream from peer ended, reopening with backoff", "peer", st.id, "device", st.device, "err", err)
		if time.Since(start) >= stableConn {
			attempt = 0
		}
		t := time.NewTimer(pullBackoff.delay(attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// errSyncWithdrawn is a sync stream the peer declined although it speaks
// no other sync protocol: its node no longer serves sync on the connection
// (it is closing, or it is the restricted node of a superseded secret,
// which serves only rekey, see Config.Restricted).
var errSyncWithdrawn = errors.New("open sync stream: the peer no longer serves sync on this connection")

// otherSyncProtocol returns a danyue sync protocol other than ours that
// peer p announced (libp2p's identify, done before a stream opens), "" if
// none: a peer that announces one is a build of another protocol, one that
// announces none has only stopped serving ours.
func (n *Node) otherSyncProtocol(p lpeer.ID) protocol.ID {
	protos, err := n.host.Peerstore().GetProtocols(p)
	if err != nil {
		return ""
	}
	for _, id := range protos {
		if id != ProtocolID && strings.HasPrefix(string(id), "/danyue/sync/") {
			return id
		}
	}
	return ""
}

// pull runs one sync stream from st until it fails or ctx ends: it opens
// the stream on the connection, then runs the protocol on it (puller).
func (n *Node) pull(ctx context.Context, st *peerState) error {
	// The stream's own context, so that noteRegression can restart it.
	ctx, cancelPull := context.WithCancel(ctx)
	defer cancelPull()
	hctx, cancel := context.WithTimeout(network.WithNoDial(ctx, "sync runs on existing connections"), handshakeTimeout)
	s, err := n.host.NewStream(hctx, st.id, ProtocolID)
	cancel()
	if errors.Is(err, multistream.ErrNotSupported[protocol.ID]{}) {
		if other := n.otherSyncProtocol(st.id); other != "" {
			return fmt.Errorf("open sync stream: the peer does not speak %s but %s (a build of another sync protocol): %w", ProtocolID, other, err)
		}
		return fmt.Errorf("%w: %w", errSyncWithdrawn, err)
	}
	if err != nil {
		return fmt.Errorf("open sync stream: %w", err)
	}
	n.mu.Lock()
	st.pullConn, st.cancelPull = s.Conn(), cancelPull
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		if st.pullConn == s.Conn() {
			st.pullConn, st.cancelPull = nil, nil
		}
		n.mu.Unlock()
	}()
	p := &puller{n: n, st: st, s: s, cancel: cancelPull}
	defer p.releaseGate(false)
	defer p.refusal.stop()
	defer func() {
		if p.graceful {
			s.Close() // a reset would discard our Error frame unread
		} else {
			s.Reset()
		}
	}()
	// Reading blocks until the peer sends; the connection ending or the node
	// closing must unblock it.
	defer context.AfterFunc(ctx, func() { s.Reset() })()
	err = p.run(ctx)
	if p.refusal.retried.Load() {
		return fmt.Errorf("%w: %w", errReoffer, err)
	}
	return err
}

// stream is what the sync protocol needs of a stream: bytes both ways and
// deadlines. A libp2p stream is one; so is an end of net.Pipe, on which
// tests run the protocol without a network.
type stream interface {
	io.ReadWriter
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
	SetDeadline(time.Time) error
}

// puller is the pull side of one sync stream, from the first hello to the
// stream's end.
type puller struct {
	n  *Node
	st *peerState
	s  stream

	fr       *frameReader
	mu       sync.Mutex // serialises writes: acks and answers, and direct lists (fanout.go)
	out      bytes.Buffer
	dirList  []wireMark // the direct list last sent, and its version
	dirVer   uint64
	theirs   hello              // the sender's hello
	cursor   uint64             // the sender's last sequence merged here
	graceful bool               // an Error frame was sent: close, do not reset
	release  func(caught bool)  // gives the catch-up gate back, if this stream holds it
	cancel   context.CancelFunc // ends the stream (it reopens)
	refusal  streamRefusal      // records were refused: the stream claims nothing (refused.go)
}

// run says hello and then applies batches until the stream fails.
func (p *puller) run(ctx context.Context) error {
	if err := p.handshake(ctx); err != nil {
		return err
	}
	// Senders hold back relays of what this device pulls from their source
	// directly (fanout.go).
	defer p.n.dir.add(p.st.device, p.theirs.lineage())()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() { defer close(done); p.announceDirect(ctx) }()
	for {
		if err := p.receive(ctx); err != nil {
			return err
		}
	}
}

// handshake sends this device's hello (with the cursor it resumes from),
// reads the sender's and checks where the sender resumes.
func (p *puller) handshake(ctx context.Context) error {
	n, st := p.n, p.st
	n.mu.Lock()
	resendAll := st.resendAll
	n.mu.Unlock()
	epoch, cursor, err := n.store.Cursor(ctx, st.device)
	if err != nil {
		return fmt.Errorf("read cursor: %w", err)
	}
	if resendAll {
		cursor = 0
	}
	last, _ := n.store.Watch()
	mine := hello{
		Library: n.cfg.Library.ID, Device: n.self, Name: n.cfg.Name,
		Epoch: n.store.Epoch(), Last: last, Wall: n.now(), WantEpoch: epoch, WantSeq: cursor, Caps: ourCaps,
		Known: n.shareKnown(), Run: n.run,
	}
	if n.cfg.Ticket != nil {
		mine.Ticket = n.cfg.Ticket(st.device)
	}
	p.s.SetDeadline(time.Now().Add(handshakeTimeout))
	sent := n.now()
	if err := p.send(&wireFrame{Hello: mine.wire()}); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	p.fr = n.newFrameReader(p.s)
	body, err := p.fr.next()
	if err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	theirs, err := readHello(body, n.cfg.Library, st.id)
	received := n.now()
	if err != nil {
		if !isRefusalFrame(body) {
			// Tell the sender why, so both logs say it.
			p.graceful = p.send(errorFrame(err)) == nil
		}
		return err
	}
	p.s.SetDeadline(time.Time{})
	n.noteCaps(st.id, theirs.Caps)
	n.learnFrom(st.id, theirs.Known)
	switch {
	case theirs.Epoch != epoch && theirs.From != 0:
		return protoErrorf("sender resumes a new epoch %d from %d", theirs.Epoch, theirs.From)
	case theirs.Epoch == epoch && theirs.From > cursor:
		return protoErrorf("sender resumes from %d, past our cursor %d", theirs.From, cursor)
	}
	// Usually our cursor; 0 for a wiped sender (new epoch) or one that
	// cannot resume from it: its store went back under the same epoch
	// (storeWentBack), and nothing we hold of it, nor any cursor another
	// stream hands over, says what of its store we have.
	p.theirs, p.cursor = theirs, theirs.From
	if theirs.Epoch == epoch && theirs.From < cursor {
		resendAll = true
	}
	if resendAll {
		n.mu.Lock()
		st.resendAll = false
		n.mu.Unlock()
	}
	n.helloDone(st, theirs, clockOffset(theirs.Wall, sent, received), p.cursor)
	return p.start(ctx, resendAll)
}

// start decides where the sender's batches start and says so, with this
// device's full marks. A large backlog waits for the catch-up
// gate first: while another stream catches up, the cursors it hands over
// may make this one's backlog small.
func (p *puller) start(ctx context.Context, resendAll bool) error {
	n, st, theirs := p.n, p.st, p.theirs
	from := uint64(0)
	read := func() error {
		if resendAll {
			return nil
		}
		epoch, cursor, err := n.store.Cursor(ctx, st.device)
		if err != nil {
			return fmt.Errorf("read cursor: %w", err)
		}
		if epoch == theirs.Epoch && cursor <= theirs.Last {
			from = cursor
		}
		// A cursor handed over may be past the sender's hello: its store
		// grew while this stream waited at the gate. Everything up to its
		// hello's last is then merged here all the same.
		if m, ok := n.kn.cursor(st.device); ok && m.lineage == theirs.lineage() {
			from = max(from, min(m.seq, theirs.Last))
		}
		return nil
	}
	if err := read(); err != nil {
		return err
	}
	backlog, waitStart := theirs.Last-from, time.Now()
	if backlog > gateBacklog {
		release, err := n.gate.acquire(ctx, st)
		if err != nil {
			return err
		}
		p.release = release
		if err := read(); err != nil {
			return err
		}
	}
	n.log.Debug("pulling from peer", "peer", st.id, "device", st.device, "from", from, "backlog", backlog,
		"their_last", theirs.Last, "waited", time.Since(waitStart).Round(time.Millisecond))
	have := n.kn.fullMarks(st.device)
	if err := p.send(&wireFrame{Start: &wireStart{Epoch: theirs.Epoch, Seq: from, Have: have}}); err != nil {
		return fmt.Errorf("send start: %w", err)
	}
	p.cursor = from
	n.kn.noteCursor(st.device, mark{theirs.lineage(), from})
	n.mu.Lock()
	st.merged = from
	st.toGo = theirs.Last - from // until the first batch says better (togo.go)
	n.noteSyncLocked(st)
	n.progressedLocked()
	n.mu.Unlock()
	return nil
}

// releaseGate gives the catch-up gate back if this stream holds it: for
// good once caught up, else for the next stream of the same peer to take.
func (p *puller) releaseGate(caught bool) {
	if p.release != nil {
		p.release(caught)
		p.release = nil
	}
}

// caught takes a Caught frame: this device now includes the sender's whole
// state of the moment its last sequence number was c.Seq, and with it what
// the sender knew of other devices then.
func (p *puller) caught(c *wireCaught) error {
	n, st := p.n, p.st
	switch {
	case c.Epoch != p.theirs.Epoch || c.Seq != p.cursor:
		return protoErrorf("caught up to %d of epoch %d, but the stream is at %d of epoch %d", c.Seq, c.Epoch, p.cursor, p.theirs.Epoch)
	case len(c.Cursors) > maxMarks || len(c.Full) > maxMarks:
		return protoErrorf("caught frame of %d cursors and %d full marks", len(c.Cursors), len(c.Full))
	}
	if p.refusal.on {
		// It has not merged everything the sender had: it claims nothing.
		p.releaseGate(true)
		return nil
	}
	n.mu.Lock()
	st.refusals = 0
	n.mu.Unlock()
	n.kn.noteFull(st.device, mark{lineage(c.Epoch, p.theirs.Run), c.Seq})
	for _, m := range c.Full {
		if dev := crdt.DeviceID(m.Device); dev != n.self && dev != st.device {
			n.kn.noteFull(dev, mark{m.Lineage, m.Seq})
		}
	}
	for _, m := range c.Cursors {
		if dev := crdt.DeviceID(m.Device); dev != n.self && dev != st.device {
			n.kn.noteCursor(dev, mark{m.Lineage, m.Seq})
		}
	}
	if p.release != nil {
		n.log.Debug("caught up with peer", "peer", st.id, "device", st.device, "seq", c.Seq, "cursors", len(c.Cursors), "full", len(c.Full))
	}
	p.releaseGate(true)
	return nil
}

// receive reads one batch, checks that it continues the stream, applies it
// whole together with the cursor advance, and acknowledges it.
func (p *puller) receive(ctx context.Context) error {
	n, st := p.n, p.st
	body, err := p.fr.next()
	if err != nil {
		return fmt.Errorf("read batch: %w", err)
	}
	f, err := decodeFrame(body)
	if err != nil {
		return err
	}
	if f.Caught != nil {
		return p.caught(f.Caught)
	}
	if f.Ask != nil {
		return p.answer(f.Ask)
	}
	if f.Addrs != nil {
		n.learnFrom(st.id, f.Addrs)
		return nil
	}
	b, err := p.batch(f)
	if err != nil {
		return err
	}
	entries, err := decodeRecords(b.Records)
	if err != nil {
		return err
	}
	// Before the merge: once applied, the records can be streamed back at
	// any moment, and the sender to this peer must already know them.
	epoch := p.theirs.Epoch
	st.echo.add(p.theirs.lineage(), b.Records)
	n.prov.add(st.device, p.theirs.lineage(), p.recordSeqs(b), b.Records, entries)
	n.stats.recordsReceived.Add(uint64(len(entries)))
	// A stream that refused records keeps its cursor (refused.go).
	to := b.Seq
	if p.refusal.on {
		to = p.refusal.at
	}
	switch err := n.store.ApplyRemote(ctx, st.device, epoch, to, entries); {
	case errors.Is(err, ErrRecordsRefused):
		if !p.refusal.on {
			p.refused(p.cursor)
		}
	case err != nil:
		return fmt.Errorf("apply batch: %w", err)
	}
	p.cursor = b.Seq
	if p.release != nil {
		n.gate.progress(st)
	}
	if !p.refusal.on {
		n.kn.noteCursor(st.device, mark{p.theirs.lineage(), b.Seq})
		if b.Whole {
			n.kn.noteWhole(st.device, mark{p.theirs.lineage(), b.Seq})
		}
	}
	n.mu.Lock()
	st.merged, st.remoteLast, st.lastSeen = p.cursor, b.Last, n.now()
	st.recordsIn += uint64(len(entries))
	noteToGoLocked(st, b)
	n.noteSyncLocked(st)
	n.progressedLocked()
	n.mu.Unlock()
	// Tells the sender how far it is delivered (SyncOnce waits on it):
	// what was applied above is durable.
	if err := p.send(&wireFrame{Ack: &wireAck{Seq: b.Seq}}); err != nil {
		return fmt.Errorf("send ack: %w", err)
	}
	return nil
}

// batch checks that a frame is the next batch of the stream, and fills in
// what a batch leaves out because the stream fixes it: its Last when it is
// its Seq, and its Gaps when its records are at the last sequence numbers
// up to its Seq. A batch that says its Last anyway is refused.
func (p *puller) batch(f *wireFrame) (*wireBatch, error) {
	if f.Error != nil {
		return nil, refusal(f.Error)
	}
	b := f.Batch
	switch {
	case b == nil:
		return nil, protoErrorf("expected a batch")
	case b.Seq <= p.cursor:
		return nil, protoErrorf("batch up to %d does not advance the cursor %d", b.Seq, p.cursor)
	case b.Last != 0 && b.Last <= b.Seq:
		return nil, protoErrorf("batch up to %d says its sender's last is %d", b.Seq, b.Last)
	case len(b.Gaps) == 0 && uint64(len(b.Records)) > b.Seq-p.cursor:
		return nil, protoErrorf("batch of %d records in (%d, %d]", len(b.Records), p.cursor, b.Seq)
	}
	b.Last = max(b.Last, b.Seq)
	if len(b.Gaps) == 0 && len(b.Records) > 0 {
		b.Gaps = make([]uint64, len(b.Records))
		for i := range b.Gaps {
			b.Gaps[i] = 1
		}
		b.Gaps[0] = b.Seq - p.cursor - uint64(len(b.Records)) + 1
	}
	if len(b.Gaps) != len(b.Records) {
		return nil, protoErrorf("%d record sequence numbers for %d records", len(b.Gaps), len(b.Records))
	}
	seq := p.cursor
	for _, g := range b.Gaps {
		if g == 0 || g > b.Seq-seq {
			return nil, protoErrorf("record sequence numbers do not rise within (%d, %d]", p.cursor, b.Seq)
		}
		seq += g
	}
	return b, nil
}

// recordSeqs returns the sequence number of each record of b, a checked
// batch.
func (p *puller) recordSeqs(b *wireBatch) func(i int) uint64 {
	seqs := make([]uint64, len(b.Gaps))
	seq := p.cursor
	for i, g := range b.Gaps {
		seq += g
		seqs[i] = seq
	}
	return func(i int) uint64 { return seqs[i] }
}

// send writes one frame.
func (p *puller) send(f *wireFrame) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sendLocked(f)
}

func (p *puller) sendLocked(f *wireFrame) error {
	p.out.Reset()
	if err := appendFrame(&p.out, f); err != nil {
		return err
	}
	return p.n.writeFrame(p.s, p.out.Bytes())
}

// decodeRecords decodes and validates every record of a batch, or none.
func decodeRecords(records [][]byte) ([]crdt.Entry, error) {
	entries := make([]crdt.Entry, len(records))
	for i, r := range records {
		e, err := crdt.Decode(r)
		if err != nil {
			return nil, protoErrorf("record %d of the batch: %w", i, err)
		}
		entries[i] = e
	}
	return entries, nil
}

// helloDone records what a completed hello told about st, and announces the
// peer once per connection.
func (n *Node) helloDone(st *peerState, h hello, offset time.Duration, cursor uint64) {
	n.mu.Lock()
	st.member = true
	startKeeper := n.keepLocked(st)
	st.name, st.clockOffset, st.clockKnown = h.Name, offset, true
	st.merged, st.remoteLast, st.lastSeen, st.lastErr = cursor, h.Last, n.now(), ""
	first := !st.announced && st.connected
	st.announced = st.announced || st.connected
	n.noteSyncLocked(st)
	n.progressedLocked()
	info := n.info(st)
	warn := info.ClockSkewed && !st.skewWarned
	st.skewWarned = info.ClockSkewed
	n.mu.Unlock()
	if startKeeper {
		n.spawn(func() { n.keep(st) })
	}
	if first {
		n.log.Info("peer connected", "peer", st.id, "device", st.device, "name", h.Name, "clock_offset", offset)
		n.events.emit(Event{Kind: PeerConnected, Peer: info})
	}
	if warn {
		n.log.Warn("peer clock is off", "peer", st.id, "device", st.device, "name", h.Name, "offset", offset)
		n.events.emit(Event{Kind: PeerClockSkewed, Peer: info})
	}
}

func isRefusalFrame(body []byte) bool {
	f, err := decodeFrame(body)
	return err == nil && f.Error != nil
}

// logLevelFor logs what a peer did wrong loudly and the ordinary end of a
// stream (the peer went away) quietly.
func logLevelFor(err error) slog.Level {
	switch {
	case errors.Is(err, ErrProtocol):
		return slog.LevelWarn
	case errors.Is(err, io.EOF), errors.Is(err, network.ErrReset), errors.Is(err, context.Canceled):
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
