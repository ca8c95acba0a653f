// Package peer connects the devices of one library: a private libp2p network,
// mDNS discovery on the LAN, invites, and the delta sync protocol.
//
// # Who may connect
//
// A Library is an id and a secret. The libp2p host runs a private network
// whose pre-shared key is HKDF-SHA256(secret, info "danyue pnet v1"): a device
// without the secret cannot complete a handshake, so everything that follows
// happens between members only. Transports are TCP only (QUIC cannot run
// behind a pre-shared key), with Noise and yamux. A failing dial, which is
// what a stranger looks like, is logged once per address and retried with
// exponential backoff (1 s doubling to 5 min). mDNS announces
// "_danyue._tcp" with TXT fields v=1, lib=<hex of the first 8 bytes of
// SHA-256("danyue library\x00" || library id)>, id=<peer id> and
// addr=<multiaddr>; devices of other libraries ignore each other.
//
// A device is named by DeviceIDOf(peer id); an invite code (EncodeInvite)
// carries the library, the inviter's peer id, as a hint its addresses, and
// a one-time ticket. Holding the secret makes no member: the daemon says
// who is one (Config.Member), and a device that is not is let connect but
// given nothing, its sync streams refused with ErrNotMember, until the
// ticket it presents to its inviter in a hello makes it one (members.go).
// A device removed from the library (Config.Removed) is refused by the
// connection gater (gater.go) in both directions, as soon as its identity is
// known, and is no longer redialled. A new identity made with the secret is
// kept out by rotating the secret: the rekey protocol (rekey.go) hands a
// new secret to members over an authenticated connection, and a restricted
// node (Config.Restricted) on a superseded secret admits only the members
// the daemon names and carries nothing but rekey offers.
//
// Static peers, peers given to Connect, the members the address book knows
// (addrbook.go) and every peer that has completed a hello (a member) are
// kept connected: when a member is lost it is redialled
// every second for two minutes, then with the backoff above, so a healed
// network or a device back from a short absence is found within a second or
// two. When a member opens its pull on a newer connection than ours, it has
// given the older one up (often after a partition only its side noticed),
// and our pull's older connection is closed so that ours moves too.
//
// # Protocols
//
// A node speaks four libp2p protocols, each under one id for good:
//
//	/danyue/sync/1.0.0      the sync protocol, below
//	/danyue/rekey/1.0.0     a new secret for a member (rekey.go)
//	/danyue/summary/1.0.0   how far each device has merged (summary.go)
//	/danyue/residues/1.0.0  what is left of collected books (residues.go)
//
// There is no version to negotiate. An ability added later is an optional
// field (a new map key, which the decoders of sync frames and rekey offers
// skip when they do not know it) or a new kind of frame, and a new kind of
// frame is sent only to a peer whose hello sets the capability bit that
// announces it; a build ignores the bits it does not know. (The records
// and summaries the protocols carry are crdt's encodings, which carry
// their own version.) That is how Syncthing's block exchange
// protocol has stayed at version 1. A change that an older build could not
// read past would need a protocol of another id; a build that speaks none
// of a peer's ids meets libp2p's "protocols not supported" before any
// frame, and reports the peer as refused.
//
// # The sync protocol
//
// Each side of a connection pulls from the other on a stream it opens, so a
// connection carries two streams, one per direction. A stream is a sequence
// of frames: a length (a minimal unsigned varint of at most 3 bytes, at
// most MaxFrame, checked before anything is allocated) and a deterministic
// CBOR map holding exactly one of
//
//	1 Hello  {1 library id, 2 device id, 3 name, 4 store epoch,
//	          5 last sequence number, 6 wall clock ms, 7 want epoch,
//	          8 want seq, 9 from, 10 capabilities, 11 ticket,
//	          12 [{0 peer id, 1 [address], 2 seen ms}], 13 run}
//	2 Batch  {1 seq, 2 last, 3 [encoded records], 4 [gaps], 5 whole, 6 left}
//	3 Error  {0 code, 3 message}
//	4 Ack    {1 seq}
//	5 Start  {0 epoch, 1 seq, 2 [[device, epoch, seq]]}
//	6 Caught {0 epoch, 1 seq, 2 [[device, epoch, seq]], 3 [[...]]}
//	8 Have   {1 [lacking index], 2 list, 3 [[device, epoch, seq]]}
//	9 Ask    [list, index, seq, index, seq, ...]
//
// Keys are never reused for another meaning. Capabilities is a uint64,
// omitted when 0, of which two bits are defined: bit 0, the device reads
// summaries that carry their device's signature (crdt.Summary.Sig, which
// an older build's decoder refuses), so it is sent them signed; others are
// sent them without (summary.go). Bit 1, the device reads Addrs frames
// (10 Addrs [{0 peer id, 1 [address], 2 seen ms}], the list of hello key
// 12): how to reach its sender and the other members, sent on a pull
// stream whenever the sender's address book learns an address
// (addrbook.go). Run, omitted when 0, is a random number the sender drew
// when its node started: records a device sent in one run are not taken
// for what its store holds in another (lineage, knowledge.go).
//
// The puller opens with a Hello that says where it is in the sender's
// change sequence (want epoch, want seq: its cursor). The sender checks the
// library id, and that the device id is the one of the authenticated peer,
// and that the puller is a member (Config.Member; a puller that is not,
// but presents a ticket of an invite the sender made, may be made one by
// Config.Redeem), and answers with its own Hello (from: where its batches start; 0 when the
// puller's cursor is of another epoch of its store, or past what it can
// have sent the puller (Node.Delivered: what it sent in this run, or its
// store's delivered mark for the puller; delivered.go), when its store
// went back under the same epoch, after which it numbers its later changes
// past that cursor) or with an Error frame and closes. A puller told 0 under the same epoch starts from 0,
// whatever its marks say. A puller's hello also says how far its own store
// goes: if that is behind our cursor into the same epoch, its store was
// restored from an old copy, and our pull from it starts over from 0. Both
// sides log a refusal and report it as a PeerRefused event
// (ErrOtherLibrary, ErrDeviceMismatch, ErrRefused). A puller refused as not
// a member (ErrNotMember, Error code 6, whose message says why for the
// person at it) reports it once and pulls again when the sender pulls from
// it (which the sender does only from members) or after the pull backoff.
//
// The puller then sends a Start frame: where the batches start (its
// cursor, or a better one another device handed over; see below) and its
// full marks (those of Caught frames and of whole batches, see below). A
// puller with a large backlog first waits, for a bounded time, while
// another of its streams catches up.
//
// Then the sender sends Batch frames: every record whose last change has a
// sequence number after the cursor, as its current encoding
// (crdt.Entry.Encode), at most 512 records and about 256 KiB per batch,
// each batch covering the sequence numbers up to its seq. A batch leaves
// out what the stream fixes: the epoch (the sender's hello gave it), its
// last when that is its seq, and its gaps (each record's sequence number,
// as the gap from the one before) when its records have the last sequence
// numbers up to its seq, as a pushed change has; a puller refuses a batch
// that says its last anyway. Left, optional, is how many records the
// sender has still to send after the batch in a catch-up of more than two
// batches, counted at its start (togo.go): what the puller shows a person
// as records to go (PeerInfo.Pulling), taking its sequence numbers to go,
// an upper bound, from a sender that does not say. Caught up, the sender waits on the store and
// sends each new change as it commits: a position set on one device is
// applied on another within milliseconds. The puller decodes and validates
// every record of a batch (crdt.Decode) before applying any, and applies
// the batch and the cursor advance in one Store.ApplyRemote call (a store
// may refuse some records of a batch, whose writer is over its bounds: it
// takes the rest, and the stream then moves no cursor and is pulled again
// later, refused.go). A bad frame or record closes the stream with the
// reason logged and nothing of that batch applied; the puller reopens it
// with backoff. The puller answers every batch it has applied with an Ack
// of its seq, so the sender knows how far it is delivered
// (PeerInfo.Delivered; what SyncOnce waits for). An ack that goes back or
// passes what the stream sent ends the stream.
//
// Back-pressure: the puller reads a batch only after it has applied the one
// before, and the sender keeps at most maxUnacked batches unacknowledged,
// reading the next from its store only when an ack makes room; so a puller
// slower than its sender (a phone under a flood of records, or relaying
// one) holds a few batches, not a queue. What a sender that ignores this
// can push is bounded by yamux's stream window.
//
// Once everything up to its last sequence number is sent (and, after the
// first time, once the stream has been idle for a second and at most every
// ten), the sender says so in a Caught frame, with those of its cursors
// into other devices' stores and full marks that changed since its
// previous one (but those of devices the puller says it pulls from itself,
// see below). A cursor is true of whoever has everything its holder had,
// so the puller starts its own pulls from those devices there: a device
// that meets several peers at once takes the library from one and only
// what is newer from the others. A full mark ("I have all of D's state as
// of D's sequence S") lets a sender skip, for a puller that sent it, every
// record whose state here is exactly one that D sent in a batch up to S: a
// joining device sends nothing back. What this rests on, and why it never
// skips a record the puller lacks, is in knowledge.go.
//
// In a mesh a change would arrive once from its writer and once more from
// every other peer that merged it. So a puller tells each sender which
// devices it pulls from itself (a Have frame with its direct list), and a
// sender holds back relays of their records until it has something else
// to send or a second has passed; then it asks (Ask) whether the puller
// has all of each source's state as of the held records, and sends only
// what the answer (a Have with no list) says it lacks. Asks and answers
// are numbered by their place on the stream. A held record keeps the
// stream's cursor before it, and a puller whose stream from the source
// ends says so at once, so holding delays a relay but never loses it
// (fanout.go, hold.go). A batch marked whole is what lets the puller
// answer; a batch that would only move the cursor is put off the same
// way.
//
// A merge that changes local state is a local change with a new sequence
// number, so changes relay through intermediate devices (A-B-C converges
// without A meeting C); a merge that changes nothing gets no number, so
// nothing echoes forever. A record is also not sent back to the device it
// came from while that device is connected (see echo.go), which keeps an
// initial sync from crossing the wire twice.
//
// # Time
//
// A stream's hello exchange must finish within handshakeTimeout, and every
// frame, once its first byte has arrived or once it is being written, within
// frameTimeout. Between frames a stream waits without a deadline: push
// streams are idle most of the time, and the kernel's TCP keepalives end a
// connection to a peer that vanished within seconds (tcp.go). Nothing in
// this package polls while its peers are connected and nothing changes: its
// goroutines block on channels, and only mDNS queries repeat, backing off
// to one every 4 minutes. Dials repeat only while a kept peer is missing.
package peer
