package main

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// interruptible starts cmd in a process group of its own, so that a console
// control event can be sent to it alone (Windows has no signals to send).
func interruptible(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP
}

// interrupt sends the process group Ctrl-Break, which Go delivers as
// os.Interrupt (Ctrl-C cannot be sent to a group of its own).
func interrupt(cmd *exec.Cmd) error {
	return windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(cmd.Process.Pid))
}

// terminate: a service manager on Windows stops the daemon as Ctrl-Break
// does, there being no SIGTERM.
func terminate(cmd *exec.Cmd) error { return interrupt(cmd) }

// noConsole says whether err is that of GenerateConsoleCtrlEvent in a
// process without a console: a test binary under wine, whose output goes
// to a file. A test run from a console (or by CI on Windows) has one.
func noConsole(err error) bool { return errors.Is(err, windows.ERROR_INVALID_ACCESS) }
