// Package daemon wires the store, the merge core and the peer network into the
// background process that reader apps talk to through a local HTTP API.
package daemon
