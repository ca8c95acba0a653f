package main

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/daemon/kosync"
)

func kosyncCommand() command {
	return command{
		name:    "kosync",
		usage:   "adduser|passwd|deluser NAME [--password-stdin]",
		summary: "Manage the library's KOReader progress-sync accounts (served by `danyue daemon --kosync ADDRESS`): adduser creates one, passwd changes its password, deluser removes it.",
		run:     runKosync,
	}
}

const kosyncHint = "danyue kosync adduser|passwd|deluser NAME"

func runKosync(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, kosyncCommand(), "danyue kosync adduser alice    # then, in KOReader: Progress sync, Custom sync server, Login")
	cf := addClientFlags(fs, e, false)
	fromStdin := fs.Bool("password-stdin", false, "read the password from the first line of standard input instead of prompting for it (adduser, passwd)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return &usageError{msg: "kosync needs a subcommand", hint: kosyncHint}
	}
	sub := pos[0]
	switch sub {
	case "adduser", "passwd", "deluser":
	default:
		return &usageError{msg: fmt.Sprintf("unknown kosync subcommand %q", sub), hint: kosyncHint}
	}
	if len(pos) != 2 {
		return &usageError{msg: fmt.Sprintf("kosync %s takes exactly one account NAME", sub), hint: "danyue kosync " + sub + " alice"}
	}
	name := pos[1]
	if err := kosync.ValidUserName(name); err != nil {
		return &usageError{msg: fmt.Sprintf("account name: %v", err), hint: "danyue kosync " + sub + " alice"}
	}
	var password string
	if sub != "deluser" {
		if password, err = readPassword(e, name, *fromStdin); err != nil {
			return err
		}
	}
	c := cf.client()
	defer c.Close()
	switch sub {
	case "adduser":
		_, err = c.KosyncAddUser(ctx, name, koreaderKey(password))
	case "passwd":
		err = c.KosyncPasswd(ctx, name, koreaderKey(password))
	case "deluser":
		err = c.KosyncDelUser(ctx, name)
	}
	if err != nil {
		var apiErr *client.APIError
		if errors.As(err, &apiErr) {
			switch apiErr.Code {
			case api.CodeNameTaken:
				return fmt.Errorf("%s; log in with it in KOReader, or choose another name", apiErr.Detail)
			case api.CodeNotFound:
				return fmt.Errorf("%s; `danyue kosync adduser %s` creates it", apiErr.Detail, name)
			}
		}
		return cf.explain(err)
	}
	switch sub {
	case "adduser":
		fmt.Fprintf(e.stdout, "Created the KOReader account %q. Every daemon of the library started with --kosync serves it once they have synced.\n", name)
		fmt.Fprintf(e.stdout, "In KOReader: Progress sync, Custom sync server http://THIS-HOST:PORT (the daemon's --kosync), then Login as %s.\n", name)
	case "passwd":
		fmt.Fprintf(e.stdout, "Changed the password of %q. KOReader devices must log in again with the new one (Progress sync, Logout, Login).\n", name)
	case "deluser":
		fmt.Fprintf(e.stdout, "Removed the KOReader account %q from the library; its devices can no longer sync. Its progress records stay.\n", name)
	}
	return nil
}

// koreaderKey is what KOReader sends for a password: its MD5 in lowercase
// hex. The daemon never sees the password itself.
func koreaderKey(password string) string {
	sum := md5.Sum([]byte(password))
	return hex.EncodeToString(sum[:])
}

// readPassword reads the account's password: one line of stdin with
// --password-stdin, else twice from the terminal without echo.
func readPassword(e *env, name string, fromStdin bool) (string, error) {
	var password string
	if fromStdin {
		line, err := bufio.NewReader(e.stdin).ReadString('\n')
		if err != nil && (!errors.Is(err, io.EOF) || line == "") {
			return "", fmt.Errorf("read the password from stdin: %w", err)
		}
		// Only the line end goes: blanks may be part of the password.
		password = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	} else {
		f, ok := e.stdin.(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			return "", &usageError{msg: "standard input is not a terminal, so the password cannot be asked for",
				hint: "printf '%s\\n' \"$PASSWORD\" | danyue kosync adduser " + name + " --password-stdin"}
		}
		first, err := promptPassword(e, f, fmt.Sprintf("KOReader password for %s: ", name))
		if err != nil {
			return "", err
		}
		again, err := promptPassword(e, f, "Again: ")
		if err != nil {
			return "", err
		}
		if first != again {
			return "", errors.New("the two passwords differ; nothing was created")
		}
		password = first
	}
	// KOReader refuses a blank password at login, so an account with one
	// could never be used.
	if strings.TrimSpace(password) == "" {
		return "", errors.New("the password is empty; KOReader cannot log in with a blank password")
	}
	return password, nil
}

func promptPassword(e *env, f *os.File, prompt string) (string, error) {
	fmt.Fprint(e.stderr, prompt)
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(e.stderr)
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	return string(b), nil
}
