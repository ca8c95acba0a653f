//go:build !race

package testnet

// raceDetector is false in a build without the race detector (race.go).
const raceDetector = false
