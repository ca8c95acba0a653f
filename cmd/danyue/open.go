package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

func openCommand() command {
	return command{
		name:    "open",
		usage:   "[--print]",
		summary: "Open the library's status page in a browser: a one-time login link to the daemon's --http listener.",
		run:     runOpen,
	}
}

func runOpen(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, openCommand(), "danyue open    # needs a daemon started with --http 127.0.0.1:7100")
	cf := addClientFlags(fs, e, false)
	printOnly := fs.Bool("print", false, "only print the link; do not start a browser")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(openCommand(), pos); err != nil {
		return err
	}
	c := cf.client()
	defer c.Close()
	login, err := c.WebLogin(ctx)
	if err != nil {
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Code == api.CodeUnavailable {
			return fmt.Errorf("the page is served on the daemon's --http listener, and this daemon has none: restart it with `danyue daemon --data %s --http 127.0.0.1:7100`", *cf.data)
		}
		return cf.explain(err)
	}
	until := login.ExpiresAt
	if t, err := time.Parse(time.RFC3339, login.ExpiresAt); err == nil {
		until = t.Local().Format("15:04")
	}
	fmt.Fprintf(e.stdout, "Open this link in a browser on this computer; it logs in once, until %s:\n\n    %s\n\n", until, login.URL)
	if *printOnly {
		return nil
	}
	name, argv, ok := browserCommand(login.URL, e.getenv)
	if !ok {
		return nil
	}
	// Started, not waited for: some openers stay as long as the browser.
	cmd := exec.Command(name, argv...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "danyue: could not start a browser (%v); open the link by hand\n", err)
		return nil
	}
	go cmd.Wait() //nolint:errcheck // its status says nothing the user can act on
	return nil
}
