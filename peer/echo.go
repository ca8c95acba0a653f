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
// So the pull side remembers a hash of every record P sent (tagged with the
// epoch of P's store), and the send side to P skips a record whose current
// encoding is exactly one P sent. That is safe: P had that record, and a
// replica only grows, so P's state already includes it. A record merged with
// local changes encodes differently and is sent. A wiped P (new epoch) is
// sent everything, and the memory is dropped whenever P disconnects, or when
// it would exceed maxEchoes.

// maxEchoes bounds the remembered hashes per peer (about 50 bytes each).
const maxEchoes = 1 << 18

type echoSet struct {
	mu    sync.Mutex
	epoch uint64
	set   map[[16]byte]struct{}
	full  bool
}

func echoKey(data []byte) [16]byte {
	sum := sha256.Sum256(data)
	return [16]byte(sum[:16])
}

// add remembers records received from the peer's store in epoch.
func (e *echoSet) add(epoch uint64, records [][]byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.epoch != epoch {
		e.epoch, e.set, e.full = epoch, nil, false
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

// take reports whether data is a record the peer, whose store is in epoch,
// sent us, and forgets it.
func (e *echoSet) take(epoch uint64, data []byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.set) == 0 || e.epoch != epoch {
		return false
	}
	k := echoKey(data)
	if _, ok := e.set[k]; !ok {
		return false
	}
	delete(e.set, k)
	return true
}

// has reports whether data is a record the peer, whose store is in epoch,
// sent us, without forgetting it: a pass that holds records back may look
// at it again (fanout.go). drop forgets what has found once it is sent past.
func (e *echoSet) has(epoch uint64, data []byte) ([16]byte, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.set) == 0 || e.epoch != epoch {
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
	e.epoch, e.set, e.full = 0, nil, false
	e.mu.Unlock()
}
