// Package api defines the JSON documents of the danyue daemon's local HTTP
// API, shared by the daemon that serves them and the client that reads them.
// openapi.json beside the daemon is the reference; these types are its Go
// form.
package api

// Book is a book as the API shows it.
type Book struct {
	Key      string    `json:"key"`
	Title    string    `json:"title"`
	Position *Position `json:"position"`
	Furthest *Position `json:"furthest"`
	ReadTime ReadTime  `json:"readTime"`
	Deleted  bool      `json:"deleted"`
	// DeletedAt, DeletedBy and DeletedByName say who removed a deleted book,
	// and when; null while the book is on the shelf.
	DeletedAt     *string `json:"deletedAt"`
	DeletedBy     *string `json:"deletedBy"`
	DeletedByName *string `json:"deletedByName,omitempty"`
	// DeletedStamp is the hybrid-clock stamp of the winning delete (see
	// Position.Stamp); null while the book was never deleted.
	DeletedStamp *string `json:"deletedStamp,omitempty"`
	// KeptUntil, for a deleted book, is when its undo window on this
	// device ends (its delete's time plus the daemon's --keep-deleted):
	// until then it stays listed, readable and restorable; after it, it is
	// removed once every member holds the delete. Absent otherwise, and
	// when the daemon keeps no window.
	KeptUntil *string `json:"keptUntil,omitempty"`
	// Notice, in the answer to a write, says what the write did not do that
	// an app might have expected (a read-time report on a deleted book
	// leaves it deleted); absent otherwise. For people, not to parse.
	Notice string `json:"notice,omitempty"`
}

// Position is a place in a book: an offset in UTF-16 code units into the
// BookKey-normalized text, and a fraction in [0, 1].
type Position struct {
	Char       uint64  `json:"char"`
	Percent    float64 `json:"percent"`
	Device     string  `json:"device"`
	DeviceName string  `json:"deviceName"`
	At         string  `json:"at"`
	// Stamp is the write's hybrid-clock timestamp as a string that sorts
	// like the timestamps do: of two writes, the one with the larger stamp
	// wins. Opaque otherwise.
	Stamp string `json:"stamp"`
}

// ReadTime is a book's reading time: the total over all devices, this
// device's share, and every device's share.
type ReadTime struct {
	TotalMs      uint64            `json:"totalMs"`
	ThisDeviceMs uint64            `json:"thisDeviceMs"`
	ByDevice     map[string]uint64 `json:"byDevice"`
}

// Books is the answer of GET /v1/books: a page of the shelf, or the whole
// shelf when no limit, cursor or sort was asked for.
type Books struct {
	Books []Book `json:"books"`
	// Next is the cursor of the next page; absent after the last page.
	Next string `json:"next,omitempty"`
}

// PositionRequest is the body of PUT /v1/books/{key}/position.
type PositionRequest struct {
	Char    *int64   `json:"char"`
	Percent *float64 `json:"percent"`
	Title   *string  `json:"title,omitempty"`
}

// ReadTimeRequest is the body of POST /v1/books/{key}/read-time.
type ReadTimeRequest struct {
	AddMs *int64 `json:"addMs"`
}

// Deleted is the data of a "deleted" event: a book was removed on another
// device. Message says so honestly, for apps to show as it is.
type Deleted struct {
	Key        string `json:"key"`
	Title      string `json:"title"`
	Device     string `json:"device"`
	DeviceName string `json:"deviceName"`
	At         string `json:"at"`
	Message    string `json:"message"`
}

// PeerEvent is the data of a "peer" event.
type PeerEvent struct {
	Device    string `json:"device"`
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
}

// Status is the answer of GET /v1/status.
type Status struct {
	Device    Device   `json:"device"`
	Library   Library  `json:"library"`
	Peers     []Peer   `json:"peers"`
	Counts    Counts   `json:"counts"`
	Addresses []string `json:"addresses"`
	Traffic   Traffic  `json:"traffic"`
	// HTTP is the address of the API's TCP listener (--http), if any.
	HTTP string `json:"http,omitempty"`
	// Kosync is the address of the kosync listener, if this daemon serves
	// kosync, as bound ("[::]:7200" for every address).
	Kosync string `json:"kosync,omitempty"`
	// KosyncURLs are the URLs to give KOReader: one per address of this
	// machine when Kosync listens on every address, LAN addresses first.
	KosyncURLs []string `json:"kosyncUrls,omitempty"`
	// ClockWarnings lists the devices whose writes arrived stamped more
	// than a minute ahead of this device's clock since the daemon started:
	// the writers, whichever peer relayed the writes. Never null.
	ClockWarnings []ClockWarning `json:"clockWarnings"`
	// BoundsWarnings lists the devices whose records this device refused
	// in the last hour, being over what one device may originate. Never
	// null.
	BoundsWarnings []BoundsWarning `json:"boundsWarnings"`
	// PairingWarnings lists the addresses that spent this device's short
	// pairing codes with failed tries in the last ten minutes, the latest
	// first. Never null.
	PairingWarnings []PairingWarning `json:"pairingWarnings"`
	// StoreLoss is what the store found missing when it last opened:
	// changes it had acknowledged that its database did not bring back (a
	// damaged disk or file). Nil when nothing was lost.
	StoreLoss *StoreLoss `json:"storeLoss"`
	// Unreachable says, when the library has other members and this
	// device reaches none of them from where it is, why and what to do;
	// absent otherwise.
	Unreachable string `json:"unreachable,omitempty"`
}

