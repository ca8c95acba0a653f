package main

import "runtime/debug"

// daemonMemoryLimit is the soft limit on the Go runtime's memory that the
// daemon runs under (runtime/debug.SetMemoryLimit). The Go collector
// otherwise lets the heap grow to twice what is live before it collects,
// and during a burst of writes (a flood from a member, a device joining a
// large library) most of what badger allocates is short-lived: table
// builders, 3 MB index buffers per table written by a compaction,
// memtable arenas. With the limit the collector runs as the heap nears it
// instead, so the process's anonymous memory stays near the limit rather
// than near twice the peak of the live heap. It is soft: when the live heap
// is larger the runtime lets it grow (and caps the collector at half the
// CPU), so a larger library slows down rather than fails.
//
// The daemon owns its process, so it sets the limit; a program embedding
// the daemon package (an app on a phone) chooses its own. GOMEMLIMIT in
// the environment overrides it (GOMEMLIMIT=off: no limit).
const daemonMemoryLimit = 48 << 20

// setDaemonMemoryLimit applies daemonMemoryLimit unless GOMEMLIMIT is set,
// and returns a function that restores the limit before it.
func setDaemonMemoryLimit(e *env) (restore func()) {
	if e.getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(daemonMemoryLimit)
	return func() { debug.SetMemoryLimit(prev) }
}
