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
	ma "github.com/multiformats/go-multiaddr"
)

// The rekey protocol hands a library's new secret to a member, over a
// connection that both the private network's key and Noise authenticate:
// the secret never travels inside a replicated record, which would reach
// anyone later admitted with an old secret. One stream carries one offer
// and one answer:
//
//	offer:  2-byte big-endian length | deterministic CBOR wireRekey
//	answer: 1 byte, 1 if the receiver took the secret (or has it), 0 if not
//
// Which secret to offer, to whom, and whether to take one is the daemon's
// (Config.RekeyOffer, Config.OnRekey): the node only carries it, on every
// new connection and on demand (OfferRekey).

// RekeyProtocolID is the libp2p protocol of the rekey exchange.
const RekeyProtocolID protocol.ID = "/danyue/rekey/1.0.0"

const (
	maxRekeyMessage = 16 << 10
	maxRekeyRemoved = 256
	maxRekeyAddrs   = 8
)

// Rekey is what a device tells a member about the library's secret.
type Rekey struct {
	// Library is the sender's current secret and its epoch.
	Library Library
	// Removed are the devices the sender knows were removed: the receiver
	// refuses them at once, before the records saying so reach it by sync.
	Removed []crdt.DeviceID
	// Addrs are where the sender listens on Library's network, so that a
	// receiver that moves there finds it again.
	Addrs []ma.Multiaddr
	// Members are the devices the sender holds for current members of
	// Library's epoch (at most MaxRekeyMembers; none from an older build):
	// the receiver takes them as that epoch's roster, the only devices an
	// addition made in an older epoch still counts for (library/doc.go).
	Members []crdt.DeviceID
}

// MaxRekeyMembers bounds the members an offer names.
const MaxRekeyMembers = 256

type wireRekey struct {
	ID      []byte   `cbor:"1,keyasint"`
	Secret  []byte   `cbor:"2,keyasint"`
	Epoch   uint64   `cbor:"3,keyasint,omitempty"`
	Removed []uint64 `cbor:"4,keyasint,omitempty"`
	Addrs   [][]byte `cbor:"5,keyasint,omitempty"`
	Members []uint64 `cbor:"6,keyasint,omitempty"`
}

func encodeRekey(r *Rekey) ([]byte, error) {
	w := wireRekey{ID: r.Library.ID[:], Secret: r.Library.Secret[:], Epoch: r.Library.Epoch}
	for _, d := range r.Removed[:min(len(r.Removed), maxRekeyRemoved)] {
		w.Removed = append(w.Removed, uint64(d))
	}
	for _, a := range r.Addrs {
		if ab := a.Bytes(); len(ab) <= maxInviteAddrLen && len(w.Addrs) < maxRekeyAddrs {
			w.Addrs = append(w.Addrs, ab)
		}
	}
	if len(r.Members) > MaxRekeyMembers {
		return nil, fmt.Errorf("encode rekey: %d members, more than %d", len(r.Members), MaxRekeyMembers)
	}
	for _, d := range r.Members {
		w.Members = append(w.Members, uint64(d))
	}
	body, err := frameEncMode.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("encode rekey: %w", err)
	}
	if len(body) > maxRekeyMessage {
		return nil, fmt.Errorf("encode rekey: %d bytes exceeds %d", len(body), maxRekeyMessage)
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(body))), body...), nil
}

// readRekey reads one offer from r.
func readRekey(r io.Reader) (Rekey, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Rekey{}, err
	}
	n := int(binary.BigEndian.Uint16(hdr[:]))
	if n == 0 || n > maxRekeyMessage {
		return Rekey{}, protoErrorf("rekey offer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return Rekey{}, err
	}
	var w wireRekey
	if err := frameDecMode.Unmarshal(body, &w); err != nil {
		return Rekey{}, protoErrorf("rekey offer: %v", err)
	}
	if len(w.ID) != 16 || len(w.Secret) != 32 || len(w.Removed) > maxRekeyRemoved || len(w.Addrs) > maxRekeyAddrs || len(w.Members) > MaxRekeyMembers {
		return Rekey{}, protoErrorf("malformed rekey offer")
	}
	var out Rekey
	copy(out.Library.ID[:], w.ID)
	copy(out.Library.Secret[:], w.Secret)
	out.Library.Epoch = w.Epoch
	if out.Library.IsZero() {
		return Rekey{}, protoErrorf("rekey offer without a secret")
	}
	for _, d := range w.Removed {
		out.Removed = append(out.Removed, crdt.DeviceID(d))
	}
	for _, d := range w.Members {
		out.Members = append(out.Members, crdt.DeviceID(d))
	}
	for _, ab := range w.Addrs {
		a, err := ma.NewMultiaddrBytes(ab)
		if err != nil {
			return Rekey{}, protoErrorf("rekey offer address: %v", err)
		}
		out.Addrs = append(out.Addrs, a)
	}
	return out, nil
}

// handleRekey answers one offer. A device that is not admitted never gets
// here: the gater refused its connection.
func (n *Node) handleRekey(s network.Stream) {
	r, from, ok := takeMessage(n, s, "rekey", readRekey)
	if !ok {
		return
	}
	defer n.wg.Done()
	took := n.cfg.OnRekey != nil && n.cfg.OnRekey(from, r)
	answer := byte(0)
	if took {
		answer = 1
	}
	if _, err := s.Write([]byte{answer}); err != nil {
		s.Reset()
		return
	}
	s.Close()
}

