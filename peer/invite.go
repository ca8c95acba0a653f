package peer

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// An invite code carries a library (id and secret) and, as a hint, where the
// inviter was listening, so the joining device can dial it even where mDNS
// does not reach. Its text form is
//
//	danyue1-<lowercase base32 of payload || checksum, no padding>
//
// where 1 is the format version, payload is
//
//	library id (16) | secret (32) | uvarint len | inviter peer id |
//	uvarint n | n × (uvarint len | binary multiaddr) |
//	[uvarint len | ticket]
//
// The ticket, an optional field added after the format's first release,
// is the code's one-time ticket: the joiner presents it to the inviter,
// which makes it a member (Config.Redeem). A code without one (made by an
// older build, or handed over by a short-code pairing, whose inviter adds
// the joiner itself) carries the secret but makes no member.
// and checksum is the first 4 bytes of SHA-256("danyue invite\x00" ||
// version || payload). Input is read case-insensitively and with any dashes
// and whitespace removed, so a code split over lines or read aloud in groups
// still decodes; a mistyped character fails the checksum and is reported as
// a typo rather than as "not an invite".

// InviteVersion is the version of the invite format this build writes.
const InviteVersion = 1

const (
	invitePrefix     = "danyue"
	inviteSumLen     = 4
	maxInviteAddrs   = 8
	maxInviteAddrLen = 128
	maxInvitePeerLen = 128
	// maxInviteText bounds the input accepted by DecodeInvite, before any
	// work is done on it; a real code is well under half of it.
	maxInviteText = 4096
)

// Errors of DecodeInvite. Each is wrapped with the detail.
var (
	// ErrInviteFormat: the text is not a danyue invite code at all.
	ErrInviteFormat = errors.New("not an invite code")
	// ErrInviteChecksum: the text looks like an invite code but a character
	// was mistyped, added or lost.
	ErrInviteChecksum = errors.New("invite code has a typo")
	// ErrInviteVersion: the code was made by a build with another invite
	// format.
	ErrInviteVersion = errors.New("unsupported invite version")
)

var inviteEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Invite is what an invite code carries.
type Invite struct {
	Library Library
	// Peer is the inviting device, empty if unknown.
	Peer lpeer.ID
	// Addrs are where the inviter was listening, without /p2p: a hint, tried
	// after joining; mDNS finds the inviter anyway on a LAN.
	Addrs []ma.Multiaddr
	// Ticket is the one-time ticket only the inviter redeems (at most
	// maxTicket bytes); nil if the code has none.
	Ticket []byte
}

// PeerAddrs returns the inviter's addresses with its /p2p component, as
// Node.Connect takes them; nil if the invite names no peer.
func (inv Invite) PeerAddrs() []ma.Multiaddr {
	if inv.Peer == "" || len(inv.Addrs) == 0 {
		return nil
	}
	p2p, err := ma.NewComponent("p2p", inv.Peer.String())
	if err != nil {
		return nil
	}
	out := make([]ma.Multiaddr, 0, len(inv.Addrs))
	for _, a := range inv.Addrs {
		out = append(out, a.Encapsulate(p2p))
	}
	return out
}

// EncodeInvite returns the text form of inv. Addresses beyond the format's
// limits (more than 8, or longer than 128 bytes) are left out: they are only
// a hint.
func EncodeInvite(inv Invite) string {
	payload := appendInvitePayload(nil, inv)
	payload = append(payload, inviteSum(InviteVersion, payload)...)
	return invitePrefix + strconv.Itoa(InviteVersion) + "-" + inviteEncoding.EncodeToString(payload)
}

func appendInvitePayload(b []byte, inv Invite) []byte {
	b = append(b, inv.Library.ID[:]...)
	b = append(b, inv.Library.Secret[:]...)
	id := []byte(inv.Peer)
	if len(id) > maxInvitePeerLen {
		id = nil
	}
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	var addrs [][]byte
	for _, a := range inv.Addrs {
		if ab := a.Bytes(); len(ab) > 0 && len(ab) <= maxInviteAddrLen && len(addrs) < maxInviteAddrs {
			addrs = append(addrs, ab)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(addrs)))
	for _, ab := range addrs {
		b = binary.AppendUvarint(b, uint64(len(ab)))
		b = append(b, ab...)
	}
	if len(inv.Ticket) > 0 && len(inv.Ticket) <= maxTicket {
		b = binary.AppendUvarint(b, uint64(len(inv.Ticket)))
		b = append(b, inv.Ticket...)
	}
	return b
}

