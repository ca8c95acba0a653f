package peer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"pgregory.net/rapid"
)

func inviteEqual(a, b Invite) bool {
	if a.Library != b.Library || a.Peer != b.Peer || len(a.Addrs) != len(b.Addrs) || !bytes.Equal(a.Ticket, b.Ticket) {
		return false
	}
	for i := range a.Addrs {
		if !a.Addrs[i].Equal(b.Addrs[i]) {
			return false
		}
	}
	return true
}

func genInvite(t *rapid.T) Invite {
	var inv Invite
	copy(inv.Library.ID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "id"))
	copy(inv.Library.Secret[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "secret"))
	inv.Library.Secret[0] |= 1 // never the zero secret
	if rapid.Bool().Draw(t, "has peer") {
		seed := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "key")
		k, _, err := crypto.GenerateEd25519Key(bytes.NewReader(seed))
		if err != nil {
			t.Fatal(err)
		}
		inv.Peer, _ = lpeer.IDFromPrivateKey(k)
	}
	for i := range rapid.IntRange(0, maxInviteAddrs).Draw(t, "addrs") {
		port := rapid.IntRange(1, 65535).Draw(t, fmt.Sprint("port", i))
		var s string
		if rapid.Bool().Draw(t, fmt.Sprint("v6", i)) {
			s = fmt.Sprintf("/ip6/fd00::%x/tcp/%d", rapid.IntRange(0, 0xffff).Draw(t, fmt.Sprint("ip", i)), port)
		} else {
			s = fmt.Sprintf("/ip4/192.168.%d.%d/tcp/%d", rapid.IntRange(0, 255).Draw(t, fmt.Sprint("a", i)), rapid.IntRange(0, 255).Draw(t, fmt.Sprint("b", i)), port)
		}
		inv.Addrs = append(inv.Addrs, ma.StringCast(s))
	}
	if rapid.Bool().Draw(t, "has ticket") {
		inv.Ticket = rapid.SliceOfN(rapid.Byte(), 1, maxTicket).Draw(t, "ticket")
	}
	return inv
}

// A code without a ticket (an older build's, or a short-code pairing's)
// reads as it always did, and a code's ticket is bounded and whole.
func TestInviteTicket(t *testing.T) {
	inv := Invite{Library: Library{ID: [16]byte{1}, Secret: [32]byte{2}}, Ticket: bytes.Repeat([]byte{9}, 16)}
	plain := inv
	plain.Ticket = nil
	withTicket, without := EncodeInvite(inv), EncodeInvite(plain)
	if !strings.HasPrefix(withTicket, without[:len(without)-7]) {
		t.Errorf("the ticket is not an addition at the end: %s vs %s", withTicket, without)
	}
	for code, want := range map[string][]byte{withTicket: inv.Ticket, without: nil} {
		got, err := DecodeInvite(code)
		if err != nil || !bytes.Equal(got.Ticket, want) {
			t.Errorf("%s: ticket %x, %v; want %x", code, got.Ticket, err, want)
		}
	}
	payload := appendInvitePayload(nil, plain)
	for name, tail := range map[string][]byte{
		"empty ticket":   {0},
		"cut ticket":     {16, 1, 2},
		"ticket too big": append([]byte{maxTicket + 1}, make([]byte, maxTicket+1)...),
		"after a ticket": {1, 7, 0},
	} {
		p := append(bytes.Clone(payload), tail...)
		code := invitePrefix + "1-" + inviteEncoding.EncodeToString(append(p, inviteSum(InviteVersion, p)...))
		if _, err := DecodeInvite(code); !errors.Is(err, ErrInviteFormat) {
			t.Errorf("%s: %v, want ErrInviteFormat", name, err)
		}
	}
}

// decode(encode(x)) == x, and the decoder ignores case, dashes and
// whitespace.
func TestInviteRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		inv := genInvite(t)
		code := EncodeInvite(inv)
		if !strings.HasPrefix(code, "danyue1-") || strings.ContainsAny(code, "=ABCDEFGHIJKLMNOPQRSTUVWXYZ \n") {
			t.Fatalf("code %q is not in the copy-paste form", code)
		}
		got, err := DecodeInvite(code)
		if err != nil || !inviteEqual(got, inv) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, inv)
		}
		// Upper case, grouped in fives, split over lines.
		var b strings.Builder
		for i, r := range strings.ToUpper(code) {
			if i > 8 && i%5 == 0 {
				b.WriteString([]string{"-", " ", "\n"}[i%3])
			}
			b.WriteRune(r)
		}
		got, err = DecodeInvite(" " + b.String() + "\n")
		if err != nil || !inviteEqual(got, inv) {
			t.Fatalf("reformatted code %q: %v", b.String(), err)
		}
	})
}

