package bookkey

import (
	"io"

	"golang.org/x/text/transform"
)

const decodeBufSize = 64 << 10

// decodeReader transcodes what r yields to UTF-8 through t: a
// transform.Reader with a larger, reusable source buffer. Each Read returns
// what one Transform produced, so the pieces the caller sees follow the
// pieces r yields, and the chunk-boundary tests reach through the decoder.
type decodeReader struct {
	r      io.Reader
	t      transform.Transformer
	src    []byte
	s0, s1 int   // src[s0:s1] is read but not yet transformed
	rerr   error // the error that ended r, io.EOF at the end
}

func (d *decodeReader) reset(r io.Reader, t transform.Transformer) {
	if d.src == nil {
		d.src = make([]byte, decodeBufSize)
	}
	d.r, d.t, d.s0, d.s1, d.rerr = r, t, 0, 0, nil
}

// Read needs len(p) >= utf8.UTFMax, as every Read the pass makes has.
func (d *decodeReader) Read(p []byte) (int, error) {
	for {
		atEOF := d.rerr == io.EOF
		if d.s0 < d.s1 || atEOF {
			nDst, nSrc, err := d.t.Transform(p, d.src[d.s0:d.s1], atEOF)
			d.s0 += nSrc
			if nDst > 0 {
				return nDst, nil
			}
			switch err {
			case nil:
				if atEOF {
					return 0, io.EOF
				}
			case transform.ErrShortSrc:
				if atEOF {
					return 0, io.ErrUnexpectedEOF // a decoder that would not flush at EOF
				}
			case transform.ErrShortDst:
				return 0, io.ErrShortBuffer
			default:
				return 0, err
			}
		}
		if d.rerr != nil {
			return 0, d.rerr
		}
		// Keep the unconsumed bytes (at most an incomplete character) and
		// read more behind them.
		d.s1 = copy(d.src, d.src[d.s0:d.s1])
		d.s0 = 0
		n, err := d.r.Read(d.src[d.s1:])
		d.s1 += n
		if err != nil {
			d.rerr = err
		}
	}
}