func inviteSum(version int, payload []byte) []byte {
	h := sha256.New()
	h.Write([]byte("danyue invite\x00"))
	h.Write([]byte{byte(version)})
	h.Write(payload)
	return h.Sum(nil)[:inviteSumLen]
}

// DecodeInvite parses an invite code. Errors wrap ErrInviteFormat,
// ErrInviteChecksum or ErrInviteVersion; no partial invite is returned.
func DecodeInvite(code string) (Invite, error) {
	if len(code) > maxInviteText {
		return Invite{}, fmt.Errorf("%w: %d characters, longer than any invite code", ErrInviteFormat, len(code))
	}
	s := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return unicode.ToLower(r)
	}, code)
	rest, ok := strings.CutPrefix(s, invitePrefix)
	if !ok {
		return Invite{}, fmt.Errorf("%w: it does not start with %q", ErrInviteFormat, invitePrefix)
	}
	digits, body, ok := strings.Cut(rest, "-")
	if !ok || digits == "" || len(digits) > 3 {
		return Invite{}, fmt.Errorf("%w: expected %s<version>-<code>", ErrInviteFormat, invitePrefix)
	}
	version, err := strconv.Atoi(digits)
	if err != nil {
		return Invite{}, fmt.Errorf("%w: version %q is not a number", ErrInviteFormat, digits)
	}
	if version != InviteVersion {
		return Invite{}, fmt.Errorf("%w %d (this build reads version %d)", ErrInviteVersion, version, InviteVersion)
	}
	body = strings.ReplaceAll(body, "-", "")
	if i := strings.IndexFunc(body, func(r rune) bool { return !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz234567", r) }); i >= 0 {
		r := []rune(body[i:])[0]
		return Invite{}, fmt.Errorf("%w: character %q is not used in invite codes", ErrInviteChecksum, r)
	}
	raw, err := inviteEncoding.DecodeString(body)
	if err != nil || len(raw) < inviteSumLen {
		return Invite{}, fmt.Errorf("%w: the code is incomplete", ErrInviteChecksum)
	}
	payload, sum := raw[:len(raw)-inviteSumLen], raw[len(raw)-inviteSumLen:]
	if !bytes.Equal(sum, inviteSum(version, payload)) {
		return Invite{}, fmt.Errorf("%w: checksum mismatch", ErrInviteChecksum)
	}
	inv, err := parseInvitePayload(payload)
	if err != nil {
		return Invite{}, fmt.Errorf("%w: %w", ErrInviteFormat, err)
	}
	return inv, nil
}

func parseInvitePayload(b []byte) (Invite, error) {
	var inv Invite
	if len(b) < 16+32 {
		return Invite{}, errors.New("payload too short")
	}
	copy(inv.Library.ID[:], b[:16])
	copy(inv.Library.Secret[:], b[16:48])
	b = b[48:]
	if inv.Library.IsZero() {
		return Invite{}, errors.New("no library secret")
	}
	id, b, err := cutInviteField(b, maxInvitePeerLen)
	if err != nil {
		return Invite{}, fmt.Errorf("peer id: %w", err)
	}
	if len(id) > 0 {
		if inv.Peer, err = lpeer.IDFromBytes(id); err != nil {
			return Invite{}, fmt.Errorf("peer id: %w", err)
		}
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxInviteAddrs {
		return Invite{}, errors.New("bad address count")
	}
	b = b[k:]
	for range n {
		var ab []byte
		if ab, b, err = cutInviteField(b, maxInviteAddrLen); err != nil {
			return Invite{}, fmt.Errorf("address: %w", err)
		}
		if len(ab) == 0 {
			return Invite{}, errors.New("empty address")
		}
		a, err := ma.NewMultiaddrBytes(ab)
		if err != nil {
			return Invite{}, fmt.Errorf("address: %w", err)
		}
		inv.Addrs = append(inv.Addrs, a)
	}
	if len(b) > 0 {
		var ticket []byte
		if ticket, b, err = cutInviteField(b, maxTicket); err != nil || len(ticket) == 0 {
			return Invite{}, errors.New("bad ticket")
		}
		inv.Ticket = bytes.Clone(ticket)
	}
	if len(b) != 0 {
		return Invite{}, errors.New("trailing bytes")
	}
	return inv, nil
}

// cutInviteField splits a uvarint-length-prefixed field off b, checking the
// length against max and against what is left before slicing.
func cutInviteField(b []byte, max int) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(max) || n > uint64(len(b)-k) {
		return nil, nil, errors.New("bad length")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}
