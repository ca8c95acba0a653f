// Package away runs testnet's away-from-home scenarios (the away-* ones,
// on the NAT lab of testnet/natlab.go) as tests. They live in a test binary
// of their own so that go test runs them beside testnet's other scenarios
// rather than after them: they mostly wait (an idle window, libp2p's
// minute before a port mapping shows), and each builds a lab of its own.
// `go run ./testnet/cmd/testnet -run '^away-'` runs the same scenarios.
package away
