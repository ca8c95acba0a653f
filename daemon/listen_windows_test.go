package daemon

import (
	"net"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// errAddrInUse is how the OS says that an address is taken.
var errAddrInUse error = windows.WSAEADDRINUSE

// dialLocal opens a raw connection to the daemon's local endpoint, a named
// pipe.
func dialLocal(path string) (net.Conn, error) { return winio.DialPipe(path, nil) }
