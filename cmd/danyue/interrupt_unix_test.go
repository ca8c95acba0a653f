//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// interruptible prepares cmd to be stopped by interrupt; nothing to do here.
func interruptible(*exec.Cmd) {}

// interrupt asks the process to stop as Ctrl-C would.
func interrupt(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGINT) }

// terminate asks the process to stop as a service manager would.
func terminate(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGTERM) }

// noConsole says whether err is that of a process without a console to
// send a console event from; never here.
func noConsole(error) bool { return false }
