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
//   - Membership (members.go, membership.go, invites.go): the member set
//     the peer layer asks, who writes member records (the device that made
//     the library, inviters, forgets, leaves), and the long invite codes
//     this device made.
//   - The library secret (rotate.go, previous.go): its rotation when a
//     device is forgotten or leaves, and the restricted nodes that bring
//     members over from superseded secrets.
//   - The peer nodes (nodes.go), joins and leaves (join.go), short-code
//     pairing (pairing.go, the inviter; pairing_join.go, the joiner) and
//     SyncOnce (synconce.go).
//   - Tombstone collection (collect.go, summaries.go): summaries gossiped
//     among members, and purging what every current member holds once
//     its undo window (Config.KeepDeleted) has passed.
//   - Clock warnings (clockwarn.go) and device names (names.go).
//   - The bounds of what each device may originate (bounds.go, the rule;
//     bounds_units.go, which devices share one device's bounds;
//     bounds_apply.go, applied to batches and residues from peers and told
//     in the log and the status).
//
// # Who is a member
//
// Holding the library's secret makes no member: the secret travels in long
// invite codes, and a forgotten device keeps the one it had. A device is a
// member only through an addition (a crdt.Member record) that a member
// made, as itself, when it paired the device: the inviter of a short code
// once the exchange succeeded, or the maker of a long code once the joiner
// presented the code's one-time ticket to it (invites.go). An addition is
// bound to the epoch of the library's secret it was made in. Nothing else
// adds anyone: not a hello, a summary, a residue or a rekey offer. A device
// that is not a member may complete the private network's handshake, and
// is given nothing (peer.Config.Member).
//
// Who counts, on each device (memberSet.recomputeLocked): start from this
// device and the roster of its epoch (the members the device that rotated
// to it named, carried by the rekey offer), or, where no secret ever rotated,
// the device that made the library and this device's inviter; then follow
// additions from the devices reached. Once a roster is known, an addition
// made in an older epoch counts only for a device the roster names; a
// forgotten device counts for nobody, and what it claims to add in an epoch
// after the one it was forgotten in counts for nobody either.
//
// # Threat model
//
// What each of these can and cannot do, with the test that shows it.
//
// A forgotten device (danyue forget; or a lost or stolen one):
//   - cannot connect to a member that has merged its removal, nor reach the
//     library's new secret (TestCopyOfAForgottenDevice, TestRekeyPolicy,
//     TestRekeyFromRemovedMember);
//   - cannot make anyone a member: its long codes are redeemed by no current
//     member, and an addition it claims after its removal counts for nobody
//     (TestMemberRules, TestOfflineMemberBringsNobodyBack);
//   - keeps what it had when it was forgotten, and, until a member that was
//     offline during the forget has learned of it, can still sync with that
//     member, which has nothing written after the forget to give it
//     (TestOfflineMemberBringsNobodyBack).
//
// An old long code (one made before a forget, used, cancelled or expired):
//   - makes nobody a member: its ticket is redeemed once, only by the device
//     that made it, only in the epoch it was made in and before it expires
//     (store.TestInvites, TestLongCodeWorksOnce);
//   - after a forget carries a superseded secret, so it completes a handshake
//     only with a member still offline since then, which gives it nothing
//     (TestOfflineMemberBringsNobodyBack, and the testnet scenarios
//     forget-rejoin and forget-rejoin-static on real daemons).
//
// A copy of a data dir is the device it was copied from: the same identity,
// secret and open long codes. It can do what that device can, as long as
// that device is a member (each copy may redeem the same open code once);
// forgetting the device forgets every copy, since they share its identity
// (TestCopyOfAForgottenDevice). A copy of a device that was never a member
// is nothing.
//
// A member that was offline during a forget:
//   - adds nobody from a hello, and gives a device that is not a member
//     nothing (peer.TestStrangerWithTheSecretGetsNothing);
//   - has, until it meets a current member, nothing written after the forget,
//     and so gives nobody any of it; the first current member it meets (on
//     that member's node on the old secret) hands it the new epoch and its
//     roster;
//   - may still add a device while away (a short code, a long code of its
//     own): that device is a member only until the member moves to the new
//     epoch, whose roster does not name it, and must pair again
//     (TestOfflineMemberBringsNobodyBack, TestMemberRules).
//
// A rogue member (a current member whose owner, or thief, means harm):
//   - can do what a member can until it is forgotten: add devices, forget
//     others, write bad positions, titles and deletes (a delete is undone by
//     a later write, and a deleted book is kept for the undo window, which
//     runs from the delete's stamp: one it backdates has a window that has
//     passed, and is collected once every member holds it), and hand out
//     the secret;
//   - cannot make the others collect a tombstone early, or hold collection
//     back, by what it says of another member: a member's summary counts
//     when the member sends it, or relayed with its device key's
//     signature (TestRelayedSummaryCountsOnlySigned); it can hold
//     collection back by its own summary, until it is forgotten;
//   - can write, together with every device it adds or invents (member
//     records it mints for devices of its own making), no more than the
//     bounds of one device (bounds.go): a writer is charged with the
//     device that added it, up the "added by" chain, to a device this
//     device added itself or the chain's end (bounds_units.go), so a
//     member and every device added through it are one unit. Past the
//     unit's burst and rate, or past its total of records in a store, the
//     others refuse its records, log it once a minute and warn of it in
//     their status, naming the writer and the unit, and keep taking every
//     other unit's records, also in the same batches; what they refused
//     they take later, when the unit's bounds allow, since no cursor or
//     summary claims it (TestRogueFloodIsBounded, TestRogueTotalIsBounded,
//     TestRogueInventedDevicesShareOneBound, TestBucketRate,
//     TestWriterTotal, TestUnitTotal, TestChargeUnitsModel,
//     TestInventedDevicesShareOneUnit, peer.TestRefusedRecordsRetried).
//     Its own daemon takes all it writes. While its records are refused,
//     the cursors that stay behind hold tombstone collection back, as its
//     own summary could, and each retry costs the re-sending of what
//     changed since. On a device that did not add it, its unit may hold
//     honest devices too (those added through the same chain: usually
//     every device but that one and those it added), whose records it
//     delays while it floods;
//   - keeps its inventions in its unit once it is forgotten: the devices
//     it added before stay members, until forgotten too, and are charged
//     with it still, so forgetting it frees none of them into bounds of
//     their own (TestForgottenAddersUnitStays);
//   - can, with a modified build, stamp records with another device's id:
//     as a member's, they spend that member's unit's bounds, which delays
//     that unit's records (for as long as the forged ones fill its total,
//     if they do; none is lost, since refused records are offered again);
//     as a device that never was a member, they share one bound with every
//     such device. It can as well claim additions it did not make (stamped
//     with another member's id), or add a member again in a later epoch
//     or backdated, which puts that member in its unit, with the same
//     delay: records are not signed by their writer, so the bounds hold
//     against a daemon that writes too much, not against one that lies
//     about who wrote;
//   - can hand over residues of collected books only within the bound of
//     its unit's residues (Bounds.Residues, refilled in an hour; each one
//     taken also takes a place under its writer's unit's total): past it
//     the others refuse the rest of its handing and log it once a minute,
//     naming it (TestResidueFloodIsBounded, TestResidueRate). A refused
//     residue is handed over again with the receiver's next summary to its
//     sender (once the receiver's store changed, or they connect again),
//     and those taken before are free then (TestRefusedResiduesAreHandedAgain).
//     What a refused residue costs an honest receiver meanwhile is the
//     delete of a book collected elsewhere: if it holds an old copy of
//     that book, or is sent one (by a device restored from a backup), it
//     shows the book until that copy reaches a device that collected it,
//     which answers it with the residue (crdt/collect.go);
//   - once forgotten, can do what a forgotten device can, and no more: the
//     devices it added before stay members, until forgotten too, and those
//     it claims to add afterwards are none (TestMemberRules).
//
// # Locks
//
// Each concern has a lock of its own, which guards that concern's fields
// only: the clock, the names, the counts, the clock warnings, the bounds
// of each unit of writers, the member set, the parked rekey offers, the
// peer nodes, collection, pairing, and the spawning of goroutines. None is
// held during network I/O or a store write, and none is held while another
// is taken, except in this order:
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
