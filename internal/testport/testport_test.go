package testport

import (
	"fmt"
	"net"
	"testing"
)

func TestLoopbackIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	for range 20 {
		p := Loopback(t)
		if p < 20000 || p >= 32768 {
			t.Fatalf("port %d outside 20000-32767", p)
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("cannot listen on the port given: %v", err)
		}
		ln.Close()
	}
}