// StoreLoss names the acknowledged changes the store lost. The daemon asked
// every peer to send everything again when it found them, so what a peer
// held comes back.
type StoreLoss struct {
	FoundAt string `json:"foundAt"` // RFC 3339, UTC
	Changes uint64 `json:"changes"` // acknowledged changes lost
	// Records are the records those changes were to, each once, oldest
	// change first, such as "book md5:..." (at most 1000). Never null.
	Records []string `json:"records"`
	Unnamed uint64   `json:"unnamed"` // lost changes whose record is not known
	Warning string   `json:"warning"` // a sentence for a person
}

// BoundsWarning is a device whose records this device refused, being over
// what one device may originate, or whose residues of collected books it
// refused, being over what one device may hand over.
type BoundsWarning struct {
	Device string `json:"device"` // the writer (the sender, for residues); "" for the devices that never were members
	Name   string `json:"name"`
	// Reason is the bound of the latest refusal: "rate" or "total" of the
	// records written, or "residues" handed over.
	Reason  string `json:"reason"`
	Refused uint64 `json:"refused"` // records refused since the daemon started, one offered again counted again
	First   string `json:"first"`   // RFC 3339, UTC
	Last    string `json:"last"`
	Warning string `json:"warning"` // a sentence for a person
}

// ClockWarning is a device whose clock is ahead, as its writes show.
type ClockWarning struct {
	Device string `json:"device"` // the writer: the device of the stamp
	Name   string `json:"name"`   // its name, if this device knows it
	// AheadMs is how far the furthest stamp was ahead of this device's
	// clock when it arrived (milliseconds; up to about 8,000 years).
	AheadMs int64 `json:"aheadMs"`
	// Stamp is that stamp's wall time (RFC 3339, UTC, milliseconds).
	Stamp string `json:"stamp"`
	// Via is the peer that relayed it (the writer itself, when direct).
	Via     string `json:"via"`
	Warning string `json:"warning"` // a sentence for a person
}

// Traffic counts what the sync protocol moved since the daemon started.
type Traffic struct {
	BytesSent       uint64 `json:"bytesSent"`
	BytesReceived   uint64 `json:"bytesReceived"`
	RecordsSent     uint64 `json:"recordsSent"`
	RecordsReceived uint64 `json:"recordsReceived"`
}

// Device is a device of the library.
type Device struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Library identifies the library this device belongs to.
type Library struct {
	ID string `json:"id"`
}

// Counts summarises the library on this device.
type Counts struct {
	Books          int    `json:"books"`
	Deleted        int    `json:"deleted"`
	PeersConnected int    `json:"peersConnected"`
	PeersKnown     int    `json:"peersKnown"`
	LocalChanges   uint64 `json:"localChanges"`
}

// Peer is another device of the library that this device knows.
type Peer struct {
	Device    string `json:"device"`
	Name      string `json:"name"`
	PeerID    string `json:"peerId"`
	Connected bool   `json:"connected"`
	// State is connected; relayed: reached only through a member's relay,
	// which carries no sync (its changes come through that member) while
	// the two try to connect directly by hole punching; unreachable: met
	// before or its addresses are known (Addresses: where it was last, or
	// is dialled), but not connected now; or never-met: a member of the
	// library this device has never reached and knows no address of.
	State string `json:"state"`
	// Via is how a peer is reached: lan (a private network: the LAN, or a
	// VPN), internet, or relayed. Absent while not connected.
	Via string `json:"via,omitempty"`
	// HolePunched: the connection over the internet was made by hole
	// punching through both NATs.
	HolePunched bool     `json:"holePunched,omitempty"`
	LastSeen    *string  `json:"lastSeen"`
	Addresses   []string `json:"addresses"`
	// LastError is why the last dial failed, shortly, while unreachable.
	LastError     string `json:"lastError,omitempty"`
	ClockOffsetMs int64  `json:"clockOffsetMs"`
	ClockWarning  string `json:"clockWarning,omitempty"`
	// InSync: connected, and each side has merged everything of the other.
	InSync bool `json:"inSync"`
	// Behind is how many of that device's changes this one has still to
	// merge, as far as it last said (0 when caught up or never told).
	Behind uint64 `json:"behind"`
	// Pulling is how a long sync from it goes (a first one, or after a
	// long time apart) while records are still to come; absent otherwise.
	Pulling *SyncProgress `json:"pulling,omitempty"`
}