// sendRekey offers r to peer p and reports whether it took it.
func (n *Node) sendRekey(ctx context.Context, p lpeer.ID, r *Rekey) (bool, error) {
	msg, err := encodeRekey(r)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	s, err := n.host.NewStream(network.WithNoDial(ctx, "rekey"), p, RekeyProtocolID)
	if err != nil {
		return false, fmt.Errorf("open a rekey stream to %s: %w", p, err)
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if _, err := s.Write(msg); err != nil {
		s.Reset()
		return false, fmt.Errorf("rekey %s: %w", p, err)
	}
	if err := s.CloseWrite(); err != nil {
		s.Reset()
		return false, fmt.Errorf("rekey %s: %w", p, err)
	}
	var answer [1]byte
	if _, err := io.ReadFull(s, answer[:]); err != nil {
		return false, fmt.Errorf("rekey %s: no answer: %w", p, err)
	}
	return answer[0] == 1, nil
}

// rekeyRetries are the waits before offering again a peer that refused
// what it was offered on connecting, or that the offer did not reach:
//   - the daemon takes a secret only from a member, and a device meeting a
//     member for the first time (right after pairing) may get the offer a
//     few milliseconds before the hello on the same connection has made
//     the offerer a member there;
//   - an offer lost on a connection that stays up (its stream reset, or
//     unanswered) is made nowhere else: a new offer goes out only on a new
//     connection.
//
// Without a second offer, two devices that rotated at once could stay on
// different secrets. An offer the peer refuses for good costs a few bytes
// more.
var rekeyRetries = [...]time.Duration{time.Second, 5 * time.Second}

// offerOnConnect offers a newly connected peer what Config.RekeyOffer says,
// if anything, and again after each of rekeyRetries while it refuses or
// the offer fails, as long as the connection lasts (the next one offers
// again).
func (n *Node) offerOnConnect(p lpeer.ID) {
	if n.cfg.RekeyOffer == nil || !n.isMember(DeviceIDOf(p)) {
		return
	}
	for attempt := 0; ; attempt++ {
		r, ok := n.cfg.RekeyOffer(DeviceIDOf(p))
		if !ok {
			return
		}
		took, err := n.sendRekey(n.ctx, p, &r)
		switch {
		case n.ctx.Err() != nil:
			return
		case err != nil:
			n.log.Info("rekey: offer not delivered", "peer", p, "device", DeviceIDOf(p), "attempt", attempt+1, "err", err)
		case took:
			n.log.Info("rekey: a member took the library's current secret", "peer", p, "device", DeviceIDOf(p), "epoch", r.Library.Epoch)
			return
		}
		if attempt == len(rekeyRetries) {
			return
		}
		t := time.NewTimer(rekeyRetries[attempt])
		select {
		case <-n.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if n.host.Network().Connectedness(p) != network.Connected {
			return
		}
	}
}

// OfferRekey offers r to every member connected now, except those for
// which skip says so, and returns once each has answered or failed, with the
// devices that took it.
func (n *Node) OfferRekey(ctx context.Context, r Rekey, skip func(crdt.DeviceID) bool) []crdt.DeviceID {
	var (
		mu   sync.Mutex
		took []crdt.DeviceID
		wg   sync.WaitGroup
	)
	for _, p := range n.host.Network().Peers() {
		d := DeviceIDOf(p)
		if (skip != nil && skip(d)) || !n.isMember(d) {
			continue
		}
		wg.Go(func() {
			ok, err := n.sendRekey(ctx, p, &r)
			if err != nil {
				n.log.Info("rekey: offer not delivered", "peer", p, "device", d, "err", err)
			}
			if ok {
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return took
}

// ListenAddrs returns the addresses the node's listeners are bound to
// (ports chosen, no /p2p component): what a node replacing this one listens
// on, so that the addresses other devices know stay valid.
func (n *Node) ListenAddrs() []ma.Multiaddr {
	return slices.DeleteFunc(n.host.Network().ListenAddresses(), isRelayed)
}

// MemberAddrs returns the known addresses, each with its /p2p component,
// of every peer that completed a hello or is kept connected, except those
// the gater refuses: where a node replacing this one, or one on a previous
// secret, finds the library's members.
func (n *Node) MemberAddrs() []ma.Multiaddr {
	n.mu.Lock()
	known := make(map[lpeer.ID][]ma.Multiaddr)
	for id, st := range n.peers {
		if (st.member || st.kept) && id != n.host.ID() && !n.gater.refused(id) {
			known[id] = slices.Clone(st.addrs)
		}
	}
	n.mu.Unlock()
	var out []ma.Multiaddr
	for id, addrs := range known {
		p2p, err := ma.NewComponent("p2p", id.String())
		if err != nil {
			continue
		}
		for _, a := range mergeAddrs(addrs, n.host.Peerstore().Addrs(id)) {
			out = append(out, a.Encapsulate(p2p))
		}
	}
	return out
}
