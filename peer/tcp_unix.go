//go:build linux || darwin

package peer

import "golang.org/x/sys/unix"

func setTCPOption(fd uintptr, opt, value int) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, opt, value)
}
