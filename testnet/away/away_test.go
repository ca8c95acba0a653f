package away

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/danyue/danyue/internal/leaks"
	"github.com/danyue/danyue/testnet"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(leaks.Ignore(), goleak.Cleanup(func(int) { testnet.RemoveBinary() }))...)
}

// long skips a scenario that takes long under -short, as testnet's own
// tests do: the race tier runs the others.
func long(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long scenario; it runs without -short")
	}
}

// The scenarios run beside each other too: each has a NAT lab of its own.

func TestAwayWrites(t *testing.T) { t.Parallel(); testnet.AwayWrites(t, testnet.Params{}, nil) }
func TestAwayThroughHome(t *testing.T) {
	t.Parallel()
	testnet.AwayThroughHome(t, testnet.Params{}, nil)
}
func TestAwayUnreachable(t *testing.T) {
	t.Parallel()
	testnet.AwayUnreachable(t, testnet.Params{}, nil)
}
func TestAwayStrangers(t *testing.T) {
	long(t)
	t.Parallel()
	testnet.AwayStrangers(t, testnet.Params{}, nil)
}
func TestAwayPortMap(t *testing.T) {
	long(t)
	t.Parallel()
	testnet.AwayPortMap(t, testnet.Params{}, nil)
}
func TestAwayNewAddress(t *testing.T) {
	t.Parallel()
	testnet.AwayNewAddress(t, testnet.Params{}, nil)
}
func TestAwayIdle(t *testing.T) { long(t); t.Parallel(); testnet.AwayIdle(t, testnet.Params{}, nil) }

// The command runs the 50 tries the figures are given for.
func TestAwayPunch(t *testing.T) {
	long(t)
	t.Parallel()
	testnet.AwayPunch(t, testnet.Params{PunchTries: 5}, nil)
}

// A measurement for the choice of transport.
func TestAwayTransport(t *testing.T) {
	long(t)
	t.Parallel()
	testnet.AwayTransport(t, testnet.Params{PunchTries: 5}, nil)
}
