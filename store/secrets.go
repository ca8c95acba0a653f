package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
)

// The device identity and the library secret live outside badger, in
// DIR/secrets: badger creates its files with mode 0666 (less the umask) and
// offers no way to change that, while secrets must be 0600. The file is
// small JSON, replaced atomically (temporary file, fsync, rename, fsync of
// the directory) on every change.

const secretsFile = "secrets"

// Library is the identity of the library this device belongs to: its id,
// and the secret of its current epoch. The secret changes (a new epoch)
// when a device is forgotten or leaves, see Store.RotateLibrary.
type Library struct {
	ID     [16]byte
	Secret [32]byte
	Epoch  uint64
	// From is the device that handed this secret over (a rekey), 0 if this
	// device made it or it came with an invite: if that device is later
	// found to have been removed, the secret is rotated again.
	From uint64
}

// Supersedes reports whether l replaces o as the secret of the same
// library: a higher epoch wins, and of two secrets made for the same epoch
// (two devices rotating at once) the one whose SHA-256 is larger, so that
// every device picks the same one whatever order the two reach it in.
func (l Library) Supersedes(o Library) bool {
	if l.ID != o.ID || l.Secret == o.Secret {
		return false
	}
	if l.Epoch != o.Epoch {
		return l.Epoch > o.Epoch
	}
	a, b := sha256.Sum256(l.Secret[:]), sha256.Sum256(o.Secret[:])
	return bytes.Compare(a[:], b[:]) > 0
}

// maxPrevious bounds the superseded secrets kept: each one keeps a
// restricted node running until every member has moved on.
const maxPrevious = 4

type secrets struct {
	Version  int          `json:"version"`
	Identity []byte       `json:"identity,omitempty"`
	Library  *libraryFile `json:"library,omitempty"`
	// Previous are the library's superseded secrets, newest first, kept
	// until every member is known to have the current one.
	Previous []libraryFile `json:"previous,omitempty"`
	// Name is the device's own name, kept here as well as in its device
	// record so that it survives Repair, which moves the database (and the
	// record) aside: the device comes back under its name, not the
	// hostname. An older build ignores the field.
	Name string `json:"name,omitempty"`
	// Invites are this device's long invite codes (invites.go).
	Invites []inviteFile `json:"invites,omitempty"`
}

type libraryFile struct {
	ID     []byte `json:"id"`
	Secret []byte `json:"secret"`
	Epoch  uint64 `json:"epoch,omitempty"`
	From   uint64 `json:"from,omitempty"`
	// Roster is the current epoch's roster (Store.Roster); absent when
	// none is known.
	Roster []uint64 `json:"roster,omitempty"`
	// Inviter and Ticket are those of the invite this device joined the
	// library by (Store.Joining).
	Inviter uint64 `json:"inviter,omitempty"`
	Ticket  []byte `json:"ticket,omitempty"`
}

// MaxRoster bounds a roster: more members than this and a library cannot
// rotate without some of them pairing again.
const MaxRoster = 256

// maxTicket bounds the ticket a device keeps from the invite it joined by.
const maxTicket = 64

func (f *libraryFile) valid() bool {
	return len(f.ID) == 16 && len(f.Secret) == 32 && len(f.Roster) <= MaxRoster && len(f.Ticket) <= maxTicket
}

func (f *libraryFile) library() Library {
	l := Library{Epoch: f.Epoch, From: f.From}
	copy(l.ID[:], f.ID)
	copy(l.Secret[:], f.Secret)
	return l
}

func fileOf(l Library) libraryFile {
	return libraryFile{ID: bytes.Clone(l.ID[:]), Secret: bytes.Clone(l.Secret[:]), Epoch: l.Epoch, From: l.From}
}

// readSecrets loads DIR/secrets, if there is one.
func readSecrets(dir string, log *slog.Logger) (secrets, error) {
	path := filepath.Join(dir, secretsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return secrets{Version: 1}, nil
	}
	if err != nil {
		return secrets{}, ioErr(dir, "read the secrets file", err)
	}
	tightened, err := MakeFilePrivate(path)
	if err != nil {
		return secrets{}, ioErr(dir, "make the secrets file private", err)
	}
	if tightened {
		log.Warn("secrets file was readable by others; made it private", "path", path)
	}
	var sec secrets
	if err := json.Unmarshal(data, &sec); err != nil {
		return secrets{}, secretsCorruptf(path, "does not parse: %v", err)
	}
	switch {
	case sec.Version > 1:
		return secrets{}, fmt.Errorf("%w: %s was written by a newer danyue (secrets version %d); upgrade danyue", ErrNewerSchema, path, sec.Version)
	case sec.Version < 1:
		return secrets{}, secretsCorruptf(path, "no version")
	case sec.Library != nil && !sec.Library.valid():
		return secrets{}, secretsCorruptf(path, "malformed library")
	}
	for i := range sec.Previous {
		if !sec.Previous[i].valid() {
			return secrets{}, secretsCorruptf(path, "malformed previous secret")
		}
	}
	if len(sec.Invites) > maxInvites {
		return secrets{}, secretsCorruptf(path, "%d invites, more than %d", len(sec.Invites), maxInvites)
	}
	for i := range sec.Invites {
		if !sec.Invites[i].valid() {
			return secrets{}, secretsCorruptf(path, "malformed invite")
		}
	}
	return sec, nil
}

