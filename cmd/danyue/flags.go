package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
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
