package api

// Member is a device of the library, as GET /v1/devices shows it: who it is,
// who added it, whether it was removed (forgotten), and how it is doing as
// a peer of this device.
type Member struct {
	ID   string `json:"id"`   // the device id, 16 hex digits
	Name string `json:"name"` // its newest name; "" if it never told
	Self bool   `json:"self"` // this device
	// Names is the device's name history, oldest first (the newest 16):
	// what its older writes are shown with.
	Names []MemberName `json:"names"`
	// AddedBy and AddedAt say who added it (the inviter of its pairing,
	// or the maker of the long code it joined with; itself for the device
	// that made the library, or in a library of an older build); null if
	// only a removal or a name is known.
	AddedBy     *string `json:"addedBy"`
	AddedByName string  `json:"addedByName,omitempty"`
	AddedAt     *string `json:"addedAt"` // RFC 3339, UTC
	// Member: this device holds it for a member of the library now, given
	// what it syncs with it. A device that is not one (its addition made
	// during a partition before a forget, or by a device forgotten then)
	// is given nothing, and MemberNote says why.
	Member     bool   `json:"member"`
	MemberNote string `json:"memberNote,omitempty"`
	// Removed: forgotten by a member; no member accepts its connections.
	Removed       bool    `json:"removed"`
	RemovedBy     *string `json:"removedBy"`
	RemovedByName string  `json:"removedByName,omitempty"`
	RemovedAt     *string `json:"removedAt"`
	// As a peer of this device (see Peer); all zero for this device itself.
	Connected bool    `json:"connected"`
	LastSeen  *string `json:"lastSeen"`
	// State, Via, HolePunched, Addresses and LastError are those of Peer;
	// absent for this device and for removed ones.
	State       string   `json:"state,omitempty"`
	Via         string   `json:"via,omitempty"`
	HolePunched bool     `json:"holePunched,omitempty"`
	Addresses   []string `json:"addresses,omitempty"`
	LastError   string   `json:"lastError,omitempty"`
	// ClockOffsetMs is how far its clock is ahead of this device's
	// (negative: behind), measured at its last hello; null if never measured.
	ClockOffsetMs *int64 `json:"clockOffsetMs"`
	ClockWarning  string `json:"clockWarning,omitempty"`
	// Behind is how many of its changes this device has still to merge, as
	// far as it last said.
	Behind uint64 `json:"behind"`
	InSync bool   `json:"inSync"`
	// Collection says how far it holds this device's changes, for
	// tombstone collection; null for this device and removed ones.
	Collection *MemberCollection `json:"collection"`
}

// MemberCollection is how far a member holds this device's store, as the
// summaries it gossips say: deleted books are collected only once every
// current member holds them.
type MemberCollection struct {
	// Cursor is the last of this device's changes the member is known to
	// hold (0 until its summary arrives).
	Cursor uint64 `json:"cursor"`
	// Behind is how many of this device's changes it is not known to hold.
	Behind uint64 `json:"behind"`
	// Summary: a summary of the member has arrived. Until one does, the
	// member holds all collection back.
	Summary bool `json:"summary"`
	// Holding: this member is why deleted books are not collected yet.
	Holding bool `json:"holding"`
}

// MemberName is one name a device had, from the time it took it.
type MemberName struct {
	Name  string `json:"name"`
	Since string `json:"since"` // RFC 3339, UTC
}

// Members is the answer of GET /v1/devices.
type Members struct {
	Devices []Member `json:"devices"`
}

// RenameRequest is the body of PUT /v1/devices/self/name.
type RenameRequest struct {
	Name *string `json:"name"`
}

// CodeAmbiguous: a device was named by a name several devices have; give
// its id.
const CodeAmbiguous = "ambiguous"

// Left is the answer of POST /v1/leave.
type Left struct {
	// Library is the new library this device is in, of its own.
	Library Library `json:"library"`
	// Delivered: a member of the library it left merged its removal before
	// it went; otherwise the others learn of it only if this device's
	// removal reached one of them.
	Delivered bool `json:"delivered"`
}
