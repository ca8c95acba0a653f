package peer

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/danyue/danyue/crdt"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
)

// Library is what every device of one library shares: a public id, which
// devices may show and mDNS announces only as a hash, and the secret that
// keys the private network. Whoever has the current secret can reach the
// library's members; the secret changes, to a new epoch, when a device is
// removed (rekey.go). The epoch travels in rekey offers, not in invites.
type Library struct {
	ID     [16]byte
	Secret [32]byte
	Epoch  uint64
}

// ErrNoLibrary is returned by New for a Config whose library has no secret.
var ErrNoLibrary = errors.New("no library secret")

// NewLibrary returns a library with a random id and secret.
func NewLibrary() (Library, error) {
	var l Library
	if _, err := rand.Read(l.ID[:]); err != nil {
		return Library{}, fmt.Errorf("new library: %w", err)
	}
	if _, err := rand.Read(l.Secret[:]); err != nil {
		return Library{}, fmt.Errorf("new library: %w", err)
	}
	return l, nil
}

// IsZero reports whether l is the zero Library (no secret), which is never a
// valid library.
func (l Library) IsZero() bool { return l.Secret == [32]byte{} }

// IDString returns the library id as 32 lowercase hex digits, the form the
// API shows.
func (l Library) IDString() string { return hex.EncodeToString(l.ID[:]) }

// psk derives the libp2p pre-shared key from the secret. The secret itself
// never leaves the device except inside an invite; a separate derivation
// with its own label keeps the network key independent of any other use of
// the secret.
func (l Library) psk() (pnet.PSK, error) {
	k, err := hkdf.Key(sha256.New, l.Secret[:], nil, "danyue pnet v1", 32)
	if err != nil {
		return nil, fmt.Errorf("derive network key: %w", err)
	}
	return pnet.PSK(k), nil
}

// announceHash is what mDNS announces about the library: enough for two
// households on one LAN to ignore each other's devices, and nothing that
// helps anyone join (the id is not secret, and this is only a hash of it).
func (l Library) announceHash() string {
	h := sha256.New()
	h.Write([]byte("danyue library\x00"))
	h.Write(l.ID[:])
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// DeviceIDOf returns the device id of the device whose libp2p identity is
// id: the first 8 bytes, big-endian, of the SHA-256 of the peer id's bytes.
// A new identity key is a new device, so a wiped device gets fresh read-time
// slots. The id is never 0 (0 means no device).
func DeviceIDOf(id lpeer.ID) crdt.DeviceID {
	sum := sha256.Sum256([]byte(id))
	d := crdt.DeviceID(binary.BigEndian.Uint64(sum[:8]))
	if d == 0 {
		d = 1
	}
	return d
}
