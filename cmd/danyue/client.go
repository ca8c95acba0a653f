package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/client"
)

// clientFlags are the flags of every command that talks to a daemon.
type clientFlags struct {
	data   *string
	socket *string
	json   *bool
}

func addClientFlags(fs *flagSet, e *env, withJSON bool) clientFlags {
	cf := clientFlags{
		data:   dataDirFlag(fs, e),
		socket: fs.String("socket", "", socketHelp),
	}
	if withJSON {
		cf.json = fs.Bool("json", false, "print JSON for scripts instead of a table")
	}
	return cf
}

// clientCmd is the setup shared by the commands that talk to a daemon: a
// flag set with --data, --socket (and --json for those that print data),
// and the parse of the arguments. A command registers its own flags on fs
// between newClientCmd and parse.
type clientCmd struct {
	clientFlags
	fs  *flagSet
	cmd command
}

func newClientCmd(e *env, c command, example string, withJSON bool) *clientCmd {
	fs := newFlagSet(e, c, example)
	return &clientCmd{clientFlags: addClientFlags(fs, e, withJSON), fs: fs, cmd: c}
}

// parse parses args for a command that takes no positional arguments.
func (cc *clientCmd) parse(args []string) error {
	pos, err := parseArgs(cc.fs, args)
	if err != nil {
		return err
	}
	return noArgs(cc.cmd, pos)
}

func (cf clientFlags) client() *client.Client {
	sock := *cf.socket
	if sock == "" {
		sock = daemon.DefaultSocket(*cf.data)
	}
	return client.New(sock)
}

// explain turns a client error into one that tells the user what to do.
func (cf clientFlags) explain(err error) error {
	if errors.Is(err, client.ErrNoDaemon) {
		return fmt.Errorf("no daemon is running for %s: start it with `danyue daemon --data %s`", *cf.data, *cf.data)
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func noArgs(c command, pos []string) error {
	if len(pos) > 0 {
		return &usageError{msg: fmt.Sprintf("%s takes no arguments, got %q", c.name, pos), hint: "danyue help " + c.name}
	}
	return nil
}
