package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// The device identity and the library secret live outside badger, in
// DIR/secrets: badger creates its files with mode 0666 (less the umask) and
// offers no way to change that, while secrets must be 0600. The file is
// small JSON, replaced atomically (temporary file, fsync, rename, fsync of
// the directory) on every change.

const secretsFile = "secrets"

// Library is the identity of the library this device belongs to.
type Library struct {
	ID     [16]byte
	Secret [32]byte
}

type secrets struct {
	Version  int          `json:"version"`
	Identity []byte       `json:"identity,omitempty"`
	Library  *libraryFile `json:"library,omitempty"`
}

type libraryFile struct {
	ID     []byte `json:"id"`
	Secret []byte `json:"secret"`
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
	case sec.Library != nil && (len(sec.Library.ID) != 16 || len(sec.Library.Secret) != 32):
		return secrets{}, secretsCorruptf(path, "malformed library")
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
	return s.updateSecrets(ctx, func(sec *secrets) {
		sec.Identity = append([]byte(nil), key...)
	})
}

// Library returns the library this device belongs to, if one was set.
func (s *Store) Library() (Library, bool) {
	s.secMu.Lock()
	defer s.secMu.Unlock()
	var l Library
	if s.secrets.Library == nil {
		return l, false
	}
	copy(l.ID[:], s.secrets.Library.ID)
	copy(l.Secret[:], s.secrets.Library.Secret)
	return l, true
}

// SetLibrary stores the library id and secret durably, in a file of mode
// 0600.
func (s *Store) SetLibrary(ctx context.Context, l Library) error {
	return s.updateSecrets(ctx, func(sec *secrets) {
		sec.Library = &libraryFile{ID: l.ID[:], Secret: l.Secret[:]}
	})
}

func (s *Store) updateSecrets(ctx context.Context, update func(*secrets)) error {
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
	update(&sec)
	sec.Version = 1
	if err := writeSecrets(s.dir, sec); err != nil {
		return err
	}
	s.secrets = sec
	return nil
}
