package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/qrterm"
)

func inviteCommand() command {
	return command{
		name:  "invite",
		usage: "[--short | --long] [--json]",
		summary: "Invite another device into this library: in a terminal, a short code like 7-crossover-clockwork (and its QR code) " +
			"for one use within five minutes; for scripts (--long, or when output is not a terminal), the long code, which carries the library's secret.",
		run: runInvite,
	}
}

func joinCommand() command {
	return command{
		name:    "join",
		usage:   "CODE [--pair-addr HOST:PORT]",
		summary: "Move this device into the library of an invite code, short or long; its own books are kept and merged into the library.",
		run:     runJoin,
	}
}

// runInvite prints a short code and waits for the other device, as Magic
// Wormhole's sender does, when a person is at the terminal; otherwise, or
// with --long, it prints the long code at once as it always has, so
// `code=$(danyue invite)` in a script keeps working.
func runInvite(ctx context.Context, e *env, args []string) error {
	cc := newClientCmd(e, inviteCommand(), "danyue invite    # then, on the other device: danyue join 7-crossover-clockwork", false)
	short := cc.fs.Bool("short", false, "print a short code and wait for the other device, even when output is not a terminal")
	long := cc.fs.Bool("long", false, "print the long code (danyue1-...): one device, within 24 hours, through this device; keep it secret")
	asJSON := cc.fs.Bool("json", false, `print the long code as JSON, {"code": "danyue1-..."}`)
	if err := cc.parse(args); err != nil {
		return err
	}
	if *short && (*long || *asJSON) {
		return &usageError{msg: "--short cannot go with --long or --json", hint: "danyue help invite"}
	}
	c := cc.client()
	defer c.Close()
	if *long || *asJSON || !*short && !isTerminal(e.stdout) {
		code, err := c.Invite(ctx)
		if err != nil {
			return cc.explain(err)
		}
		if *asJSON {
			return printJSON(e.stdout, api.Invite{Code: code})
		}
		_, err = fmt.Fprintln(e.stdout, code)
		return err
	}
	p, err := c.Pair(ctx)
	if err != nil {
		return cc.explain(err)
	}
	printPairing(e, p)
	got, err := c.Pairing(ctx, p.ID, true)
	if ctx.Err() != nil {
		// Interrupted: the code must not outlive the person waiting for it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, cerr := c.CancelPairing(cctx, p.ID); cerr != nil {
			return fmt.Errorf("interrupted, and the invitation could not be cancelled (it expires by itself at %s): %w", p.Expires, cerr)
		}
		return errors.New("interrupted: the code no longer works")
	}
	if err != nil {
		return cc.explain(err)
	}
	if got.State != api.PairingPaired {
		return errors.New(got.Detail)
	}
	_, err = fmt.Fprintf(e.stdout, "Paired: %s joined the library.\n", got.DeviceName)
	return err
}

func printPairing(e *env, p api.Pairing) {
	w := e.stdout
	fmt.Fprintf(w, "Pairing code: %s\n", p.Code)
	if isTerminal(w) {
		if qr, err := qrterm.Render(p.Code); err == nil {
			fmt.Fprint(w, qr)
		}
	}
	until := p.Expires
	if t, err := time.Parse(time.RFC3339, p.Expires); err == nil {
		until = t.Local().Format("15:04:05")
	}
	fmt.Fprintf(w, "On the other device run:  danyue join %s\n", p.Code)
	fmt.Fprintf(w, "The code works once, until %s, on this network.", until)
	if len(p.Addresses) > 0 {
		fmt.Fprintf(w, " Where devices do not find each other (no multicast), add --pair-addr %s", p.Addresses[0])
		if len(p.Addresses) > 1 {
			fmt.Fprintf(w, " (or one of %s)", strings.Join(p.Addresses[1:], ", "))
		}
	}
	fmt.Fprintf(w, "\nWaiting for the other device… (Ctrl-C cancels)\n")
}

func runJoin(ctx context.Context, e *env, args []string) error {
	cc := newClientCmd(e, joinCommand(), "danyue join 7-crossover-clockwork", false)
	pairAddr := cc.fs.String("pair-addr", "", "with a short code, where the inviter waits (`HOST:PORT`, as danyue invite prints it), for networks without multicast")
	pos, err := parseArgs(cc.fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 || len(pos) > 3 {
		return &usageError{msg: "join takes exactly one invite code", hint: "danyue invite  (on a device of the library), then danyue join CODE"}
	}
	// A short code read out loud may be typed as three words.
	code := strings.Join(pos, "-")
	if len(pos) > 1 && strings.HasPrefix(strings.ToLower(pos[0]), "danyue") {
		return &usageError{msg: "join takes exactly one invite code", hint: "danyue invite  (on a device of the library), then danyue join CODE"}
	}
	c := cc.client()
	defer c.Close()
	j, err := c.JoinAt(ctx, code, *pairAddr)
	if err != nil {
		return cc.explain(err)
	}
	fmt.Fprintf(e.stdout, "Joined library %s. This device's books stay and sync with the library; `danyue peers` shows who is connected.\n", j.Library.ID)
	for _, w := range j.Warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	return nil
}
