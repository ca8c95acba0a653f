// Package library is this device as a member of its library, with no
// transport: the records it writes and merges, who the members are, the
// library secret and the peer nodes that run on it, tombstone collection,
// pairing, and what is derived from all of that (the shelf's counts, the
// devices' names, clock warnings). A daemon opens one Library on its store
// and serves it to reader apps; every operation is a Go call that needs no
// HTTP, as tailscale's ipnlocal.LocalBackend is to its localapi
// (docs/design.md describes the layers and the sync model).
//
// What it owns, file by file:
//
//   - The write path (write.go, merge.go, kosync.go): every local write
//     goes through a crdt operation and one durable store batch; batches
//     from peers arrive through the store adapter the peer layer writes
//     to, after the hybrid clock has observed them. Both end in one place
//     that keeps the counts, names and members current and reports what
//     other devices did (Config.OnEvent).
//   - Membership (members.go, membership.go): the member set the peer
//     layer's gater asks, and who writes member records (pairing, joins,
//     forgets, leaves, hellos).
//   - The library secret (rotate.go, previous.go): its rotation when a
//     device is forgotten or leaves, and the restricted nodes that bring
//     members over from superseded secrets.
//   - The peer nodes (nodes.go), joins and leaves (join.go), short-code
//     pairing (pairing.go, the inviter; pairing_join.go, the joiner) and
//     SyncOnce (synconce.go).
//   - Tombstone collection (collect.go, summaries.go): summaries gossiped
//     among members, and purging what every current member holds.
//   - Clock warnings (clockwarn.go) and device names (names.go).
//
// # Locks
//
// Each concern has a lock of its own, which guards that concern's fields
// only: the clock, the names, the counts, the clock warnings, the member
// set, the parked rekey offers, the peer nodes, collection, pairing, and
// the spawning of goroutines. None is held during network I/O or a store
// write, and none is held while another is taken, except in this order:
//
//	moveMu -> any other
//	parked offers -> member set    (an offer is parked or taken atomically
//	                                with the check of its sender)
//	collection -> member set       (summaries are filtered to members)
//
// moveMu serialises whatever replaces the nodes (joins, leaves,
// rotations, dropping superseded secrets) and is held across their network
// I/O; nothing waits for it on a request's or the peer layer's hot path.
// The store's own locks are below all of these.
package library
