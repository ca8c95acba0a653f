package store

import (
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// keySummaries holds the latest summary of every other member
// (crdt.EncodeSummaries) as the collection loop last saved them, so that
// after a restart a member that is away still counts for what it said it
// holds, instead of holding collection back until it next gossips.
var keySummaries = []byte("msummaries")

// SaveSummaries replaces the saved summaries with list, through the writer.
// They are advice kept across restarts, not changes: they take no sequence
// number and are never synced to peers.
//
// A save starts no sync of its own (Batch.lazy): the collection loop saves
// after every round that heard news, and a sync each time woke the device
// for a while after every burst of writes. A purge that went by the saved
// summaries is written after them, and its sync covers them, so they are
// durable before the purge is acknowledged. A power cut before then can
// bring back the summaries saved before (even beside a purge the kernel
// happened to write back first), which say less than the members did:
// that holds collection back until they gossip again, and loses nothing.
func (s *Store) SaveSummaries(ctx context.Context, list []crdt.Summary) error {
	enc, err := crdt.EncodeSummaries(list)
	if err != nil {
		return fmt.Errorf("save summaries in store %s: %w", s.dir, err)
	}
	_, err = s.Apply(ctx, Batch{summaries: enc, lazy: true})
	return err
}

// Summaries returns the summaries SaveSummaries last saved, none if it never
// ran. Saved summaries that do not decode are reported with ErrCorrupt; the
// caller can carry on without them, as after a first start.
func (s *Store) Summaries(ctx context.Context) ([]crdt.Summary, error) {
	var list []crdt.Summary
	err := s.view(ctx, func(txn *badger.Txn) error {
		v, err := getValue(txn, keySummaries)
		if err != nil || v == nil {
			if err != nil {
				err = ioErr(s.dir, "read the saved summaries", err)
			}
			return err
		}
		if list, err = crdt.DecodeSummaries(v); err != nil {
			return corruptf(s.dir, "saved summaries under key %s do not decode: %v", keyName(keySummaries), err)
		}
		return nil
	})
	return list, err
}
