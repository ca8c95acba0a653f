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
	cc := newClientCmd(e, peersCommand(), "danyue peers", true)
	if err := cc.parse(args); err != nil {
		return err
	}
	c := cc.client()
	defer c.Close()
	peers, err := c.Peers(ctx)
	if err != nil {
		return cc.explain(err)
	}
	if *cc.json {
		return printJSON(e.stdout, peers)
	}
	if len(peers) == 0 {
		// The daemon lists every member of the library (never met ones
		// too), so this is a library of one.
		fmt.Fprintln(e.stdout, "No other devices in this library yet. Run `danyue invite` here and `danyue join CODE` on another device.")
		return nil
	}
	return printPeers(e, peers)
}
