package bookkey

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// normalizer applies rules 2 and 3 and the leading half of rule 4 (see the
// package documentation) to successive segments of the UTF-8 stream, in place.
// Its state is three bits, so a segment boundary may fall anywhere: between
// CR and LF, inside the blank prefix, inside the byte-order mark (the caller
// guarantees the first segment holds at least three bytes, or the whole
// input, as the seed's ReadFull of the head does).
type normalizer struct {
	headDone bool // the first segment has been looked at for a byte-order mark
	started  bool // a byte other than space, tab, CR or LF has been seen
	// skipLF: the previous segment ended with a CR, already written as LF, so
	// an LF starting this segment is the second half of that CRLF.
	skipLF bool
}

// segment normalizes p in place and returns the length of the result. The
// result never grows: every CR becomes one LF or vanishes into a CRLF.
func (nz *normalizer) segment(p []byte) int {
	i := 0
	if !nz.headDone {
		nz.headDone = true
		if len(p) >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF {
			i = 3
		}
	}
	if !nz.started {
		// A CR here would become an LF that rule 4 drops, so CR is blank too.
		for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
			i++
		}
		if i == len(p) {
			return 0
		}
		nz.started = true
		nz.skipLF = false
	}
	if nz.skipLF {
		nz.skipLF = false
		if i < len(p) && p[i] == '\n' {
			i++
		}
	}
	if i == len(p) {
		return 0
	}
	// The CR is written as LF at once rather than held back: the LF that may
	// follow, even in the next segment, is then the one dropped.
	nz.skipLF = p[len(p)-1] == '\r'
	w := 0
	dense := 0 // CRs in a row found close to the previous one
	for i < len(p) {
		j := bytes.IndexByte(p[i:], '\r')
		if j < 0 {
			j = len(p) - i
		}
		if w != i {
			copy(p[w:], p[i:i+j])
		}
		w += j
		i += j
		if i == len(p) {
			break
		}
		p[w] = '\n'
		w++
		i++
		if i < len(p) && p[i] == '\n' {
			i++
		}
		if j >= denseCR {
			dense = 0
		} else if dense++; dense == denseCRs {
			// CRs are close together (a run of blank lines, a file of
			// CRLFs): two calls per CR cost more than the bytes, so go byte
			// by byte for a while. One blank line between paragraphs
			// must not trigger this: that costs more than it saves.
			dense = 0
			end := min(i+denseRun, len(p))
			for i < end {
				b := p[i]
				i++
				if b == '\r' {
					b = '\n'
					if i < len(p) && p[i] == '\n' {
						i++
					}
				}
				p[w] = b
				w++
			}
		}
	}
	return w
}

// After denseCRs CRs in a row each less than denseCR bytes after the
// previous one, segment converts the next denseRun bytes one at a time.
const (
	denseCR  = 16
	denseCRs = 4
	denseRun = 256
)

const (
	lanes7 = 0x7f7f7f7f7f7f7f7f
	lanes8 = 0x8080808080808080
	lanes1 = 0x0101010101010101
)

// lastContent returns the index of the last byte of p that rule 4 keeps (not
// space, tab or LF; CRs are gone by now), or -1 if there is none. It looks at
// eight bytes per step because a text that is mostly blank must not be slow.
func lastContent(p []byte) int {
	i := len(p)
	for i >= 8 {
		x := binary.LittleEndian.Uint64(p[i-8 : i])
		if m := nonBlankLanes(x); m != 0 {
			return i - 8 + (63-bits.LeadingZeros64(m))/8
		}
		i -= 8
	}
	for i > 0 {
		i--
		if b := p[i]; b != ' ' && b != '\t' && b != '\n' {
			return i
		}
	}
	return -1
}

// nonBlankLanes sets the top bit of each byte lane of x that is not space, tab
// or LF, and clears every other bit.
func nonBlankLanes(x uint64) uint64 {
	return nonZeroLanes(x^(' '*lanes1)) & nonZeroLanes(x^('\t'*lanes1)) & nonZeroLanes(x^('\n'*lanes1))
}

// nonZeroLanes sets the top bit of each nonzero byte lane of y. Unlike the
// usual "has a zero byte" trick it is exact in every lane: the addition cannot
// carry out of a lane.
func nonZeroLanes(y uint64) uint64 {
	return ((y & lanes7) + lanes7 | y) & lanes8
}
