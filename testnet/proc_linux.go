package testnet

import "syscall"

// procAttr gives a daemon its own process group (so a signal reaches
// whatever it starts, and a terminal's ^C does not) and SIGKILL when this
// process dies, so no daemon outlives the test even if the cleanup never
// runs. The kernel sends it when the thread that started the daemon ends,
// not the process: the Go runtime ends a thread only with a goroutine
// locked to it, so a goroutine that locks its thread must unlock it before
// it exits (enterNetns), or a daemon started from that thread dies with it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
