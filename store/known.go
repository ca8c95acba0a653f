package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// keyKnown holds the address book of the peer layer: the last addresses of
// every member, as the daemon last saved them, so that a device that
// restarts dials its members where they were rather than waiting to be
// found (docs/design.md, "Finding each other"). Like the saved summaries
// it is advice kept across restarts: it takes no sequence number and is
// never synced as a record.
var keyKnown = []byte("mknown")

// Bounds of the saved book: the peer layer keeps less, and a save past
// them is refused rather than cut, so that a bug cannot grow the value.
const (
	MaxKnown      = 64
	MaxKnownAddrs = 8
	maxKnownText  = 256
)

// Known is how to reach one device: its peer id and addresses as text
// (the peer layer parses them), and when they were last heard of.
type Known struct {
	Peer  string
	Addrs []string
	Seen  time.Time
}

type knownFile struct {
	Peer  string   `json:"peer"`
	Addrs []string `json:"addrs"`
	Seen  int64    `json:"seen"` // Unix ms
}

// SaveKnown replaces the saved address book with list, through the writer.
func (s *Store) SaveKnown(ctx context.Context, list []Known) error {
	if len(list) > MaxKnown {
		return fmt.Errorf("save the address book in store %s: %d devices, at most %d", s.dir, len(list), MaxKnown)
	}
	files := make([]knownFile, 0, len(list))
	for _, k := range list {
		if err := checkKnown(k.Peer, k.Addrs); err != nil {
			return fmt.Errorf("save the address book in store %s: %w", s.dir, err)
		}
		files = append(files, knownFile{Peer: k.Peer, Addrs: k.Addrs, Seen: k.Seen.UnixMilli()})
	}
	enc, err := json.Marshal(files)
	if err != nil {
		return fmt.Errorf("save the address book in store %s: %w", s.dir, err)
	}
	_, err = s.Apply(ctx, Batch{known: enc})
	return err
}

func checkKnown(peer string, addrs []string) error {
	if peer == "" || len(peer) > maxKnownText {
		return fmt.Errorf("a peer id of %d bytes", len(peer))
	}
	if len(addrs) > MaxKnownAddrs {
		return fmt.Errorf("%d addresses for one device, at most %d", len(addrs), MaxKnownAddrs)
	}
	for _, a := range addrs {
		if a == "" || len(a) > maxKnownText {
			return fmt.Errorf("an address of %d bytes", len(a))
		}
	}
	return nil
}

// KnownAddrs returns the address book SaveKnown last saved, none if it never
// ran. A saved book that does not decode, or breaks the bounds, is reported
// with ErrCorrupt; the caller can carry on without it, as after a first
// start.
func (s *Store) KnownAddrs(ctx context.Context) ([]Known, error) {
	var list []Known
	err := s.view(ctx, func(txn *badger.Txn) error {
		v, err := getValue(txn, keyKnown)
		if err != nil || v == nil {
			if err != nil {
				err = ioErr(s.dir, "read the saved address book", err)
			}
			return err
		}
		var files []knownFile
		if err := json.Unmarshal(v, &files); err != nil || len(files) > MaxKnown {
			return corruptf(s.dir, "saved address book under key %s does not decode (%d devices): %v", keyName(keyKnown), len(files), err)
		}
		for _, f := range files {
			if err := checkKnown(f.Peer, f.Addrs); err != nil {
				return corruptf(s.dir, "saved address book under key %s: %v", keyName(keyKnown), err)
			}
			list = append(list, Known{Peer: f.Peer, Addrs: f.Addrs, Seen: time.UnixMilli(f.Seen)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}
