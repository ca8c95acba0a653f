//go:build darwin || freebsd

package daemon

import "golang.org/x/sys/unix"

// peerUID reads the caller's uid with LOCAL_PEERCRED (macOS, iOS and
// FreeBSD; what getpeereid uses): the credentials the kernel recorded when
// the caller connected.
func peerUID(fd uintptr) (int, error) {
	cred, err := unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}