// SyncProgress is how a sync from a peer goes while it has records to come.
type SyncProgress struct {
	// RecordsToGo is how many records are still to come, as the peer
	// counted them (from an older build, its changes to go: an upper
	// bound).
	RecordsToGo uint64 `json:"recordsToGo"`
	// RecordsIn is how many came since the sync started (Since).
	RecordsIn uint64 `json:"recordsIn"`
	Since     string `json:"since"` // RFC 3339, UTC
	// RecordsPerSecond is the rate so far, and SecondsLeft the time left
	// at that rate; both absent until a second has passed and a record
	// has come.
	RecordsPerSecond float64  `json:"recordsPerSecond,omitempty"`
	SecondsLeft      *float64 `json:"secondsLeft,omitempty"`
}

// Peers is the answer of GET /v1/peers.
type Peers struct {
	Peers []Peer `json:"peers"`
}

// Day is one day of local reading statistics.
type Day struct {
	Day string `json:"day"` // YYYY-MM-DD, local time
	Ms  uint64 `json:"ms"`
}

// Daily is the answer of GET /v1/stats/daily.
type Daily struct {
	Days    []Day  `json:"days"`
	TotalMs uint64 `json:"totalMs"`
}

// Invite is the answer of POST /v1/invite.
type Invite struct {
	Code string `json:"code"`
}

// JoinRequest is the body of POST /v1/join. Code is a short code
// ("7-crossover-clockwork") or a long one ("danyue1-..."). PairAddr, for a
// short code on a network without multicast, is the inviter's rendezvous
// address (host:port, from the inviter's POST /v1/pairing answer).
type JoinRequest struct {
	Code     *string `json:"code"`
	PairAddr string  `json:"pairAddr,omitempty"`
}

// Pairing is a short-code invitation: the answer of POST /v1/pairing and of
// GET and DELETE /v1/pairing/{id}.
type Pairing struct {
	ID      string `json:"id"`
	Code    string `json:"code"`    // what the joiner types: "7-crossover-clockwork"
	Expires string `json:"expires"` // RFC 3339
	// State is open, paired, wrong_code, expired, cancelled or failed.
	State string `json:"state"`
	// Addresses are the rendezvous's host:port addresses, for a joiner
	// on a network without multicast (danyue join CODE --pair-addr).
	Addresses []string `json:"addresses"`
	// Device and DeviceName are the joiner once paired.
	Device     string `json:"device,omitempty"`
	DeviceName string `json:"deviceName,omitempty"`
	// TriedBy and TriedAt (RFC 3339) are the address and time of the try
	// that spent the code without pairing (wrong_code, or failed when it
	// broke off); Burns is how many codes that address spent in the last
	// ten minutes, this one included.
	TriedBy string `json:"triedBy,omitempty"`
	TriedAt string `json:"triedAt,omitempty"`
	Burns   int    `json:"burns,omitempty"`
	// Detail says what happened, for people.
	Detail string `json:"detail,omitempty"`
}

// PairingInvites is the answer of GET /v1/invites: the short-code
// invitations whose codes still work (at most one: a new one replaces the
// last). Never null.
type PairingInvites struct {
	Invites []Pairing `json:"invites"`
}

// PairingWarning is an address that spent this device's short codes with
// failed tries in the last ten minutes: possibly someone on the network
// trying to pair.
type PairingWarning struct {
	Address string `json:"address"`
	Burns   int    `json:"burns"`
	Last    string `json:"last"` // RFC 3339, UTC
	// RefusedUntil (RFC 3339, UTC) is when this device stops refusing the
	// address, which it does from the second burn; absent if it does not.
	RefusedUntil string `json:"refusedUntil,omitempty"`
	Warning      string `json:"warning"` // a sentence for a person
}

// Pairing states.
const (
	PairingOpen      = "open"
	PairingPaired    = "paired"
	PairingWrongCode = "wrong_code"
	PairingExpired   = "expired"
	PairingCancelled = "cancelled"
	PairingFailed    = "failed"
)