func TestInviteTypos(t *testing.T) {
	inv := Invite{Library: newLib(t), Peer: newDeviceID(t), Addrs: []ma.Multiaddr{ma.StringCast("/ip4/192.168.1.20/tcp/4001")}}
	code := EncodeInvite(inv)
	t.Logf("invite code (%d characters): %s", len(code), code)
	body := len("danyue1-")
	alphabet := "abcdefghijklmnopqrstuvwxyz234567"
	caught, harmless := 0, 0
	for i := body; i < len(code); i++ {
		// Each position, mistyped as the next letter of the alphabet.
		c := alphabet[(strings.IndexByte(alphabet, code[i])+1)%32]
		typo := code[:i] + string(c) + code[i+1:]
		got, err := DecodeInvite(typo)
		switch {
		case errors.Is(err, ErrInviteChecksum):
			caught++
		case err == nil && inviteEqual(got, inv):
			harmless++ // only the unused bits of the last character changed
		default:
			t.Fatalf("typo at %d: %v", i, err)
		}
	}
	if harmless > 1 {
		t.Errorf("%d typos decoded to the same invite, want at most the last character", harmless)
	}
	// Two neighbours that differ, or swapping them changes nothing.
	sw := 20
	for code[sw] == code[sw+1] {
		sw++
	}
	for name, tc := range map[string]struct {
		code string
		want error
	}{
		"swapped":         {code[:sw] + code[sw+1:sw+2] + code[sw:sw+1] + code[sw+2:], ErrInviteChecksum},
		"truncated":       {code[:len(code)-3], ErrInviteChecksum},
		"one lost":        {code[:30] + code[31:], ErrInviteChecksum},
		"one extra":       {code[:30] + "a" + code[30:], ErrInviteChecksum},
		"digit one":       {code[:30] + "1" + code[31:], ErrInviteChecksum},
		"other version":   {"danyue2-" + code[body:], ErrInviteVersion},
		"no prefix":       {code[body:], ErrInviteFormat},
		"no version":      {"danyue-" + code[body:], ErrInviteFormat},
		"empty":           {"", ErrInviteFormat},
		"way too long":    {code + strings.Repeat("a", maxInviteText), ErrInviteFormat},
		"empty body":      {"danyue1-", ErrInviteChecksum},
		"another program": {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", ErrInviteFormat},
	} {
		if _, err := DecodeInvite(tc.code); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestInviteLimits(t *testing.T) {
	inv := Invite{Library: newLib(t)}
	for i := range 20 {
		inv.Addrs = append(inv.Addrs, ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i)))
	}
	got, err := DecodeInvite(EncodeInvite(inv))
	if err != nil || len(got.Addrs) != maxInviteAddrs {
		t.Fatalf("%d addresses, %v; want the first %d kept", len(got.Addrs), err, maxInviteAddrs)
	}
	// A well-formed payload with a valid checksum but the zero secret is not
	// an invite.
	payload := appendInvitePayload(nil, Invite{})
	code := "danyue1-" + inviteEncoding.EncodeToString(append(payload, inviteSum(1, payload)...))
	if _, err := DecodeInvite(code); !errors.Is(err, ErrInviteFormat) {
		t.Fatalf("zero secret: %v", err)
	}
}

func TestInvitePeerAddrs(t *testing.T) {
	inv := Invite{Library: newLib(t), Peer: newDeviceID(t), Addrs: []ma.Multiaddr{ma.StringCast("/ip4/10.0.0.1/tcp/1")}}
	got := inv.PeerAddrs()
	infos, err := lpeer.AddrInfosFromP2pAddrs(got...)
	if err != nil || len(infos) != 1 || infos[0].ID != inv.Peer {
		t.Fatalf("%v: %v", got, err)
	}
}

func newDeviceID(t testing.TB) lpeer.ID {
	id, err := lpeer.IDFromPrivateKey(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// FuzzInvite: the decoder never panics on any text, nor on any payload
// behind a valid checksum; whatever decodes round-trips.
func FuzzInvite(f *testing.F) {
	f.Add([]byte(EncodeInvite(Invite{Library: Library{Secret: [32]byte{1}}})))
	f.Add([]byte("danyue1-aaaa"))
	f.Add(appendInvitePayload(nil, Invite{Library: Library{ID: [16]byte{3}, Secret: [32]byte{4}}, Addrs: []ma.Multiaddr{ma.StringCast("/ip4/1.2.3.4/tcp/5")}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2*maxInviteText {
			// Refused by length before any work (TestInviteTypos); large
			// inputs only make the fuzzer's minimization crawl.
			return
		}
		codes := []string{
			string(data),
			// The same bytes as a payload behind a valid checksum, so the
			// fuzzer reaches the payload parser.
			"danyue1-" + inviteEncoding.EncodeToString(append(bytes.Clone(data), inviteSum(1, data)...)),
		}
		for _, code := range codes {
			inv, err := DecodeInvite(code)
			if err != nil {
				if !errors.Is(err, ErrInviteFormat) && !errors.Is(err, ErrInviteChecksum) && !errors.Is(err, ErrInviteVersion) {
					t.Fatalf("unclassified error %v", err)
				}
				continue
			}
			again, err := DecodeInvite(EncodeInvite(inv))
			if err != nil || !inviteEqual(inv, again) {
				t.Fatalf("round trip of %+v: %+v, %v", inv, again, err)
			}
		}
	})
}
