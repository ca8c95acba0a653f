package peer

import (
	"crypto/sha256"
	"sync"
)

// Echo suppression. When this device merges a batch from peer P, every
// record that changed local state gets a new local sequence number, and the
// sync stream to P would send it straight back: after an initial sync of a
// whole library, the whole library again. Merging it would change nothing on
// P (that is what stops echoes from looping), but it costs a second transfer.
//
// So the pull side remembers a hash of every record P sent, and the send
// side to P skips a record whose current encoding is exactly one P sent.
// That is safe while P runs: P had that record, and a replica only grows.
// It is not across P's runs: a store restored from an old copy keeps its
// epoch, and lacks what it sent before the restore. Nor can this device
// tell when P restarted by its connection: one to a device that stopped
// behind a partition stays open here until it times out, and P's next run
// connects beside it. So what is remembered is tagged with the lineage of
// P's changes (its store's epoch and its node's run, from P's hellos;
// knowledge.go), and only a puller of the same lineage is spared it. A record merged with
// local changes encodes differently and is sent. The memory is dropped
// whenever P disconnects, or when it would exceed maxEchoes.

// maxEchoes bounds the remembered hashes per peer (about 50 bytes each).
const maxEchoes = 1 << 18

type echoSet struct {
	mu      sync.Mutex
	lineage uint64
	set     map[[16]byte]struct{}
	full    bool
}

func echoKey(data []byte) [16]byte {
	sum := sha256.Sum256(data)
	return [16]byte(sum[:16])
}

// add remembers records received from the peer, of its lineage.
func (e *echoSet) add(lineage uint64, records [][]byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lineage != lineage {
		e.lineage, e.set, e.full = lineage, nil, false
	}
	if e.full {
		return
	}
	if e.set == nil {
		e.set = make(map[[16]byte]struct{}, len(records))
	}
	for _, r := range records {
		if len(e.set) >= maxEchoes {
			// Forget rather than grow: the cost is only that some records
			// are sent back.
			e.set, e.full = nil, true
			return
		}
		e.set[echoKey(r)] = struct{}{}
	}
}

// has reports whether data is a record the peer, of its lineage, sent us,
// without forgetting it: a pass that holds records back may look at it
// again (fanout.go). drop forgets what has found once it is sent past.
func (e *echoSet) has(lineage uint64, data []byte) ([16]byte, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.set) == 0 || e.lineage != lineage {
		return [16]byte{}, false
	}
	k := echoKey(data)
	_, ok := e.set[k]
	return k, ok
}

func (e *echoSet) drop(keys [][16]byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range keys {
		delete(e.set, k)
	}
}

func (e *echoSet) reset() {
	e.mu.Lock()
	e.lineage, e.set, e.full = 0, nil, false
	e.mu.Unlock()
}
