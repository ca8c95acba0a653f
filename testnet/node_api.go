package testnet

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"os/exec"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/startproc"
)

// Shorthands for scenarios: each calls the node's API through its client and
// fails the test on error. Then the danyue command, run as a user would.

// apiTimeout bounds one API call of a shorthand.
const apiTimeout = 10 * time.Second

// BookKey returns a valid md5 BookKey derived from name.
func BookKey(name string) string {
	sum := md5.Sum([]byte(name))
	return "md5:" + hex.EncodeToString(sum[:])
}

func (n *Node) call(what string, fn func(ctx context.Context) error) {
	n.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		n.net.t.Fatalf("%s: %s: %v", n.name, what, err)
	}
}

// SetPosition puts the reader of key at char/percent, naming the book if
// title is not empty, and returns the book as acknowledged.
func (n *Node) SetPosition(key string, char int64, percent float64, title string) api.Book {
	n.net.t.Helper()
	var b api.Book
	n.call("set position", func(ctx context.Context) (err error) {
		b, err = n.c.SetPosition(ctx, key, char, percent, title)
		return err
	})
	return b
}

// AddReadTime adds ms of reading on this node and returns the book.
func (n *Node) AddReadTime(key string, ms int64) api.Book {
	n.net.t.Helper()
	var b api.Book
	n.call("add read time", func(ctx context.Context) (err error) {
		b, err = n.c.AddReadTime(ctx, key, ms, "")
		return err
	})
	return b
}

// Delete removes key from the shelf and returns the book.
func (n *Node) Delete(key string) api.Book {
	n.net.t.Helper()
	var b api.Book
	n.call("delete", func(ctx context.Context) (err error) {
		b, err = n.c.Delete(ctx, key)
		return err
	})
	return b
}

// TryDelete is Delete for a key the node may never have seen: false, and
// nothing written, if it has not (the API answers 404 not_found).
func (n *Node) TryDelete(key string) (api.Book, bool) {
	n.net.t.Helper()
	var b api.Book
	found := true
	n.call("delete", func(ctx context.Context) (err error) {
		b, err = n.c.Delete(ctx, key)
		if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.Code == api.CodeNotFound {
			found, err = false, nil
		}
		return err
	})
	return b, found
}

// Book returns the node's record of key.
func (n *Node) Book(key string) api.Book {
	n.net.t.Helper()
	var b api.Book
	n.call("get book", func(ctx context.Context) (err error) {
		b, err = n.c.Book(ctx, key)
		return err
	})
	return b
}

// Books returns every book the node has, deleted ones included.
func (n *Node) Books() []api.Book {
	n.net.t.Helper()
	var bs []api.Book
	n.call("list books", func(ctx context.Context) (err error) {
		bs, err = n.c.Books(ctx, true)
		return err
	})
	return bs
}

// Peers returns the devices the node knows.
func (n *Node) Peers() []api.Peer {
	n.net.t.Helper()
	var ps []api.Peer
	n.call("peers", func(ctx context.Context) (err error) {
		ps, err = n.c.Peers(ctx)
		return err
	})
	return ps
}

// CLIResult is what one run of the danyue command printed and returned.
type CLIResult struct {
	Stdout, Stderr string
	Code           int
}

// CLI runs the danyue command args[0] with --data set to the node's data
// dir, inside the node's namespace, and returns its output and exit code.
// The error is about running it at all; a non-zero exit is in Code.
func (n *Node) CLI(ctx context.Context, args ...string) (CLIResult, error) {
	if len(args) == 0 {
		return CLIResult{}, errors.New("CLI: no command given")
	}
	bin, err := Binary()
	if err != nil {
		return CLIResult{}, err
	}
	argv := append([]string{bin, args[0], "--data", n.dir}, args[1:]...)
	if n.ns != "" {
		argv = append([]string{"ip", "netns", "exec", n.ns}, argv...)
	}
	var stdout, stderr bytes.Buffer
	err = startproc.Run(func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		stdout.Reset()
		stderr.Reset()
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd
	})
	res := CLIResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.Code, err = exit.ExitCode(), nil
	}
	return res, err
}

// Status returns the node's status, failing the test on error.
func (n *Node) Status() api.Status {
	n.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := n.c.Status(ctx)
	if err != nil {
		n.net.t.Fatalf("%s: status: %v", n.name, err)
	}
	return st
}
