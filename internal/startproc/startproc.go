// Package startproc starts the child processes of tests and harnesses.
//
// Under wine (DANYUE_WINE, set by .ci/wine), creating a process now and
// then fails on a loaded machine with ERROR_INTERNAL_ERROR: the new
// process died while wine was still loading it, before the program ran at
// all. A start that failed ran nothing, so it is safe to try again with a
// new command; real Windows and the other systems do not fail this way,
// and there a failed start is final.
package startproc

import (
	"os"
	"os/exec"
)

// wineTries is how often a start is tried under wine.
const wineTries = 3

// Start starts the command newCmd returns, and under wine tries again, each
// time with a command newCmd makes anew (an exec.Cmd starts only once), if
// the start failed. newCmd must reset whatever the command writes to.
func Start(newCmd func() *exec.Cmd) (*exec.Cmd, error) {
	tries := 1
	if os.Getenv("DANYUE_WINE") != "" {
		tries = wineTries
	}
	var err error
	for range tries {
		cmd := newCmd()
		if err = cmd.Start(); err == nil {
			return cmd, nil
		}
	}
	return nil, err
}

// Run starts the command as Start does and waits for it to exit.
func Run(newCmd func() *exec.Cmd) error {
	cmd, err := Start(newCmd)
	if err != nil {
		return err
	}
	return cmd.Wait()
}
