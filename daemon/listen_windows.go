package daemon

import (
	"errors"
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
	if err := claimFirstInstance(path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, nil
}

// claimFirstInstance opens and closes the pipe once, before the listener
// accepts anything, so that no client can connect to the pipe instance that
// go-winio creates only to own the name and never serves.
//
// go-winio creates that instance without read or write access, which on
// Windows 10 and later leaves it disconnected: clients can only reach the
// instances Accept creates, and this open finds none (ERROR_PIPE_BUSY,
// nothing to do). Older Windows and wine put every new instance in the
// listening state instead; there the first client connects to the unserved
// instance and waits for an answer that never comes (go-winio issues 173,
// 183 and 313), while later clients, reaching Accept's instances, work. This
// open is that first client, with no access and no impersonation, and it
// leaves the instance connected to nobody, out of the clients' way.
func claimFirstInstance(path string) error {
	name, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return err
	}
	h, err := windows.CreateFile(name, 0, 0, nil, windows.OPEN_EXISTING,
		windows.SECURITY_SQOS_PRESENT|windows.SECURITY_ANONYMOUS, 0)
	if errors.Is(err, windows.ERROR_PIPE_BUSY) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("claim the first pipe instance: %w", err)
	}
	return windows.CloseHandle(h)
}

// removeLocal has nothing to do: a pipe goes with its last handle.
func removeLocal(string) {}

// localCaller: only this user could open the pipe (see above).
func localCaller(net.Conn) connInfo { return connInfo{kind: connUnix, uid: -1, vouched: true} }

// fileLimit: Windows has no limit on open handles per process but memory,
// so the budget uses its default.
func fileLimit() uint64 { return 0 }
