package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
)

// DefaultSocket returns where the daemon of dataDir serves its local API
// when Config.Socket is empty, and so where a client finds it: the unix
// socket dataDir/api.sock, or on Windows the named pipe pipeName(dataDir).
func DefaultSocket(dataDir string) string { return defaultSocket(dataDir) }

// pipeName is the Windows named pipe of the daemon of dataDir. Pipes live
// in one namespace for the whole machine, so the name is derived from the
// absolute data dir: two data dirs (two users, or a test's) get two pipes,
// and the daemon and the CLI, given the same dir, find the same one. The
// path is lowercased first because Windows paths are case-insensitive.
// It is portable so that it can be tested anywhere.
func pipeName(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = filepath.Clean(dataDir)
	}
	sum := sha256.Sum256([]byte(strings.ToLower(abs)))
	return `\\.\pipe\danyue-` + hex.EncodeToString(sum[:8])
}

// unixCaller is what the daemon knows of a caller on a unix socket whose
// uid the OS reported (err nil), could not report (err), or cannot report
// on this system at all (errors.ErrUnsupported). Where the OS can tell, a
// failure to read the credentials refuses the caller; where it cannot, the
// 0700 directory around the socket is what admits only this user, as it is
// on every unix.
func unixCaller(uid int, err error) connInfo {
	switch {
	case err == nil:
		return connInfo{kind: connUnix, uid: uid, vouched: true}
	case errors.Is(err, errors.ErrUnsupported):
		return connInfo{kind: connUnix, uid: -1, vouched: true}
	}
	return connInfo{kind: connUnix, uid: -1}
}
