package testnet

import "syscall"

// procAttr gives a daemon its own process group (so a signal reaches
// whatever it starts, and a terminal's ^C does not) and SIGKILL when this
// process dies, so no daemon outlives the test even if the cleanup never
// runs.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