// Joined is the answer of POST /v1/join.
type Joined struct {
	Library Library `json:"library"`
	// Warnings are, for a short code, what devices other than the inviter
	// that answered on its channel did: possibly someone pretending to be
	// the inviter. For people.
	Warnings []string `json:"warnings,omitempty"`
}

// KosyncUserRequest is the body of POST /v1/kosync/users: a KOReader
// progress-sync account. Key is what KOReader sends for the password, the
// lowercase hex MD5 of it; the daemon keeps only a salted hash of the key.
type KosyncUserRequest struct {
	Name *string `json:"name"`
	Key  *string `json:"key"`
}

// KosyncPasswdRequest is the body of PUT /v1/kosync/users/{name}: the
// account's new key, what KOReader sends for the new password.
type KosyncPasswdRequest struct {
	Key *string `json:"key"`
}

// KosyncUser is the answer of POST /v1/kosync/users.
type KosyncUser struct {
	Name string `json:"name"`
}

// KosyncProgress is one KOReader account's place in one document, as a
// daemon of the library took it on its kosync listener.
type KosyncProgress struct {
	User       string  `json:"user"`
	Document   string  `json:"document"`   // KOReader's id of the file (see `danyue key`)
	Progress   string  `json:"progress"`   // opaque: an XPointer or a page number
	Percentage float64 `json:"percentage"` // in [0, 1]
	Device     string  `json:"device"`     // the reader device, as KOReader names it
	DeviceID   string  `json:"deviceId"`
	At         string  `json:"at"`    // RFC 3339
	Stamp      string  `json:"stamp"` // as in Position: the larger stamp wins
	// Daemon and DaemonName are the danyue device that took the write.
	Daemon     string `json:"daemon"`
	DaemonName string `json:"daemonName"`
	// BookKey and Title name the book the document is, once a device of
	// the library keyed its file (PUT /v1/kosync/links/{document}): the
	// book's title on the shelf, else the title the link gave.
	BookKey string `json:"bookKey,omitempty"`
	Title   string `json:"title,omitempty"`
}

// KosyncLinkRequest is the body of PUT /v1/kosync/links/{document}: the
// book that KOReader's document is, as keying its file tells (`danyue key`
// prints both ids of a file).
type KosyncLinkRequest struct {
	Key   *string `json:"key"`             // the BookKey of the file's text
	Title string  `json:"title,omitempty"` // what to call the book where it is not on the shelf, e.g. the file name
}

// KosyncLink is the answer of PUT /v1/kosync/links/{document}.
type KosyncLink struct {
	Document string `json:"document"`
	Key      string `json:"key"`
	Title    string `json:"title"`
}

// KosyncProgressList is the answer of GET /v1/kosync/progress.
type KosyncProgressList struct {
	Progress []KosyncProgress `json:"progress"`
}

// WebLogin is the answer of POST /v1/web/login-token: a one-time URL that
// opens a session of the status page in a browser on this machine.
type WebLogin struct {
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt"` // RFC 3339; the URL works once, before then
}

// Error is the body of every error answer: Code is stable for programs to
// branch on, Detail is for people.
type Error struct {
	Code   string `json:"error"`
	Detail string `json:"detail"`
}

// Error codes.
const (
	CodeBadRequest   = "bad_request"
	CodeBadKey       = "bad_key"
	CodeInvalid      = "invalid"
	CodeUnknownField = "unknown_field"
	CodeTooLarge     = "too_large"
	CodeNotFound     = "not_found"
	CodeMethod       = "method_not_allowed"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeUnsupported  = "unsupported_media_type"
	CodeBadInvite    = "bad_invite"
	// Short-code pairing: the code did not match (the device that
	// answered did not know it: a mistyped code, and then the inviter's
	// code is spent now, or someone pretending to be the inviter), or it
	// was already used, spent by a failed try or expired, or no inviter
	// offers its channel.
	CodeWrongCode = "wrong_code"
	CodeCodeSpent = "code_spent"
	CodeNoInviter = "no_inviter"
	// CodeNotAdmitted: a long code's inviter refused its ticket; the
	// device holds the library's secret but is no member.
	CodeNotAdmitted = "not_admitted"
	CodeNameTaken   = "name_taken"
	CodeUnavailable = "unavailable"
	CodeInternal    = "internal"
	// CodePairingRefused (403): the inviter of a short code refuses this
	// device's address for a while, as codes were spent by failed tries
	// from it.
	CodePairingRefused = "pairing_refused"
	// CodeDiskFull (507): the disk of the data dir is (nearly) full; nothing
	// was written.
	CodeDiskFull = "disk_full"
	// CodeIdempotencyMismatch (422): an Idempotency-Key was reused with
	// another request.
	CodeIdempotencyMismatch = "idempotency_mismatch"
)
