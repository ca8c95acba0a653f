package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

func statusCommand() command {
	return command{
		name:    "status",
		usage:   "[--json]",
		summary: "Show this device, its library, its peers and what is on the shelf.",
		run:     runStatus,
	}
}

func runStatus(ctx context.Context, e *env, args []string) error {
	cc := newClientCmd(e, statusCommand(), "danyue status --json", true)
	if err := cc.parse(args); err != nil {
		return err
	}
	c := cc.client()
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return cc.explain(err)
	}
	if *cc.json {
		return printJSON(e.stdout, st)
	}
	tw := newTable(e.stdout)
	fmt.Fprintf(tw, "Device\t%s (%s)\n", printable(st.Device.Name), st.Device.ID)
	fmt.Fprintf(tw, "Library\t%s\n", st.Library.ID)
	fmt.Fprintf(tw, "Books\t%d on the shelf, %d deleted\n", st.Counts.Books, st.Counts.Deleted)
	fmt.Fprintf(tw, "Peers\t%d connected of %d known\n", st.Counts.PeersConnected, st.Counts.PeersKnown)
	if st.HTTP != "" {
		fmt.Fprintf(tw, "API (TCP)\thttp://%s\n", st.HTTP)
	}
	if len(st.KosyncURLs) > 0 {
		fmt.Fprintf(tw, "KOReader sync\t%s\n", strings.Join(st.KosyncURLs, "\n\t"))
	}
	if len(st.Addresses) > 0 {
		fmt.Fprintf(tw, "Listening\t%s\n", strings.Join(st.Addresses, "\n\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Peers) > 0 {
		fmt.Fprintln(e.stdout)
		if err := printPeers(e, st.Peers); err != nil {
			return err
		}
		printPulling(e, st.Peers)
	}
	if st.Unreachable != "" {
		fmt.Fprintf(e.stdout, "warning: %s\n", printable(st.Unreachable))
	}
	// The writers whose changes arrived stamped ahead of this clock, which
	// may be devices that are not peers of this one at all.
	for _, w := range st.ClockWarnings {
		fmt.Fprintf(e.stdout, "warning: %s\n", printable(w.Warning))
	}
	// Devices over the bounds of what one device may write: a member
	// gone wrong, or one to forget.
	for _, w := range st.BoundsWarnings {
		fmt.Fprintf(e.stdout, "warning: %s\n", printable(w.Warning))
	}
	// Addresses that burned this device's pairing codes lately: possibly
	// someone on the network trying to pair.
	for _, w := range st.PairingWarnings {
		fmt.Fprintf(e.stdout, "warning: pairing: %s\n", printable(w.Warning))
	}
	if l := st.StoreLoss; l != nil {
		fmt.Fprintf(e.stdout, "error: %s\n", l.Warning)
		const show = 20
		for _, r := range l.Records[:min(len(l.Records), show)] {
			fmt.Fprintf(e.stdout, "  lost: %s\n", r)
		}
		if len(l.Records) > show {
			fmt.Fprintf(e.stdout, "  lost: %d more records (danyue status --json lists them)\n", len(l.Records)-show)
		}
		if l.Unnamed > 0 {
			fmt.Fprintf(e.stdout, "  lost: %d more changes to records no longer known\n", l.Unnamed)
		}
	}
	return nil
}

func printPeers(e *env, peers []api.Peer) error {
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "NAME\tDEVICE\tSTATE\tLAST SEEN\tCLOCK")
	for _, p := range peers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", orDash(printable(p.Name)), p.Device, peerStateText(p), lastSeen(p), clockOffset(p))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printUnreachable(e, peers)
	for _, p := range peers {
		if p.ClockWarning != "" {
			fmt.Fprintf(e.stdout, "warning: %s\n", printable(p.ClockWarning))
		}
	}
	return nil
}

// peerStateText is api.Peer.State for a table, with how a connected peer
// is reached.
func peerStateText(p api.Peer) string {
	switch state := p.State; {
	case p.Connected && p.Via == "lan":
		return "connected (LAN)"
	case p.Connected && p.Via == "internet" && p.HolePunched:
		return "connected (internet, hole punched)"
	case p.Connected && p.Via == "internet":
		return "connected (internet)"
	case state == "relayed":
		return "relayed (through a member; connecting directly)"
	case p.Connected:
		return "connected"
	case state == "never-met":
		return "never met"
	case state == "":
		return "offline" // a daemon of an older build
	default:
		return state
	}
}

// printUnreachable says, under a table, where each unreachable device was
// last and why the last dial failed.
func printUnreachable(e *env, peers []api.Peer) {
	for _, p := range peers {
		if p.Connected || p.State != "unreachable" {
			continue
		}
		line := orDash(printable(p.Name)) + " is unreachable"
		if len(p.Addresses) > 0 {
			addrs := p.Addresses
			if len(addrs) > 3 {
				addrs = append(addrs[:3:3], fmt.Sprintf("%d more", len(p.Addresses)-3))
			}
			line += " at " + printable(strings.Join(addrs, ", "))
		}
		if p.LastError != "" {
			line += ": " + printable(p.LastError)
		}
		fmt.Fprintln(e.stdout, line)
	}
}

func lastSeen(p api.Peer) string {
	if p.Connected {
		return "now"
	}
	if p.LastSeen == nil {
		return "never"
	}
	t, err := time.Parse(time.RFC3339, *p.LastSeen)
	if err != nil {
		return *p.LastSeen
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

func clockOffset(p api.Peer) string {
	d := time.Duration(p.ClockOffsetMs) * time.Millisecond
	if d >= 0 {
		return "+" + d.Round(time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
