package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// flagSet is a command's flags and its help text.
type flagSet struct {
	*flag.FlagSet
	help func()
}

// newFlagSet returns a flag set whose help shows the command's synopsis, its
// options and an example. The flag package prints nothing itself: help goes
// to stdout when asked for, mistakes to stderr with a hint (see run).
func newFlagSet(e *env, c command, example string) *flagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	help := func() {
		w := e.stdout
		fmt.Fprintf(w, "Usage: danyue %s %s\n\n%s\n", c.name, c.usage, c.summary)
		var opts strings.Builder
		fs.SetOutput(&opts)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if opts.Len() > 0 {
			fmt.Fprintf(w, "\nOptions:\n%s", opts.String())
		}
		if example != "" {
			fmt.Fprintf(w, "\nExample:\n  %s\n", example)
		}
	}
	return &flagSet{FlagSet: fs, help: help}
}

// parseArgs parses flags wherever they appear among the positional arguments
// ("danyue key a.txt --json" as well as "danyue key --json a.txt"), which the
// flag package alone does not do. "--" ends the flags.
func parseArgs(fs *flagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				fs.help()
				return nil, err
			}
			return nil, &usageError{msg: err.Error(), hint: "danyue help " + fs.Name()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// fs.Parse stops at the first positional argument or after "--".
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// durationFlag defines a flag of a time.Duration whose parse error says
// what to write: the flag package's own says only "parse error", and a bare
// number is the mistake people make.
func durationFlag(fs *flagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var((*durationValue)(&d), name, usage)
	return &d
}

type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err == nil {
		*d = durationValue(v)
		return nil
	}
	if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
		return fmt.Errorf("a duration needs a unit: write %ss for seconds (or ms, m, h)", s)
	}
	return fmt.Errorf("not a duration: write it as 5s, 300ms, 2m or 1h30m")
}
