package peer

import (
	"encoding/binary"
	"sync/atomic"
)

// Stats counts what the sync protocol moved, for benchmarks, tests and the
// daemon's status. Bytes are sync frames as written and read (length prefix
// included), not the transport's encryption and multiplexing overhead.
type Stats struct {
	BytesSent       uint64
	BytesReceived   uint64
	FramesSent      uint64
	FramesReceived  uint64
	RecordsSent     uint64
	RecordsReceived uint64 // decoded and valid, counted before they are applied
	// EchoesSkipped counts records not sent to a device known to have
	// them: back to the device they came from (echo.go), or to one whose
	// full marks cover them (knowledge.go).
	EchoesSkipped uint64
	// SendWaits counts the times a send stream had maxUnacked batches in
	// flight and waited for the puller to acknowledge one before reading
	// more from the store: the back-pressure of a slow puller.
	SendWaits uint64
	// DialAttempts counts outgoing dials this node started (static peers,
	// remembered peers, mDNS discoveries), successful or not.
	DialAttempts uint64
}

type stats struct {
	bytesSent, bytesReceived     atomic.Uint64
	framesSent, framesReceived   atomic.Uint64
	recordsSent, recordsReceived atomic.Uint64
	echoesSkipped                atomic.Uint64
	sendWaits                    atomic.Uint64
	dialAttempts                 atomic.Uint64
	// sentByKind splits bytesSent (and framesSent) by the kind of frame,
	// the wireFrame key its body opens with: where the bytes of a change
	// go (tests and benchmarks).
	sentByKind   [frameKinds]atomic.Uint64
	framesByKind [frameKinds]atomic.Uint64
	recordBytes  atomic.Uint64 // of the records in the batches sent
	emptyBatches atomic.Uint64 // batches sent that only move a cursor
}

// frameKinds bounds the wireFrame keys; kind 0 counts what is not a
// one-key map of a known kind.
const frameKinds = 16

// frameKind returns the wireFrame key of an encoded frame (its varint
// length included): its body is a map of one pair, 0xa1, whose key is a
// small unsigned integer.
func frameKind(frame []byte) int {
	body := frame
	if _, n := binary.Uvarint(frame); n > 0 {
		body = frame[n:]
	}
	if len(body) < 2 || body[0] != 0xa1 || body[1] >= frameKinds {
		return 0
	}
	return int(body[1])
}

// sent counts one frame as written.
func (s *stats) sent(frame []byte) {
	s.framesSent.Add(1)
	s.bytesSent.Add(uint64(len(frame)))
	k := frameKind(frame)
	s.sentByKind[k].Add(uint64(len(frame)))
	s.framesByKind[k].Add(1)
}

// batchSent counts the batch of pass p as sent.
func (s *stats) batchSent(p *passResult) {
	s.recordsSent.Add(uint64(len(p.records)))
	if len(p.records) == 0 {
		s.emptyBatches.Add(1)
	}
	for _, r := range p.records {
		s.recordBytes.Add(uint64(len(r)))
	}
	s.echoesSkipped.Add(p.skipped)
}

func (s *stats) snapshot() Stats {
	return Stats{
		BytesSent:       s.bytesSent.Load(),
		BytesReceived:   s.bytesReceived.Load(),
		FramesSent:      s.framesSent.Load(),
		FramesReceived:  s.framesReceived.Load(),
		RecordsSent:     s.recordsSent.Load(),
		RecordsReceived: s.recordsReceived.Load(),
		EchoesSkipped:   s.echoesSkipped.Load(),
		SendWaits:       s.sendWaits.Load(),
		DialAttempts:    s.dialAttempts.Load(),
	}
}
