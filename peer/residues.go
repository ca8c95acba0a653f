package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// What is left of a collected book (a residue: its deleted record, kept
// outside the records, crdt/collect.go) is not a record the sender's
// change sequence lists, so a device that pulls a store from the start (new, wiped, or
// never synced with it) would never get it. The daemon hands such a device
// the residues on a protocol of its own, beside sync (whose batches number
// every record by the sender's sequence, which a residue has not): one
// stream, a run of records, each
//
//	4-byte big-endian length | encoded book record (crdt.Encode)
//
// until the sender closes its side of the stream. Only deleted books are
// accepted (crdt.MayBeCollected), at most maxResidues of them. Once every
// residue is in its store the receiver answers one byte, residuesApplied,
// and closes; on anything else it resets the stream. The sender counts
// the residues handed over only on that byte: a receiver that could not
// take them (it was still admitting the sender, its store failed, the
// daemon refused some as over the sender's bound: ErrRecordsRefused) is
// handed them again, since nothing else would ever send it those deletes.

// ResidueProtocolID is the libp2p protocol that hands residues over.
const ResidueProtocolID protocol.ID = "/danyue/residues/1.0.0"

const (
	// maxResidues bounds the residues of one stream: far more than the
	// books a library deletes, a few megabytes at most.
	maxResidues = 1 << 16
	// residueTimeout bounds one stream, read or written.
	residueTimeout = time.Minute
	// residueChunk is how many residues OnResidues gets at a time: one
	// store batch.
	residueChunk = 512
	// residuesApplied is the receiver's answer once it took every residue.
	residuesApplied byte = 1
)

// ErrResiduesRefused is returned by SendResidues when the receiver did not
// confirm that it took the residues.
var ErrResiduesRefused = errors.New("residues not taken by the receiver")

// SendResidues sends records (encoded residues) to device d, if it is
// connected, and returns once d confirmed that it took them all.
func (n *Node) SendResidues(ctx context.Context, d crdt.DeviceID, records [][]byte) error {
	if len(records) > maxResidues {
		records = records[:maxResidues]
	}
	for _, p := range n.host.Network().Peers() {
		if DeviceIDOf(p) != d || n.refusedAsStranger(p) {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, residueTimeout)
		defer cancel()
		s, err := n.host.NewStream(network.WithNoDial(ctx, "residues"), p, ResidueProtocolID)
		if err != nil {
			return fmt.Errorf("open a residues stream to %s: %w", p, err)
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = s.SetDeadline(dl)
		}
		var hdr [4]byte
		for _, r := range records {
			binary.BigEndian.PutUint32(hdr[:], uint32(len(r)))
			if _, err := s.Write(hdr[:]); err != nil {
				s.Reset()
				return fmt.Errorf("send residues to %s: %w", p, err)
			}
			if _, err := s.Write(r); err != nil {
				s.Reset()
				return fmt.Errorf("send residues to %s: %w", p, err)
			}
		}
		if err := s.CloseWrite(); err != nil {
			s.Reset()
			return fmt.Errorf("send residues to %s: %w", p, err)
		}
		var ack [1]byte
		if _, err := io.ReadFull(s, ack[:]); err != nil || ack[0] != residuesApplied {
			s.Reset()
			return fmt.Errorf("send residues to %s: %w (%v)", p, ErrResiduesRefused, err)
		}
		return s.Close()
	}
	return fmt.Errorf("send residues to device %s: %w", d, ErrNotConnected)
}

// ErrNotConnected is returned for a device this node has no connection
// with.
var ErrNotConnected = errors.New("not connected")

// readResidue reads one record from r: io.EOF at a clean end.
func readResidue(r io.Reader) (crdt.Entry, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return crdt.Entry{}, err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size == 0 || size > crdt.MaxEncodedSize {
		return crdt.Entry{}, protoErrorf("residue of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return crdt.Entry{}, fmt.Errorf("read a residue: %w", io.ErrUnexpectedEOF)
	}
	e, err := crdt.Decode(body)
	if err != nil {
		return crdt.Entry{}, protoErrorf("residue: %v", err)
	}
	if !crdt.MayBeCollected(&e) {
		return crdt.Entry{}, protoErrorf("a record that is not a residue on the residues stream")
	}
	return e, nil
}

// handleResidues takes a run of residues and hands them to the daemon
// (Config.OnResidues) a store batch at a time. A removed device never gets
// here (the gater refused its connection); one that is not a member is
// refused.
func (n *Node) handleResidues(s network.Stream) {
	if !n.track() {
		s.Reset()
		return
	}
	defer n.wg.Done()
	_ = s.SetDeadline(time.Now().Add(residueTimeout))
	p := s.Conn().RemotePeer()
	from := DeviceIDOf(p)
	if !n.isMember(from) {
		n.log.Info("residues: refused from a device that is not a member", "peer", p, "device", from)
		s.Reset()
		return
	}
	var chunk []crdt.Entry
	flush := func() bool {
		if len(chunk) == 0 || n.cfg.OnResidues == nil {
			return true
		}
		if err := n.cfg.OnResidues(n.ctx, from, chunk); err != nil {
			level := slog.LevelWarn
			if errors.Is(err, ErrRecordsRefused) {
				// Over the sender's bound: the daemon says so, at most
				// once a minute, and the sender hands them over again.
				level = slog.LevelDebug
			}
			n.log.Log(n.ctx, level, "residues: not applied", "peer", p, "device", from, "err", err)
			return false
		}
		chunk = chunk[:0]
		return true
	}
	for i := 0; ; i++ {
		e, err := readResidue(s)
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil && i == maxResidues {
			err = protoErrorf("more than %d residues", maxResidues)
		}
		if err != nil {
			n.log.Warn("residues: unreadable stream", "peer", p, "device", from, "err", err)
			s.Reset()
			flush()
			return
		}
		if chunk = append(chunk, e); len(chunk) == residueChunk && !flush() {
			s.Reset()
			return
		}
	}
	if !flush() {
		s.Reset()
		return
	}
	if _, err := s.Write([]byte{residuesApplied}); err != nil {
		s.Reset()
		return
	}
	s.Close()
}
