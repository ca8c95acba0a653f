package pair

import (
	"errors"
	"fmt"
	"io"
)

// Frames on the pairing stream: a 4-byte header (version, type, body length
// big-endian uint16) then the body. The length is checked against maxBody
// before anything is allocated.
const (
	version    = 1
	headerSize = 4
	// maxAD bounds each side's associated data (a peer id is under 64 bytes).
	maxAD = 256
	// maxBody fits the largest frame: a share, a tag and the largest AD.
	maxBody = elementSize + tagSize + maxAD
)

// Frame types.
const (
	frameShare        = 1 // initiator: Ya || ADa
	frameShareConfirm = 2 // responder: Yb || Tb || ADb
	frameConfirm      = 3 // initiator: Ta
	frameReject       = 4 // either: the other side's tag was wrong; empty
	frameRefused      = 5 // responder: its invitation is used or expired; empty
)

// ErrProtocol reports a frame that is malformed, too long, of another
// version or out of order: the peer is not running this protocol.
var ErrProtocol = errors.New("pair: protocol error")

type frame struct {
	typ  byte
	body []byte
}

// readFrame reads one frame. On error it returns no frame.
func readFrame(r io.Reader) (frame, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, fmt.Errorf("read frame header: %w", err)
	}
	if h[0] != version {
		return frame{}, fmt.Errorf("%w: version %d, this side speaks %d", ErrProtocol, h[0], version)
	}
	n := int(h[2])<<8 | int(h[3])
	if n > maxBody {
		return frame{}, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrProtocol, n, maxBody)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return frame{}, fmt.Errorf("read frame body: %w", err)
	}
	return frame{typ: h[1], body: body}, nil
}

// appendFrame encodes f after dst.
func appendFrame(dst []byte, f frame) ([]byte, error) {
	if len(f.body) > maxBody {
		return nil, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrProtocol, len(f.body), maxBody)
	}
	dst = append(dst, version, f.typ, byte(len(f.body)>>8), byte(len(f.body)))
	return append(dst, f.body...), nil
}

func writeFrame(w io.Writer, f frame) error {
	b, err := appendFrame(nil, f)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}
