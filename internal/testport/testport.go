// Package testport gives tests a loopback port to listen on later, for a
// device that must come back at the address it had.
//
// A port the kernel hands out (listening on port 0) is in the system's
// ephemeral range, from which it also picks the source port of every
// outgoing connection: while the test's device is down, any connection on
// the machine may take the port, and the device cannot listen there again.
// So the port is picked below every system's ephemeral range (Linux's
// starts at 32768, Windows' and macOS's at 49152).
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// TB is the part of testing.TB that Loopback uses, so that a harness
// running outside go test (testnet's command) can ask for a port too.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Loopback returns a port on 127.0.0.1 that nothing listens on now, below
// the ephemeral ranges.
func Loopback(t TB) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		return port
	}
	t.Fatalf("testport: no free loopback port below the ephemeral range")
	return 0
}
