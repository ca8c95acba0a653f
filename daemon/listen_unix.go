//go:build unix

package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/danyue/danyue/store"
)

func defaultSocket(dataDir string) string { return filepath.Join(dataDir, "api.sock") }

// listenLocal listens on the unix socket path so that no other user can
// reach it, not even for an instant. In a directory that only this user can
// reach (the data dir, or one it creates for the socket), it binds there. In
// any other (--socket in a shared directory such as /tmp, mode 1777), it
// leaves that directory's mode alone: it binds in a private subdirectory,
// makes the socket 0600 and moves it into place. Either way the socket's own
// mode is checked last.
func listenLocal(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	private, err := socketDir(dir)
	if err != nil {
		return nil, err
	}
	var ln *net.UnixListener
	if private {
		ln, err = bindPrivate(path)
	} else {
		ln, err = bindAndMove(path)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm()&0o077 != 0 {
		ln.Close()
		return nil, fmt.Errorf("socket %s is not private to this user after it was made (%v); choose another --socket", path, fileMode(fi, err))
	}
	return ln, nil
}

// removeStaleSocket removes a socket left at path. The store's lock
// guarantees no other daemon owns this data dir, so a socket there is stale
// (a crash); anything else at path is not the daemon's to remove.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("socket %s: %w", path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("socket %s: a file that is not a socket is in the way; choose another --socket", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// socketDir makes sure dir exists and reports whether only this user can
// reach it. A missing dir is created private (0700, parents too); an
// existing one is never changed: it may be shared, such as /tmp.
func socketDir(dir string) (private bool, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := store.MakePrivateDir(dir); err != nil {
			return false, fmt.Errorf("socket directory %s: %w", dir, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("socket directory %s: %w", dir, err)
	case !fi.IsDir():
		return false, fmt.Errorf("socket directory %s: not a directory", dir)
	}
	return fi.Mode().Perm()&0o077 == 0 && ownedByMe(fi), nil
}

// bindPrivate listens on path, in a directory only this user can reach.
func bindPrivate(path string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restrict socket %s: %w", path, err)
	}
	return ln, nil
}

// bindAndMove listens on a socket made in a private subdirectory of path's
// directory, restricted there, then renamed to path: a connection follows
// the socket's inode, not its name.
func bindAndMove(path string) (*net.UnixListener, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".dy") // 0700; short: socket paths are limited
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	ln, err := bindPrivate(filepath.Join(tmp, "s"))
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // the name it was bound to is gone; removeLocal removes path
	if err := os.Rename(filepath.Join(tmp, "s"), path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, nil
}

func fileMode(fi fs.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return fi.Mode().String()
}

// ownedByMe reports whether this user owns the file fi describes.
func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// removeLocal removes the socket when the daemon stops; whatever else is at
// path (a daemon that failed to listen there) is not the daemon's.
func removeLocal(path string) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == fs.ModeSocket {
		_ = os.Remove(path)
	}
}

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