// writeSecrets replaces DIR/secrets atomically.
func writeSecrets(dir string, sec secrets) error {
	data, err := json.Marshal(sec)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".secrets-*") // mode 0600
	if err != nil {
		return ioErr(dir, "write the secrets file", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, secretsFile))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return ioErr(dir, "write the secrets file", err)
	}
	return nil
}

// Identity returns the device's marshalled private key, if one was set.
func (s *Store) Identity() ([]byte, bool) {
	s.secMu.Lock()
	defer s.secMu.Unlock()
	if s.secrets.Identity == nil {
		return nil, false
	}
	return append([]byte(nil), s.secrets.Identity...), true
}

// SetIdentity stores the device's marshalled private key durably, in a
// file of mode 0600.
func (s *Store) SetIdentity(ctx context.Context, key []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("set identity in %s: empty key", s.dir)
	}
	return s.updateSecrets(ctx, func(sec *secrets) error {
		sec.Identity = append([]byte(nil), key...)
		return nil
	})
}

// DeviceName returns the device name last saved with SetDeviceName, "" if
// none was.
func (s *Store) DeviceName() string {
	s.secMu.Lock()
	defer s.secMu.Unlock()
	return s.secrets.Name
}

// SetDeviceName saves the device's own name beside its identity, where it
// outlives the database (see Repair). Saving the name it has writes nothing.
func (s *Store) SetDeviceName(ctx context.Context, name string) error {
	if s.DeviceName() == name {
		return nil
	}
	return s.updateSecrets(ctx, func(sec *secrets) error {
		sec.Name = name
		return nil
	})
}

// Library returns the library this device belongs to, if one was set.
func (s *Store) Library() (Library, bool) {
	s.secMu.Lock()
	defer s.secMu.Unlock()
	if s.secrets.Library == nil {
		return Library{}, false
	}
	return s.secrets.Library.library(), true
}

// SetLibrary stores the library id and secret durably, in a file of mode
// 0600. It is for moving to a library (a join, a new library): the
// superseded secrets of the one before are dropped, and so are its roster
// and this device's invites into it.
func (s *Store) SetLibrary(ctx context.Context, l Library) error {
	return s.JoinLibrary(ctx, l, 0, nil)
}

// JoinLibrary is SetLibrary for a library this device joins by an invite:
// it keeps, with the secret, who made the invite and the invite's ticket,
// which this device presents to its inviter until the inviter has made it
// a member (Store.Joining).
func (s *Store) JoinLibrary(ctx context.Context, l Library, inviter uint64, ticket []byte) error {
	if len(ticket) > maxTicket {
		return fmt.Errorf("join the library in %s: a ticket of %d bytes", s.dir, len(ticket))
	}
	return s.updateSecrets(ctx, func(sec *secrets) error {
		f := fileOf(l)
		f.Inviter, f.Ticket = inviter, bytes.Clone(ticket)
		sec.Library, sec.Previous, sec.Invites = &f, nil, nil
		return nil
	})
}

// Joining returns the inviter and ticket of the invite this device joined
// its library by; 0 and nil if it made the library, or once DropTicket
// ran.
func (s *Store) Joining() (inviter uint64, ticket []byte) {
	s.secMu.Lock()
	defer s.secMu.Unlock()
	if s.secrets.Library == nil {
		return 0, nil
	}
	return s.secrets.Library.Inviter, bytes.Clone(s.secrets.Library.Ticket)
}

// DropTicket forgets the ticket of the invite this device joined by, once
// the inviter has redeemed it; the inviter is kept.
func (s *Store) DropTicket(ctx context.Context) error {
	return s.updateSecrets(ctx, func(sec *secrets) error {
		if sec.Library == nil || sec.Library.Ticket == nil {
			return errUnchanged
		}
		lib := *sec.Library
		lib.Ticket = nil
		sec.Library = &lib
		return nil
	})
}

// Roster returns the roster of the current epoch: the members that the
// device that moved this one to the epoch (or this device, if it rotated)
// named when it did; false if none is known (the secret never rotated, or
// this device learned the epoch from an older build).
func (s *Store) Roster() ([]uint64, bool) {
	s.secMu.Lock()
	defer s.secMu.Unlock()
	if s.secrets.Library == nil || s.secrets.Library.Roster == nil {
		return nil, false
	}
	return slices.Clone(s.secrets.Library.Roster), true
}

