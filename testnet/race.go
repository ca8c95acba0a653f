//go:build race

package testnet

// raceDetector is true in a build with the race detector: the daemons the
// nodes run are then built with it too, so that a data race in a real
// daemon on a real network fails the scenario (Net.nodeLog).
const raceDetector = true
