package main

import (
	"context"
	"fmt"

	"github.com/danyue/danyue/daemon"
)

func repairCommand() command {
	return command{
		name:  "repair",
		usage: "[--data DIR]",
		summary: "Move a damaged store aside (kept, never deleted) so that the daemon starts a new one; " +
			"this device keeps its identity and library, and the other devices send the library again. The daemon must be stopped.",
		run: runRepair,
	}
}

func runRepair(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, repairCommand(), "danyue repair --data ~/.local/share/danyue")
	data := daemonDataDirFlag(fs, e)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(repairCommand(), pos); err != nil {
		return err
	}
	aside, err := daemon.Repair(*data)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Moved the store's database to %s (keep it until the library is whole again: it may hold books no other device has).\n", aside)
	fmt.Fprintln(e.stdout, "This device keeps its identity and library. Start the daemon: it makes a new store, and the other devices send the library again on the next sync.")
	return nil
}