// checkRoster refuses a roster over MaxRoster.
func (s *Store) checkRoster(roster []uint64) error {
	if len(roster) > MaxRoster {
		return fmt.Errorf("a roster of %d members in %s, more than %d", len(roster), s.dir, MaxRoster)
	}
	return nil
}

// ErrNotNewer is returned by RotateLibrary for a secret that does not
// supersede the current one (Library.Supersedes).
var ErrNotNewer = errors.New("the secret does not supersede the current one")

// RotateLibrary makes next the library's current secret, with roster as
// its epoch's roster (nil: none known), in one atomic write that keeps the
// one it replaces among the previous secrets (newest first, at most
// maxPrevious) and voids this device's open invites of older epochs. It
// fails with ErrNotNewer, changing nothing, unless next supersedes the
// current secret.
func (s *Store) RotateLibrary(ctx context.Context, next Library, roster []uint64) error {
	if err := s.checkRoster(roster); err != nil {
		return err
	}
	return s.updateSecrets(ctx, func(sec *secrets) error {
		if sec.Library == nil {
			return fmt.Errorf("rotate the library secret in %s: no library", s.dir)
		}
		cur := sec.Library.library()
		if !next.Supersedes(cur) {
			return fmt.Errorf("rotate the library secret in %s: %w (epoch %d, current %d)", s.dir, ErrNotNewer, next.Epoch, cur.Epoch)
		}
		prev := []libraryFile{*sec.Library}
		for _, p := range sec.Previous {
			if p.library().Secret != next.Secret && len(prev) < maxPrevious {
				prev = append(prev, p)
			}
		}
		prev[0].Roster, prev[0].Ticket = nil, nil
		f := fileOf(next)
		f.Roster, f.Inviter = slices.Clone(roster), sec.Library.Inviter
		sec.Library, sec.Previous = &f, prev
		sec.Invites = voidInvites(sec.Invites, next.Epoch)
		return nil
	})
}

// SetLibraryEpoch records that the secret this device has is that of
// epoch, whose roster is roster (nil: none known), when a member tells (a
// device that joined by an invite, which carries no epoch, learns it so).
// A higher epoch replaces the roster, and the open invites made on this
// secret take the epoch; the same epoch only fills in a roster that was
// not known; anything else changes nothing.
func (s *Store) SetLibraryEpoch(ctx context.Context, epoch uint64, roster []uint64) error {
	if err := s.checkRoster(roster); err != nil {
		return err
	}
	return s.updateSecrets(ctx, func(sec *secrets) error {
		if sec.Library == nil {
			return errUnchanged
		}
		lib := *sec.Library
		switch {
		case lib.Epoch < epoch:
			sec.Invites = slices.Clone(sec.Invites)
			for i := range sec.Invites {
				if sec.Invites[i].Epoch == lib.Epoch {
					sec.Invites[i].Epoch = epoch
				}
			}
			lib.Epoch, lib.Roster = epoch, slices.Clone(roster)
		case lib.Epoch == epoch && lib.Roster == nil && roster != nil:
			lib.Roster = slices.Clone(roster)
		default:
			return errUnchanged
		}
		sec.Library = &lib
		return nil
	})
}

// PreviousLibraries returns the library's superseded secrets, newest
// first.
func (s *Store) PreviousLibraries() []Library {
	s.secMu.Lock()
	defer s.secMu.Unlock()
	out := make([]Library, 0, len(s.secrets.Previous))
	for i := range s.secrets.Previous {
		out = append(out, s.secrets.Previous[i].library())
	}
	return out
}

// DropPreviousLibraries forgets the superseded secrets, once every member
// has the current one.
func (s *Store) DropPreviousLibraries(ctx context.Context) error {
	return s.updateSecrets(ctx, func(sec *secrets) error {
		if len(sec.Previous) == 0 {
			return errUnchanged
		}
		sec.Previous = nil
		return nil
	})
}

// errUnchanged tells updateSecrets there is nothing to write.
var errUnchanged = errors.New("unchanged")

// updateSecrets applies update to a copy of the secrets and writes it; an
// update that fails (or returns errUnchanged) changes nothing.
func (s *Store) updateSecrets(ctx context.Context, update func(*secrets) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.qmu.Lock()
	closing := s.closing
	s.qmu.Unlock()
	if closing {
		return fmt.Errorf("store %s: %w", s.dir, ErrClosed)
	}
	s.secMu.Lock()
	defer s.secMu.Unlock()
	sec := s.secrets
	sec.Previous = slices.Clone(sec.Previous)
	sec.Invites = slices.Clone(sec.Invites)
	if err := update(&sec); errors.Is(err, errUnchanged) {
		return nil
	} else if err != nil {
		return err
	}
	sec.Version = 1
	if err := writeSecrets(s.dir, sec); err != nil {
		return err
	}
	s.secrets = sec
	return nil
}
