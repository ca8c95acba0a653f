package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// dial connects to the daemon's named pipe and checks that the process
// serving it runs as this user, since the client may be about to send the
// library's secrets.
func dial(ctx context.Context, pipe string) (net.Conn, error) {
	c, err := winio.DialPipeContext(ctx, pipe)
	if err != nil {
		return nil, err
	}
	if err := checkServer(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", pipe, err)
	}
	return c, nil
}

func checkServer(c net.Conn) error {
	f, ok := c.(interface{ Fd() uintptr })
	if !ok {
		return fmt.Errorf("cannot check the pipe's server: %T has no handle", c)
	}
	var pid uint32
	if err := windows.GetNamedPipeServerProcessId(windows.Handle(f.Fd()), &pid); err != nil {
		return fmt.Errorf("pipe server process: %w", err)
	}
	p, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		return fmt.Errorf("%w (process %d cannot be inspected: %v)", ErrNotOurDaemon, pid, err)
	}
	defer windows.CloseHandle(p)
	var tok windows.Token
	if err := windows.OpenProcessToken(p, windows.TOKEN_QUERY, &tok); err != nil {
		return fmt.Errorf("%w (process %d cannot be inspected: %v)", ErrNotOurDaemon, pid, err)
	}
	defer tok.Close()
	server, err := tok.GetTokenUser()
	if err != nil {
		return fmt.Errorf("pipe server's user: %w", err)
	}
	me, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return fmt.Errorf("who am I: %w", err)
	}
	if !server.User.Sid.Equals(me.User.Sid) {
		return fmt.Errorf("%w (process %d runs as %s)", ErrNotOurDaemon, pid, server.User.Sid)
	}
	return nil
}

// isNoDaemon reports whether a dial error means nothing serves the pipe:
// a pipe with no server does not exist.
func isNoDaemon(err error) bool { return errors.Is(err, os.ErrNotExist) }
