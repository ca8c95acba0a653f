package main

import (
	"context"
	"fmt"

	"github.com/danyue/danyue/daemon/api"
)

func restoreCommand() command {
	return command{
		name:    "restore",
		usage:   "KEY [--json]",
		summary: "Bring a deleted book back on every device, with its position, title and reading time. Works during the undo window (the daemon's --keep-deleted, 30 days by default); danyue books --deleted lists what can be brought back, and until when.",
		run:     runRestore,
	}
}

func runRestore(ctx context.Context, e *env, args []string) error {
	const hint = "danyue books --deleted, then danyue restore md5:0123…"
	flags := newFlagSet(e, restoreCommand(), hint)
	cf := addClientFlags(flags, e, true)
	pos, err := parseArgs(flags, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return &usageError{msg: fmt.Sprintf("restore takes one KEY, got %d", len(pos)), hint: hint}
	case !keyPattern.MatchString(pos[0]):
		return &usageError{msg: fmt.Sprintf("restore: %q is not a key (a key looks like md5:0123…, as danyue books --deleted prints it)", pos[0]), hint: hint}
	}
	c := cf.client()
	defer c.Close()
	was, err := c.Book(ctx, pos[0])
	if err != nil {
		return cf.explain(err)
	}
	book, err := c.Restore(ctx, pos[0])
	if err != nil {
		return cf.explain(err)
	}
	if *cf.json {
		return printJSON(e.stdout, book)
	}
	fmt.Fprintln(e.stdout, describeRestore(was, book))
	return nil
}

// describeRestore says what a restore did, from the book before and after.
func describeRestore(was, now api.Book) string {
	if !was.Deleted {
		return "Already on the shelf: " + describeProgress(now)
	}
	return "Back on the shelf on every device: " + describeProgress(now)
}
