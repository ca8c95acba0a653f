// Command danyue is the danyue sync daemon and the command-line client that
// talks to it. Every subcommand lives in its own file as a function with the
// signature of command.run; main only maps the error to an exit status.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

// env is everything a command may touch of the process, so commands can be
// run in-process by tests.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

type command struct {
	name    string
	usage   string // the synopsis after "danyue NAME"
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands lists the subcommands; each is defined in its own file.
func commands() []command {
	return []command{
		daemonCommand(),
		statusCommand(),
		peersCommand(),
		devicesCommand(),
		renameCommand(),
		forgetCommand(),
		leaveCommand(),
		booksCommand(),
		restoreCommand(),
		inviteCommand(),
		openCommand(),
		joinCommand(),
		syncCommand(),
		repairCommand(),
		kosyncCommand(),
		keyCommand(),
		progressCommand(),
		serviceCommand(),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	code := run(ctx, e, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit status:
// 0 on success, 2 for a usage error, 1 for anything else.
func run(ctx context.Context, e *env, args []string) int {
	err := dispatch(ctx, e, args)
	var usage *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(e.stderr, "danyue: %s\n", usage.msg)
		if usage.hint != "" {
			fmt.Fprintf(e.stderr, "Try: %s\n", usage.hint)
		}
		return 2
	case errors.Is(err, errReported):
		return 1
	default:
		fmt.Fprintf(e.stderr, "danyue: %v\n", err)
		return 1
	}
}

func dispatch(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		printUsage(e.stderr)
		return &usageError{msg: "no command given", hint: "danyue help"}
	}
	name := args[0]
	if name == "version" || name == "--version" || name == "-version" {
		fmt.Fprintln(e.stdout, version())
		return nil
	}
	if name == "help" || name == "-h" || name == "--help" || name == "-help" {
		if len(args) > 1 {
			if c, ok := lookup(args[1]); ok {
				return c.run(ctx, e, []string{"--help"})
			}
		}
		printUsage(e.stdout)
		return nil
	}
	c, ok := lookup(name)
	if !ok {
		return &usageError{msg: fmt.Sprintf("unknown command %q", name), hint: "danyue help"}
	}
	return c.run(ctx, e, args[1:])
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// version says which build this is: the module version (a tag, or a
// pseudo-version with the commit, as go install and go build in a checkout
// stamp it), the commit, its time and whether the tree had changes, and the
// Go release and platform.
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi) + fmt.Sprintf(" %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// versionOf renders the version and version-control facts of bi (nil when
// the binary carries none). A build without either says so and how to get
// them, rather than a bare "(devel)".
func versionOf(bi *debug.BuildInfo) string {
	v := ""
	var rev, at string
	modified := false
	if bi != nil {
		if bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" && rev == "" {
		return "danyue (devel: this build carries no version or commit; go install github.com/danyue/danyue/cmd/danyue@latest, or go build in a git checkout without -buildvcs=false, stamps them)"
	}
	var facts []string
	if rev != "" {
		facts = append(facts, "commit "+rev[:min(len(rev), 12)])
	}
	if at != "" {
		facts = append(facts, at)
	}
	if modified {
		facts = append(facts, "with uncommitted changes")
	}
	out := "danyue " + cmp.Or(v, "(devel)")
	if len(facts) > 0 {
		out += " (" + strings.Join(facts, ", ") + ")"
	}
	return out
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "danyue keeps the reading position, reading time and deletions of your\n")
	fmt.Fprintf(w, "plain-text books in sync across your devices, peer to peer on the LAN.\n\n")
	fmt.Fprintf(w, "Usage:\n  danyue COMMAND [options]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun \"danyue help COMMAND\" for a command's options and an example; \"danyue --version\" for the build.\n")
}

// usageError is a mistake in the command line; main prints it with a hint and
// exits with status 2.
type usageError struct {
	msg  string
	hint string
}

func (e *usageError) Error() string { return e.msg }

// errReported means the command has already told the user what went wrong on
// stderr (for example one unreadable file among many) and only the exit status
// remains to be set.
var errReported = errors.New("errors reported")
