package daemon

import "golang.org/x/sys/unix"

// peerUID reads the caller's uid with SO_PEERCRED (Linux and Android): the
// credentials the kernel recorded when the caller connected.
func peerUID(fd uintptr) (int, error) {
	cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}
