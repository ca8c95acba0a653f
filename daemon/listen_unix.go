//go:build unix

package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func defaultSocket(dataDir string) string { return filepath.Join(dataDir, "api.sock") }

// listenLocal listens on the unix socket path, inside a directory that
// only this user can reach (so the socket is never reachable by others, not
// even before its mode is set).
func listenLocal(path string) (net.Listener, error) {
	// The store's lock guarantees no other daemon owns this data dir, so a
	// socket left here is stale (a crash) and can go.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	if err := ensurePrivateDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restrict socket %s: %w", path, err)
	}
	return ln, nil
}

// removeLocal removes the socket when the daemon stops.
func removeLocal(path string) { _ = os.Remove(path) }

// localCaller tells who is at the other end of a unix socket connection.
func localCaller(c net.Conn) connInfo {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return unixCaller(-1, fmt.Errorf("not a unix socket: %T", c))
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return unixCaller(-1, err)
	}
	uid, uerr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) { uid, uerr = peerUID(fd) }); err != nil {
		return unixCaller(-1, err)
	}
	return unixCaller(uid, uerr)
}

// fileLimit raises the soft limit on open files to the hard limit where the
// system allows it and returns the limit the daemon runs with (0: unknown).
// The Go runtime already raises it at start on most systems; this also
// covers the ones where it does not, and tells the budget what it got.
func fileLimit() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		// macOS refuses more than kern.maxfilesperproc: keep what there is.
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	return uint64(lim.Cur)
}
