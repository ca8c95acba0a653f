package peer

import "sync/atomic"

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
