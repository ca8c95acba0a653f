// Package daemon is the background process reader apps talk to: it opens
// the device's store and its library (package library, which owns the
// library's domain: writes, members, the secret, the peer network,
// collection and pairing) and serves them on a local HTTP API (a unix
// socket or named pipe, an optional loopback TCP port, in process for an
// app that embeds it), with the status page and KOReader's progress sync.
// Its handlers check who calls and what they send, call the library, and
// render the answer; the listeners' limits and the OS glue live here too.
package daemon
