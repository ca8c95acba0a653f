package main

import (
	"context"
	"fmt"
)

func inviteCommand() command {
	return command{
		name:    "invite",
		usage:   "",
		summary: "Print an invite code for this device's library (it carries the library's secret: share it only with your own devices).",
		run:     runInvite,
	}
}

func joinCommand() command {
	return command{
		name:    "join",
		usage:   "CODE",
		summary: "Move this device into the library of an invite code; its own books are kept and merged into the library.",
		run:     runJoin,
	}
}

func runInvite(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, inviteCommand(), "danyue invite    # then, on the other device: danyue join CODE")
	cf := addClientFlags(fs, e, false)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(inviteCommand(), pos); err != nil {
		return err
	}
	c := cf.client()
	defer c.Close()
	code, err := c.Invite(ctx)
	if err != nil {
		return cf.explain(err)
	}
	_, err = fmt.Fprintln(e.stdout, code)
	return err
}

func runJoin(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, joinCommand(), "danyue join danyue1-...")
	cf := addClientFlags(fs, e, false)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{msg: "join takes exactly one invite code", hint: "danyue invite  (on a device of the library), then danyue join CODE"}
	}
	c := cf.client()
	defer c.Close()
	j, err := c.Join(ctx, pos[0])
	if err != nil {
		return cf.explain(err)
	}
	fmt.Fprintf(e.stdout, "Joined library %s. This device's books stay and sync with the library; `danyue peers` shows who is connected.\n", j.Library.ID)
	return nil
}
