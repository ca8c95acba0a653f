package main

import (
	"context"
	"fmt"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

func booksCommand() command {
	return command{
		name:    "books",
		usage:   "[--deleted] [--kosync] [--json]",
		summary: "List the books on the shelf: position, reading time and where they were last read; then what KOReader devices synced.",
		run:     runBooks,
	}
}

func runBooks(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, booksCommand(), "danyue books --deleted")
	cf := addClientFlags(fs, e, true)
	deleted := fs.Bool("deleted", false, "include books removed from the shelf")
	kosyncOnly := fs.Bool("kosync", false, "list only the KOReader documents (progress synced through --kosync); with --json, as an array")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(booksCommand(), pos); err != nil {
		return err
	}
	c := cf.client()
	defer c.Close()
	if *kosyncOnly {
		return printKosyncDocuments(ctx, e, c, cf, true)
	}
	books, err := c.Books(ctx, *deleted)
	if err != nil {
		return cf.explain(err)
	}
	if *cf.json {
		return printJSON(e.stdout, books)
	}
	if len(books) == 0 {
		fmt.Fprintln(e.stdout, "The shelf is empty.")
		return printKosyncDocuments(ctx, e, c, cf, false)
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "TITLE\tAT\tREAD TIME\tLAST READ ON\tKEY")
	for _, b := range books {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", bookTitle(b), bookAt(b), readTime(b.ReadTime.TotalMs), lastDevice(b), b.Key)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printKosyncDocuments(ctx, e, c, cf, false)
}

func bookTitle(b api.Book) string {
	t := printable(b.Title)
	if t == "" {
		t = "(untitled)"
	}
	if r := []rune(t); len(r) > 40 {
		t = string(r[:39]) + "…"
	}
	if b.Deleted {
		t += " [deleted]"
	}
	return t
}

func bookAt(b api.Book) string {
	if b.Position == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", b.Position.Percent*100)
}

func readTime(ms uint64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d == 0:
		return "-"
	case d < time.Minute:
		return d.Round(time.Second).String()
	}
	h, m := int(d.Hours()), int(d.Minutes())%60
	if h == 0 {
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh%02dm", h, m)
}

func lastDevice(b api.Book) string {
	if b.Position == nil {
		return "-"
	}
	return orDash(printable(b.Position.DeviceName))
}
