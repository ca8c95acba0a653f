package main

import (
	"context"
	"fmt"
	"time"

	"github.com/danyue/danyue/daemon/client"
)

// printKosyncDocuments prints what KOReader devices synced through the
// library's kosync listeners: a second table under the shelf, or alone
// (only) with --kosync, where --json prints the list as an array. `books
// --json` without --kosync keeps printing the array of books it always
// printed.
func printKosyncDocuments(ctx context.Context, e *env, c *client.Client, cf clientFlags, only bool) error {
	docs, err := c.KosyncProgress(ctx)
	if err != nil {
		return cf.explain(err)
	}
	if only && *cf.json {
		return printJSON(e.stdout, docs)
	}
	if len(docs) == 0 {
		if only {
			fmt.Fprintln(e.stdout, "No KOReader documents: no device has synced progress through `danyue daemon --kosync`.")
		}
		return nil
	}
	if !only {
		fmt.Fprintln(e.stdout, "\nKOReader documents")
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "USER\tBOOK\tAT\tDEVICE\tUPDATED\tVIA")
	for _, d := range docs {
		updated := d.At
		if t, err := time.Parse(time.RFC3339Nano, d.At); err == nil {
			updated = t.Local().Format("2006-01-02 15:04")
		}
		// The title once a device keyed the file (danyue key), else
		// KOReader's id: all there is to go by.
		book := d.Document
		if d.Title != "" {
			book = d.Title
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%s\t%s\t%s\n", printable(d.User), printable(book), d.Percentage*100, orDash(printable(d.Device)), updated, orDash(printable(d.DaemonName)))
	}
	return tw.Flush()
}
