package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/danyue/danyue/daemon"
)

func repairCommand() command {
	return command{
		name:  "repair",
		usage: "[--data DIR] [--force]",
		summary: "Move a damaged store aside (kept, never deleted) so that the daemon starts a new one; " +
			"this device keeps its identity, name and library, and the other devices send the library again. The daemon must be stopped. A store that opens without a fault is left alone unless --force is given.",
		run: runRepair,
	}
}

func runRepair(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, repairCommand(), "danyue repair --data ~/.local/share/danyue")
	data := daemonDataDirFlag(fs, e)
	force := fs.Bool("force", false, "move the store aside even if it opens without a fault (the other devices then send the whole library again, and what only this device holds is left in the moved store)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(repairCommand(), pos); err != nil {
		return err
	}
	aside, err := daemon.Repair(ctx, *data, *force)
	if errors.Is(err, daemon.ErrHealthy) {
		return &usageError{msg: fmt.Sprintf("%v; nothing was moved", err), hint: "danyue repair --force --data " + *data}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Moved the store's database to %s (keep it until the library is whole again: it may hold books no other device has).\n", aside)
	fmt.Fprintln(e.stdout, "This device keeps its identity, name and library. Start the daemon: it makes a new store, and the other devices send the library again on the next sync.")
	return nil
}
