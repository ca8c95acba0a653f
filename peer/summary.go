package peer

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// The summary protocol gossips, between connected members, how far each
// device has merged everyone (crdt.Summary), which is what tombstone
// collection decides on (crdt/collect.go). It is a protocol of its own,
// beside sync, so that a summary reaches a peer without waiting behind a
// catch-up. One
// stream carries one message, and no answer:
//
//	4-byte big-endian length | crdt.EncodeSummaries
//
// What to send and what to do with what arrives is the daemon's
// (Config.Summaries, Config.OnSummaries): the node sends on every new
// connection and on demand (GossipSummaries).

// SummaryProtocolID is the libp2p protocol of summary gossip.
const SummaryProtocolID protocol.ID = "/danyue/summary/1.0.0"

// encodeSummaryMessage frames an encoded list of summaries.
func encodeSummaryMessage(list []crdt.Summary) ([]byte, error) {
	body, err := crdt.EncodeSummaries(list)
	if err != nil {
		return nil, fmt.Errorf("encode summaries: %w", err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...), nil
}

// readSummaryMessage reads one message from r, refusing a length over
// crdt.MaxEncodedSummaries before reading the body.
func readSummaryMessage(r io.Reader) ([]crdt.Summary, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > crdt.MaxEncodedSummaries {
		return nil, protoErrorf("summaries of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	list, err := crdt.DecodeSummaries(body)
	if err != nil {
		return nil, protoErrorf("summaries: %v", err)
	}
	return list, nil
}

// handleSummaries takes one message. A removed device never gets here (the
// gater refused its connection), and one that is not a member is ignored;
// the daemon checks again.
func (n *Node) handleSummaries(s network.Stream) {
	list, from, ok := takeMessage(n, s, "summaries", readSummaryMessage)
	if !ok {
		return
	}
	defer n.wg.Done()
	s.Close()
	if n.cfg.OnSummaries != nil && !n.refusedAsStranger(s.Conn().RemotePeer()) {
		n.cfg.OnSummaries(from, list)
	}
}

// takeMessage starts a handler of a stream that carries one message: it
// registers the handler with the node (the caller calls n.wg.Done when ok)
// and reads the message with read, within the handshake's time. On error it
// logs, resets the stream and reports !ok.
func takeMessage[T any](n *Node, s network.Stream, what string, read func(io.Reader) (T, error)) (msg T, from crdt.DeviceID, ok bool) {
	if !n.track() {
		s.Reset()
		return msg, 0, false
	}
	_ = s.SetDeadline(time.Now().Add(handshakeTimeout))
	p := s.Conn().RemotePeer()
	from = DeviceIDOf(p)
	msg, err := read(s)
	if err != nil {
		n.log.Warn(what+": unreadable message", "peer", p, "device", from, "err", err)
		s.Reset()
		n.wg.Done()
		return msg, from, false
	}
	return msg, from, true
}

// sendSummaries sends msg, a framed message, to peer p.
func (n *Node) sendSummaries(ctx context.Context, p lpeer.ID, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	s, err := n.host.NewStream(network.WithNoDial(ctx, "summaries"), p, SummaryProtocolID)
	if err != nil {
		return fmt.Errorf("open a summaries stream to %s: %w", p, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	// Close waits for the peer to accept the protocol, which a peer that
	// is itself stopping never does: a node that closes must not wait the
	// deadline out.
	defer context.AfterFunc(ctx, func() { s.Reset() })()
	if _, err := s.Write(msg); err != nil {
		s.Reset()
		return fmt.Errorf("send summaries to %s: %w", p, err)
	}
	return s.Close()
}

// Signatures (crdt.Summary.Sig) go only to a peer whose hello said it
// reads them (capSignedSummaries): an older build refuses a message that
// carries one, so it is sent the same summaries without, as is a peer
// whose hello has not come yet.

// summaryMessages is a list of summaries framed twice: with their
// signatures, and without.
type summaryMessages struct{ signed, plain []byte }

func encodeSummaryMessages(list []crdt.Summary) (summaryMessages, error) {
	signed, err := encodeSummaryMessage(list)
	if err != nil {
		return summaryMessages{}, err
	}
	out := summaryMessages{signed: signed, plain: signed}
	if slices.ContainsFunc(list, func(s crdt.Summary) bool { return s.Sig != nil }) {
		bare := make([]crdt.Summary, len(list))
		for i, s := range list {
			bare[i] = s
			bare[i].Sig, bare[i].Key = nil, nil
		}
		if out.plain, err = encodeSummaryMessage(bare); err != nil {
			return summaryMessages{}, err
		}
	}
	return out, nil
}

// noteCaps records the capability bits of peer p's hello.
func (n *Node) noteCaps(p lpeer.ID, caps uint64) {
	n.mu.Lock()
	n.peer(p).caps = caps
	n.mu.Unlock()
}

// summaryFor returns the message of m that peer p reads.
func (n *Node) summaryFor(p lpeer.ID, m summaryMessages) []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	if st := n.peers[p]; st != nil && st.caps&capSignedSummaries != 0 {
		return m.signed
	}
	return m.plain
}

// summariesOnConnect sends a newly connected peer what Config.Summaries
// gives.
func (n *Node) summariesOnConnect(p lpeer.ID) {
	if n.refusedAsStranger(p) {
		return
	}
	list := n.cfg.Summaries()
	if len(list) == 0 {
		return
	}
	msgs, err := encodeSummaryMessages(list)
	if err != nil {
		n.log.Warn("summaries: not sent", "err", err)
		return
	}
	if err := n.sendSummaries(n.ctx, p, n.summaryFor(p, msgs)); err != nil && n.ctx.Err() == nil {
		n.log.Debug("summaries: not delivered", "peer", p, "device", DeviceIDOf(p), "err", err)
	}
}

// GossipSummaries sends list to every member connected now (not to
// refused devices nor to devices that are not members) and returns once
// each was sent or failed, with how many took it.
func (n *Node) GossipSummaries(ctx context.Context, list []crdt.Summary) (int, error) {
	msgs, err := encodeSummaryMessages(list)
	if err != nil {
		return 0, err
	}
	var (
		mu   sync.Mutex
		sent int
		wg   sync.WaitGroup
	)
	for _, p := range n.host.Network().Peers() {
		if n.refusedAsStranger(p) {
			continue
		}
		wg.Go(func() {
			if err := n.sendSummaries(ctx, p, n.summaryFor(p, msgs)); err != nil {
				n.log.Debug("summaries: not delivered", "peer", p, "device", DeviceIDOf(p), "err", err)
				return
			}
			mu.Lock()
			sent++
			mu.Unlock()
		})
	}
	wg.Wait()
	return sent, nil
}

// PullAllFrom makes the next pull from device d start from 0, restarting a
// pull running now: d's store is behind what it said before (it was
// restored from an old copy, crdt.Summaries.Behind), so the cursor into it
// would skip what its sequence numbers now name. It reports whether d is a
// known peer.
func (n *Node) PullAllFrom(d crdt.DeviceID) bool {
	n.mu.Lock()
	var restart []context.CancelFunc
	found := false
	for _, st := range n.peers {
		if st.device != d {
			continue
		}
		found = true
		st.resendAll = true
		if st.cancelPull != nil {
			restart = append(restart, st.cancelPull)
		}
	}
	n.mu.Unlock()
	for _, c := range restart {
		c()
	}
	if found {
		n.log.Warn("peer's store is behind what it said before (restored from an old copy?); pulling everything from it again", "device", d)
	}
	return found
}
