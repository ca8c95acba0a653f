package testnet

import (
	"os"
	"syscall"
)

// Windows has neither process groups nor signals: a daemon is stopped by
// ending its process, which the store's crash safety makes a valid if
// abrupt stop. The network-namespace scenarios need Linux; the in-process
// ones run here.

func procAttr() *syscall.SysProcAttr { return nil }

func signalGroup(pid int, _ syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// alive is only asked about the processes of stale network namespaces,
// which Windows does not have.
func alive(int) bool { return false }
