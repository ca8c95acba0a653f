package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/danyue/danyue/daemon/api"
)

func devicesCommand() command {
	return command{
		name:    "devices",
		usage:   "[--json]",
		summary: "List the members of the library: who added them, forgotten or not, last seen, clock, how far behind.",
		run:     runDevices,
	}
}

func renameCommand() command {
	return command{
		name:    "rename",
		usage:   "NAME",
		summary: "Give this device a new name on every device; history keeps the names it was shown with.",
		run:     runRename,
	}
}

func forgetCommand() command {
	return command{
		name:    "forget",
		usage:   "DEVICE",
		summary: "Forget a lost or sold device (by name or id): no member accepts its connections, and the library's secret changes, so its copy of it, and old invite codes, reach nothing.",
		run:     runForget,
	}
}

func leaveCommand() command {
	return command{
		name:    "leave",
		usage:   "",
		summary: "Leave the library: this device removes itself and starts a library of its own (its books stay); the others change the library's secret.",
		run:     runLeave,
	}
}

func runDevices(ctx context.Context, e *env, args []string) error {
	cc := newClientCmd(e, devicesCommand(), "danyue devices", true)
	if err := cc.parse(args); err != nil {
		return err
	}
	c := cc.client()
	defer c.Close()
	list, err := c.Devices(ctx)
	if err != nil {
		return cc.explain(err)
	}
	if *cc.json {
		return printJSON(e.stdout, list)
	}
	return printDevices(e, list)
}

func printDevices(e *env, list []api.Member) error {
	names := make(map[string]string, len(list))
	for _, m := range list {
		names[m.ID] = m.Name
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "NAME\tDEVICE\tADDED BY\tSTATE\tLAST SEEN\tCLOCK\tBEHIND\tHOLDS")
	for _, m := range list {
		addedBy := "-"
		if m.AddedBy != nil {
			addedBy = orDash(printable(m.AddedByName))
			if *m.AddedBy == m.ID {
				addedBy = "itself"
			}
		}
		p := api.Peer{Connected: m.Connected, LastSeen: m.LastSeen}
		state, seen, clock, behind := "offline", lastSeen(p), "-", fmt.Sprint(m.Behind)
		switch {
		case m.Removed:
			state = "forgotten by " + orDash(printable(m.RemovedByName))
		case m.Self:
			state, seen, behind = "this device", "-", "-"
		case !m.Member:
			state = "not a member"
		default:
			state = peerStateText(api.Peer{State: m.State, Connected: m.Connected, Via: m.Via, HolePunched: m.HolePunched})
		}
		if m.ClockOffsetMs != nil {
			p.ClockOffsetMs = *m.ClockOffsetMs
			clock = clockOffset(p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(printable(m.Name)), m.ID, addedBy, state, seen, clock, behind, holds(m.Collection))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var holding []string
	for _, m := range list {
		if m.Collection != nil && m.Collection.Holding {
			holding = append(holding, orDash(printable(m.Name)))
		}
	}
	if len(holding) > 0 {
		fmt.Fprintf(e.stdout, "Deleted books are kept until %s catch up (or are forgotten).\n", strings.Join(holding, ", "))
	}
	for _, m := range list {
		if !m.Member && !m.Removed && m.MemberNote != "" {
			fmt.Fprintf(e.stdout, "%s is not a member: %s\n", orDash(printable(m.Name)), printable(m.MemberNote))
		}
	}
	var away []api.Peer
	for _, m := range list {
		away = append(away, api.Peer{Name: m.Name, State: m.State, Addresses: m.Addresses, LastError: m.LastError})
	}
	printUnreachable(e, away)
	for _, m := range list {
		if m.ClockWarning != "" {
			fmt.Fprintf(e.stdout, "warning: %s\n", printable(m.ClockWarning))
		}
	}
	return nil
}

func runRename(ctx context.Context, e *env, args []string) error {
	cc := newClientCmd(e, renameCommand(), `danyue rename "Study laptop"`, false)
	name, err := cc.words(args, &usageError{msg: "rename takes the new name", hint: `danyue rename "Study laptop"`})
	if err != nil {
		return err
	}
	c := cc.client()
	defer c.Close()
	m, err := c.Rename(ctx, name)
	if err != nil {
		return cc.explain(err)
	}
	fmt.Fprintf(e.stdout, "This device is now called %s on every device of the library. What it wrote before keeps the name it had then.\n", printable(m.Name))
	return nil
}

func runForget(ctx context.Context, e *env, args []string) error {
	cc := newClientCmd(e, forgetCommand(), `danyue forget "Old phone"`, false)
	device, err := cc.words(args, &usageError{msg: "forget takes the device's name or id", hint: "danyue devices  (to see them), then danyue forget DEVICE"})
	if err != nil {
		return err
	}
	c := cc.client()
	defer c.Close()
	m, err := c.Forget(ctx, device)
	if err != nil {
		return cc.explain(err)
	}
	fmt.Fprintf(e.stdout, "Forgot %s (%s). This device refuses its connections now, and every other device does once it hears of it.\n", orDash(printable(m.Name)), m.ID)
	fmt.Fprintln(e.stdout, "The library's secret has changed: the other devices take the new one when they next meet a device that has it. Invite codes made before no longer work.")
	return nil
}

func runLeave(ctx context.Context, e *env, args []string) error {
	cc := newClientCmd(e, leaveCommand(), "danyue leave", false)
	pos, err := parseArgs(cc.fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return &usageError{msg: "leave takes no arguments (to remove another device: danyue forget DEVICE)", hint: "danyue leave"}
	}
	c := cc.client()
	defer c.Close()
	l, err := c.Leave(ctx)
	if err != nil {
		return cc.explain(err)
	}
	if l.Delivered {
		fmt.Fprintln(e.stdout, "Left the library: the other devices know, and change its secret.")
	} else {
		fmt.Fprintln(e.stdout, "Left the library, but no other device confirmed it: they learn of it only if it reached one of them. To be sure, forget this device from another one (danyue forget).")
	}
	fmt.Fprintf(e.stdout, "This device is now in a library of its own (%s); its books stay on it.\n", l.Library.ID)
	return nil
}

// words parses args for a command that takes one name, and returns it: a
// name typed without quotes arrives as several words, joined by a space.
// Without one it returns missing.
func (cc *clientCmd) words(args []string, missing *usageError) (string, error) {
	pos, err := parseArgs(cc.fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) == 0 {
		return "", missing
	}
	return strings.Join(pos, " "), nil
}

// holds says whether a member holds tombstone collection back: "yes" with
// how many of this device's changes it is not known to hold.
func holds(c *api.MemberCollection) string {
	switch {
	case c == nil:
		return "-"
	case c.Holding && !c.Summary:
		return "yes (not heard from)"
	case c.Holding:
		return fmt.Sprintf("yes (%d behind)", c.Behind)
	}
	return "no"
}
