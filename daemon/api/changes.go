package api

// Changes is the answer of GET /v1/changes: the books that changed on this
// device after a sequence number, each once, in the order of their latest
// change.
type Changes struct {
	// Epoch identifies this device's store: sequence numbers of another
	// epoch (a store wiped or replaced) mean nothing here, and an app that
	// sees a new epoch starts again from since=0.
	Epoch   string   `json:"epoch"`
	Changes []Change `json:"changes"`
	// Last is the since of the next request: every change up to it has
	// been answered.
	Last uint64 `json:"last"`
	// More says that changes after Last were left out for the limit: ask
	// again at once.
	More bool `json:"more"`
}

// Change is a book as it is after its latest change, and that change's
// sequence number.
type Change struct {
	Seq  uint64 `json:"seq"`
	Book Book   `json:"book"`
}
