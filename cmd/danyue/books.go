package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

func booksCommand() command {
	return command{
		name:    "books",
		usage:   "[--deleted] [--sort recent|title|key] [--limit N] [--kosync] [--json]",
		summary: "List the books on the shelf: position, reading time and where they were last read; then what KOReader devices synced.",
		run:     runBooks,
	}
}

// booksPage is how many books the command asks for at a time: the shelf
// is read a page at a time, so a large one streams instead of arriving as
// one answer.
const booksPage = 500

func runBooks(ctx context.Context, e *env, args []string) error {
	cc := newClientCmd(e, booksCommand(), "danyue books --sort title --limit 20", true)
	deleted := cc.fs.Bool("deleted", false, "include books removed from the shelf")
	sort := cc.fs.String("sort", "recent", "order: recent (last read first), title, or key")
	limit := cc.fs.Int("limit", 0, "list at most `N` books (0: all)")
	kosyncOnly := cc.fs.Bool("kosync", false, "list only the KOReader documents (progress synced through --kosync); with --json, as an array")
	if err := cc.parse(args); err != nil {
		return err
	}
	switch {
	case *sort != "recent" && *sort != "title" && *sort != "key":
		return &usageError{msg: fmt.Sprintf("--sort must be recent, title or key, not %q", *sort), hint: "danyue books --sort title"}
	case *limit < 0:
		return &usageError{msg: fmt.Sprintf("--limit must be 0 (all) or more, not %d", *limit), hint: "danyue books --limit 20"}
	}
	c := cc.client()
	defer c.Close()
	if *kosyncOnly {
		return printKosyncDocuments(ctx, e, c, cc.clientFlags, true)
	}
	q := client.BooksQuery{Sort: *sort, Deleted: *deleted, Limit: booksPage}
	if *limit > 0 {
		q.Limit = min(*limit, booksPage)
	}
	var out bookPrinter = &bookTable{w: e.stdout}
	if *cc.json {
		out = &bookJSON{w: e.stdout}
	}
	n := 0
	err := c.EachBook(ctx, q, func(b api.Book) error {
		if *limit > 0 && n == *limit {
			return errEnough
		}
		n++
		return out.book(b)
	})
	if err != nil && !errors.Is(err, errEnough) {
		return cc.explain(err)
	}
	if err := out.end(); err != nil {
		return err
	}
	if *cc.json {
		return nil
	}
	return printKosyncDocuments(ctx, e, c, cc.clientFlags, false)
}

// errEnough stops the walk at --limit.
var errEnough = errors.New("enough books")

// bookPrinter writes books as they come, so that the command's memory does
// not grow with the shelf.
type bookPrinter interface {
	book(api.Book) error
	end() error
}

// bookJSON writes a JSON array, as printJSON would write the whole slice.
type bookJSON struct {
	w io.Writer
	n int
}

func (j *bookJSON) book(b api.Book) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("  ", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return err
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	sep := ",\n  "
	if j.n == 0 {
		sep = "[\n  "
	}
	j.n++
	_, err := fmt.Fprintf(j.w, "%s%s", sep, data)
	return err
}

func (j *bookJSON) end() error {
	if j.n == 0 {
		_, err := fmt.Fprintln(j.w, "[]")
		return err
	}
	_, err := fmt.Fprint(j.w, "\n]\n")
	return err
}

// bookTable writes the table a page at a time: columns line up within
// booksPage rows.
type bookTable struct {
	w  io.Writer
	tw *table
	n  int
}

func (t *bookTable) book(b api.Book) error {
	if t.tw == nil {
		t.tw = newTable(t.w)
		fmt.Fprintln(t.tw, "TITLE\tAT\tREAD TIME\tLAST READ ON\tKEY")
	}
	fmt.Fprintf(t.tw, "%s\t%s\t%s\t%s\t%s\n", bookTitle(b), bookAt(b), readTime(b.ReadTime.TotalMs), lastDevice(b), b.Key)
	if t.n++; t.n%booksPage == 0 {
		return t.tw.Flush()
	}
	return nil
}

func (t *bookTable) end() error {
	if t.n == 0 {
		_, err := fmt.Fprintln(t.w, "The shelf is empty.")
		return err
	}
	return t.tw.Flush()
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
		t += " [deleted"
		if b.KeptUntil != nil {
			if u, err := time.Parse(time.RFC3339, *b.KeptUntil); err == nil {
				t += ", restorable until " + u.Local().Format(time.DateOnly)
			}
		}
		t += "]"
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
