package peer

import (
	"context"
	"errors"
)

// What is left of a collected book (a residue: its key, tombstone and read
// time, crdt/collect.go) is not a record the sender's change sequence
// lists, so a puller that starts from 0 (new, wiped, or restored from an
// old copy) would never get it: the first batches of such a pull carry the
// sender's residues too, ahead of its records, so that the puller holds the
// delete of every book the library collected and an old copy of one it
// holds is answered.

// ResidueStore is what a Store may also offer: every residue it keeps,
// each a valid encoded book record, data valid only during the call.
type ResidueStore interface {
	Residues(ctx context.Context, fn func(data []byte) error) error
}

// maxResidues bounds the residues sent to one puller: far more than the
// books a library deletes, and a few megabytes at most.
const maxResidues = 1 << 16

var errEnoughResidues = errors.New("enough residues")

// residues returns the store's residues, for a pull from 0.
func (n *Node) residues(ctx context.Context) [][]byte {
	rs, ok := n.store.(ResidueStore)
	if !ok {
		return nil
	}
	var out [][]byte
	err := rs.Residues(ctx, func(data []byte) error {
		if len(out) == maxResidues {
			return errEnoughResidues
		}
		out = append(out, append([]byte(nil), data...))
		return nil
	})
	if err != nil && !errors.Is(err, errEnoughResidues) {
		n.log.Warn("read the residues of collected books for a puller from the start", "err", err)
	}
	return out
}

// takeResidues returns the residues that go first in the next batch, at
// most half a batch, and their size: with the one record a batch always
// carries (at most crdt.MaxEncodedSize), it stays within what a store
// applies in one batch.
func (snd *sender) takeResidues() (records [][]byte, size int) {
	for len(snd.residues) > 0 && len(records) < maxBatchRecords/2 && size+len(snd.residues[0]) <= maxBatchBytes/2 {
		records = append(records, snd.residues[0])
		size += len(snd.residues[0])
		snd.residues = snd.residues[1:]
	}
	return records, size
}
