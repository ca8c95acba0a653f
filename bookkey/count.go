package bookkey

import (
	"encoding/binary"
	"math/bits"
)

// counter measures the UTF-16 length of a UTF-8 stream fed in pieces and
// notices ill-formed UTF-8, the signal for Auto mode to switch to GB18030.
//
// In well-formed UTF-8 the UTF-16 length is the number of bytes that are not
// continuation bytes (10xxxxxx) plus one per four-byte leader, a sum over
// bytes that eight-byte words compute at once; a byte-at-a-time decoder would
// be slower than MD5 and make the scan, not the hash, the bottleneck. Words
// that hold anything unusual (a structure error, or a leader whose second byte
// has a narrower range: C0 C1 E0 ED F0-FF) go to decodeOne, which follows the
// Unicode substitution of maximal subparts exactly.
type counter struct {
	units   int64 // UTF-16 units of every sequence completed or replaced so far
	invalid bool  // an ill-formed sequence has been seen
	pend    [4]byte
	npend   int // bytes of a well-formed but incomplete sequence ending the input so far
}

// feed counts p, which continues the stream.
func (c *counter) feed(p []byte) {
	i := 0
	if c.npend > 0 {
		i = c.resume(p)
		if c.npend > 0 {
			return
		}
	}
	c.scan(p, i)
}

// blank counts n bytes of space, tab or LF (a blank run the caller did not
// pass through feed). An incomplete sequence before them is ill-formed.
func (c *counter) blank(n int64) {
	if c.npend > 0 {
		c.npend = 0
		c.units++ // its U+FFFD
		c.invalid = true
	}
	c.units += n
}

// resume continues the pending incomplete sequence with the start of p and
// returns how many bytes of p it used.
func (c *counter) resume(p []byte) int {
	var seq [4]byte
	n := copy(seq[:], c.pend[:c.npend])
	take := copy(seq[n:], p)
	size, units, st := decodeOne(seq[:n+take])
	if st == short {
		c.pend, c.npend = seq, n+take
		return len(p)
	}
	c.npend = 0
	c.units += int64(units)
	c.invalid = c.invalid || st == bad
	// The pending bytes are a well-formed prefix, so whatever ends the
	// sequence lies in p: size >= n.
	return size - n
}

// scan counts p[i:], which starts at a sequence boundary.
func (c *counter) scan(p []byte, i int) {
	n := 0 // units, added to c.units at the end: a local keeps the loop in registers
	// carry has the top bit set in each of the first lanes of the next word
	// that must be continuation bytes of a sequence started in this one.
	var carry uint64
	for len(p)-i >= 8 {
		x := binary.LittleEndian.Uint64(p[i : i+8])
		if x&lanes8 == 0 && carry == 0 {
			n += 8
			i += 8
			continue
		}
		b6 := x << 1 // bit 6 of each lane moved to the top
		cont := x &^ b6 & lanes8
		lead := x & b6 & lanes8   // 11xxxxxx: needs one continuation byte
		lead3 := lead & (x << 2)  // 111xxxxx: needs a second
		lead4 := lead3 & (x << 3) // 1111xxxx: four-byte leader or F8-FF
		if cont^(carry|lead<<8|lead3<<16)|lead4|rareLeads(x) != 0 {
			end := i + 8
			if carry != 0 {
				// Back up to the leader of the sequence this word continues,
				// already counted as one unit.
				for i--; p[i]&0xC0 == 0x80; i-- {
				}
				n--
			}
			for i < end {
				size, units, st := decodeOne(p[i:])
				if st == short {
					c.keepPending(p[i:])
					c.units += int64(n)
					return
				}
				c.invalid = c.invalid || st == bad
				n += units
				i += size
			}
			carry = 0
			continue
		}
		n += 8 - bits.OnesCount64(cont)
		carry = lead>>56 | lead3>>48
		i += 8
	}
	if carry != 0 {
		for i--; p[i]&0xC0 == 0x80; i-- {
		}
		n--
	}
	for i < len(p) {
		size, units, st := decodeOne(p[i:])
		if st == short {
			c.keepPending(p[i:])
			break
		}
		c.invalid = c.invalid || st == bad
		n += units
		i += size
	}
	c.units += int64(n)
}

func (c *counter) keepPending(tail []byte) {
	c.npend = copy(c.pend[:], tail)
}

// rareLeads is nonzero if a lane of x is C0, C1, E0 or ED: leaders that are
// never valid or whose second byte has a narrower range than 80-BF. One
// expression, not three tests, so that the loop has a single branch.
func rareLeads(x uint64) uint64 {
	return (zeroLanes(x&(0xFE*lanes1)^(0xC0*lanes1)) | zeroLanes(x^(0xE0*lanes1)) | zeroLanes(x^(0xED*lanes1))) & lanes8
}

// zeroLanes sets the top bit of each zero byte lane of y, and maybe of lanes
// above one (a borrow): exact as to whether there is one.
func zeroLanes(y uint64) uint64 {
	return (y - lanes1) &^ y
}

type status uint8

const (
	ok    status = iota
	bad          // an ill-formed maximal subpart, replaced by one U+FFFD
	short        // the input ends inside a well-formed prefix
)

// decodeOne measures the sequence at the start of p (len(p) > 0): its length in
// bytes, its UTF-16 units and whether it is well-formed. An ill-formed
// sequence is cut at the first byte that cannot continue it (Unicode 15,
// section 3.9, "U+FFFD Substitution of Maximal Subparts"; the WHATWG decoder
// and .NET do the same), so its length is at least one.
func decodeOne(p []byte) (size, units int, st status) {
	b := p[0]
	var n int
	lo, hi := byte(0x80), byte(0xBF) // range of the second byte
	switch {
	case b < 0x80:
		return 1, 1, ok
	case b < 0xC2: // a continuation byte, or an overlong two-byte leader
		return 1, 1, bad
	case b < 0xE0:
		n = 2
	case b < 0xF0:
		n = 3
		if b == 0xE0 {
			lo = 0xA0 // overlong below
		} else if b == 0xED {
			hi = 0x9F // surrogates above
		}
	case b < 0xF5:
		n = 4
		if b == 0xF0 {
			lo = 0x90 // overlong below
		} else if b == 0xF4 {
			hi = 0x8F // beyond U+10FFFF above
		}
	default:
		return 1, 1, bad
	}
	for k := 1; k < n; k++ {
		if k == len(p) {
			return k, 0, short
		}
		if c := p[k]; c < lo || c > hi {
			return k, 1, bad
		}
		lo, hi = 0x80, 0xBF
	}
	if n == 4 {
		return 4, 2, ok
	}
	return n, 1, ok
}
