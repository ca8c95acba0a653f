package testnet

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/danyue/danyue/internal/leaks"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(leaks.Ignore(), goleak.Cleanup(func(int) { RemoveBinary() }))...)
}
