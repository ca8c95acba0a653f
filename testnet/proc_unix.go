//go:build unix

package testnet

import (
	"errors"
	"syscall"
)

// signalGroup sends sig to the process group led by pid (startProc makes
// every daemon the leader of its own group).
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// alive reports whether a process pid exists, ours or not.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
