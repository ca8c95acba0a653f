package store

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/danyue/danyue/crdt"
)

// The key layout: one prefix byte, then
//
//	'm' name        meta: "schema" (uint32), "epoch" (uint64), "hw" (timestamp),
//	                "count" + kind: the number of records of the kind (uint64),
//	                "delivered" [+ device]: delivered marks (uint64, delivered.go),
//	                "known": the saved address book (JSON, known.go)
//	'r' id          the record's current sequence number (uint64); id is Entry.AppendID
//	's' seq         the record's encoding (crdt Entry.Encode), seq big-endian uint64
//	'c' device      peer cursor: epoch, seq (2 x uint64)
//	'd' key         an idempotency key, empty value, with a TTL
//	'y' 2006-01-02  the day's local reading time in ms (uint64)
//	'o' order scope position   a book index entry, empty (index.go)
//	'g' id          a collected book's residue: its record's encoding (purge.go)
//
// Every record has exactly one 's' entry, at its latest sequence number: a
// change deletes the old one in the same transaction. So "everything since N"
// is one range scan of 's' keys that yields each record's current state
// once, in sequence order, and ships the stored bytes as they are. A point
// read goes through 'r' to 's'. All integers are big-endian so that keys
// sort numerically.
const (
	pMeta    = 'm'
	pRecord  = 'r'
	pSeq     = 's'
	pCursor  = 'c'
	pDedup   = 'd'
	pDaily   = 'y'
	pResidue = 'g'
)

var (
	keySchema = []byte("mschema")
	keyEpoch  = []byte("mepoch")
	keyHW     = []byte("mhw")
	// keyDeletedBooks counts the books whose tombstone wins, kept with
	// every book write, so that the shelf's counts cost no scan at start.
	keyDeletedBooks = []byte("mdeleted")
)

func countKey(kind crdt.Kind) []byte {
	return append([]byte("mcount"), byte(kind))
}

func recordKey(id []byte) []byte {
	return append([]byte{pRecord}, id...)
}

func residueKey(id []byte) []byte { return append([]byte{pResidue}, id...) }

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pSeq}, seq)
}

func cursorKey(d crdt.DeviceID) []byte {
	return binary.BigEndian.AppendUint64([]byte{pCursor}, uint64(d))
}

func dedupKey(k string) []byte {
	return append([]byte{pDedup}, k...)
}

func dailyKey(day string) []byte {
	return append([]byte{pDaily}, day...)
}

// keyName renders a key for error messages: the prefix as a letter and the
// rest in hex.
func keyName(k []byte) string {
	if len(k) == 0 {
		return "(empty key)"
	}
	return string(k[:1]) + ":" + hex.EncodeToString(k[1:])
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// parseU64 decodes an 8-byte value.
func parseU64(v []byte) (uint64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

func encodeTimestamp(t crdt.Timestamp) []byte {
	b := binary.BigEndian.AppendUint64(nil, t.Wall)
	b = binary.BigEndian.AppendUint32(b, t.Logical)
	return binary.BigEndian.AppendUint64(b, uint64(t.Device))
}

func parseTimestamp(v []byte) (crdt.Timestamp, bool) {
	if len(v) != 20 {
		return crdt.Timestamp{}, false
	}
	return crdt.Timestamp{
		Wall:    binary.BigEndian.Uint64(v),
		Logical: binary.BigEndian.Uint32(v[8:]),
		Device:  crdt.DeviceID(binary.BigEndian.Uint64(v[12:])),
	}, true
}

func encodeCursor(c Cursor) []byte {
	return binary.BigEndian.AppendUint64(u64(c.Epoch), c.Seq)
}

func parseCursor(k, v []byte) (Cursor, bool) {
	if len(k) != 9 || len(v) != 16 {
		return Cursor{}, false
	}
	return Cursor{
		Device: crdt.DeviceID(binary.BigEndian.Uint64(k[1:])),
		Epoch:  binary.BigEndian.Uint64(v),
		Seq:    binary.BigEndian.Uint64(v[8:]),
	}, true
}
