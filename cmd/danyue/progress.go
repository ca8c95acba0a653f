package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"time"

	"github.com/danyue/danyue/bookkey"
	"github.com/danyue/danyue/daemon/api"
)

func progressCommand() command {
	return command{
		name:    "progress",
		usage:   "FILE|KEY (--char N | --percent P) [--title T] [--read 5m] [--algo md5|sha256] [--encoding auto|utf-8|gb18030|utf-16] [--json]",
		summary: "Record where you are in a book, and optionally time read, as a reader app would: FILE is keyed like danyue key does (and the other of --char and --percent is computed from its length), KEY is a key it printed (then give both). For trying sync and for scripts, without the API.",
		run:     runProgress,
	}
}

// keyPattern is what a BookKey looks like as danyue key prints it.
var keyPattern = regexp.MustCompile(`^(md5|sha256):[0-9a-f]+$`)

func runProgress(ctx context.Context, e *env, args []string) error {
	flags := newFlagSet(e, progressCommand(), "danyue progress book.txt --percent 0.42 --title 'Dream of the Red Chamber' --read 25m")
	cf := addClientFlags(flags, e, true)
	char := flags.Int64("char", -1, "position as `N` UTF-16 code units into the normalized text (what danyue key counts as the length)")
	percent := flags.Float64("percent", -1, "position as a fraction `P` of the book, from 0 to 1")
	title := flags.String("title", "", "the book's `TITLE` (left as it is when not given)")
	read := durationFlag(flags, "read", 0, "add this `DURATION` of reading on this device (5m, 1h30m)")
	algoName := flags.String("algo", "md5", "hash function for a FILE, `md5|sha256`")
	encName := flags.String("encoding", "auto", "text encoding of a FILE, `auto|utf-8|gb18030|utf-16`, as for danyue key")
	pos, err := parseArgs(flags, args)
	if err != nil {
		return err
	}
	const hint = "danyue progress book.txt --percent 0.42"
	switch {
	case len(pos) != 1:
		return &usageError{msg: fmt.Sprintf("progress takes one FILE or KEY, got %d", len(pos)), hint: hint}
	case *char < -1 || *char == -1 && flags.isSet("char"):
		return &usageError{msg: fmt.Sprintf("--char must be 0 or more, not %d", *char), hint: hint}
	case flags.isSet("percent") && (*percent < 0 || *percent > 1 || *percent != *percent):
		return &usageError{msg: fmt.Sprintf("--percent is a fraction from 0 to 1, not %v (for 42%% write 0.42)", *percent), hint: hint}
	case *read < 0:
		return &usageError{msg: fmt.Sprintf("--read %v must not be negative", *read), hint: hint}
	case !flags.isSet("char") && !flags.isSet("percent") && *read == 0:
		return &usageError{msg: "progress needs --char or --percent (or --read for time alone)", hint: hint}
	}
	var opt bookkey.Options
	if opt.Algo, err = bookkey.ParseAlgo(*algoName); err != nil {
		return &usageError{msg: fmt.Sprintf("progress: unknown --algo %q", *algoName), hint: "danyue progress --algo sha256 book.txt --percent 0.5"}
	}
	if opt.Encoding, err = bookkey.ParseEncoding(*encName); err != nil {
		return &usageError{msg: fmt.Sprintf("progress: unknown --encoding %q", *encName), hint: "danyue progress --encoding gb18030 book.txt --percent 0.5"}
	}

	key, length, err := progressTarget(ctx, e, pos[0], opt)
	if err != nil {
		return err
	}
	setPos := flags.isSet("char") || flags.isSet("percent")
	if setPos {
		if *char, *percent, err = fillPosition(*char, *percent, length, flags.isSet("char"), flags.isSet("percent")); err != nil {
			return err
		}
	}

	c := cf.client()
	defer c.Close()
	var book api.Book
	if setPos {
		if book, err = c.SetPosition(ctx, key, *char, *percent, *title); err != nil {
			return cf.explain(err)
		}
	} else if *title != "" {
		return &usageError{msg: "--title goes with a position (--char or --percent)", hint: hint}
	}
	if *read > 0 {
		if book, err = c.AddReadTime(ctx, key, read.Milliseconds(), ""); err != nil {
			return cf.explain(err)
		}
	}
	if *cf.json {
		return printJSON(e.stdout, book)
	}
	fmt.Fprintln(e.stdout, describeProgress(book))
	if book.Notice != "" {
		fmt.Fprintf(e.stderr, "danyue: %s\n", book.Notice)
	}
	return nil
}

// isSet reports whether the flag name was given.
func (f *flagSet) isSet(name string) bool {
	set := false
	f.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// progressTarget returns the key of arg and the length of its text in
// UTF-16 code units (-1 when arg is a key, whose text is not at hand). An
// argument that names a file is a file, even one named like a key.
func progressTarget(ctx context.Context, e *env, arg string, opt bookkey.Options) (string, int64, error) {
	info, err := os.Stat(arg)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && keyPattern.MatchString(arg) {
			return arg, -1, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "", 0, &usageError{msg: fmt.Sprintf("progress: %s is neither a file nor a key (a key looks like md5:0123…, as danyue key prints it)", arg), hint: "danyue key " + arg}
		}
		return "", 0, err
	}
	if !info.Mode().IsRegular() {
		return "", 0, fmt.Errorf("progress: %s: %w", arg, errNotRegular{info.Mode()})
	}
	res, _, err := keyFile(ctx, arg, opt, nil)
	if err != nil {
		return "", 0, fmt.Errorf("progress: %s", describeKeyError(arg, err))
	}
	for _, w := range keyWarnings(arg, res, opt.Encoding) {
		fmt.Fprintf(e.stderr, "danyue: warning: %s: %s\n", arg, w)
	}
	return res.Key.String(), res.UTF16Len, nil
}

// fillPosition completes a position given by one of char and percent from
// the text's length (-1 if unknown, then both must be given), and checks
// that char lies within the text.
func fillPosition(char int64, percent float64, length int64, charSet, percentSet bool) (int64, float64, error) {
	const hint = "danyue progress md5:0123… --char 1234 --percent 0.12"
	switch {
	case length < 0 && !(charSet && percentSet):
		return 0, 0, &usageError{msg: "with a KEY give both --char and --percent (with a FILE one is enough: its length gives the other)", hint: hint}
	case length >= 0 && charSet && char > length:
		return 0, 0, &usageError{msg: fmt.Sprintf("--char %d is past the end of the text (%d UTF-16 code units)", char, length), hint: "danyue key FILE"}
	case length >= 0 && !charSet:
		char = int64(percent * float64(length))
	case length > 0 && !percentSet:
		percent = float64(char) / float64(length)
	case length == 0 && !percentSet:
		percent = 0
	}
	return char, percent, nil
}

// describeProgress is the line the command prints: where the book is now,
// and the reading time.
func describeProgress(b api.Book) string {
	s := b.Key
	if b.Title != "" {
		s = fmt.Sprintf("%q (%s)", b.Title, b.Key)
	}
	if p := b.Position; p != nil {
		s += fmt.Sprintf(": at char %d, %.1f%%", p.Char, p.Percent*100)
	}
	total := time.Duration(b.ReadTime.TotalMs) * time.Millisecond
	mine := time.Duration(b.ReadTime.ThisDeviceMs) * time.Millisecond
	return s + fmt.Sprintf("; read %v in all, %v on this device", total.Round(time.Second), mine.Round(time.Second))
}
