package main

import (
	"context"
	"fmt"
)

func peersCommand() command {
	return command{
		name:    "peers",
		usage:   "[--json]",
		summary: "List the other devices of the library this daemon knows, connected or not.",
		run:     runPeers,
	}
}

func runPeers(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, peersCommand(), "danyue peers")
	cf := addClientFlags(fs, e, true)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(peersCommand(), pos); err != nil {
		return err
	}
	c := cf.client()
	defer c.Close()
	peers, err := c.Peers(ctx)
	if err != nil {
		return cf.explain(err)
	}
	if *cf.json {
		return printJSON(e.stdout, peers)
	}
	if len(peers) == 0 {
		fmt.Fprintln(e.stdout, "No peers yet. Run `danyue invite` here and `danyue join CODE` on another device.")
		return nil
	}
	return printPeers(e, peers)
}
