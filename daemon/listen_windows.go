package daemon

import (
	"fmt"
	"net"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// On Windows the local API is a named pipe, not an AF_UNIX socket. Windows'
// AF_UNIX sockets carry no peer credentials, so the only guard would be the
// ACL of the directory holding the socket file, which is inherited from
// wherever the data dir lives and is easy to get wrong. A pipe carries its
// own security descriptor, which the kernel checks when a client opens it:
// this one admits only the user the daemon runs as (GA to that SID, nothing
// inherited), and go-winio creates the pipe rejecting remote clients.
// Docker and containerd serve their local APIs the same way. Every
// connection that got through the pipe is therefore vouched for by the
// kernel. The name (pipeName) is derived from the data dir; the first
// instance is created exclusively, so if another account took the name
// first the daemon fails to start instead of sharing the pipe, and the
// client checks that the pipe's server runs as its own user.

func defaultSocket(dataDir string) string { return pipeName(dataDir) }

// listenLocal listens on the named pipe path with a DACL that admits only
// the current user.
func listenLocal(path string) (net.Listener, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("listen on %s: who am I: %w", path, err)
	}
	ln, err := winio.ListenPipe(path, &winio.PipeConfig{
		SecurityDescriptor: "D:P(A;;GA;;;" + tu.User.Sid.String() + ")",
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, nil
}

// removeLocal has nothing to do: a pipe goes with its last handle.
func removeLocal(string) {}

// localCaller: only this user could open the pipe (see above).
func localCaller(net.Conn) connInfo { return connInfo{kind: connUnix, uid: -1, vouched: true} }

// fileLimit: Windows has no limit on open handles per process but memory,
// so the budget uses its default.
func fileLimit() uint64 { return 0 }
