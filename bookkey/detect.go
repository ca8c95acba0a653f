package bookkey

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
)

// read keys r as opt says, detecting the encoding if asked to.
func (k *keyer) read(ctx context.Context, r io.Reader, opt Options) (Result, error) {
	k.useAlgo(opt.algo())
	enc, strict := opt.Encoding, false
	src := r
	start := int64(-1) // where a seekable r started, for a second pass
	if enc == Auto || enc == UTF16 {
		if s, ok := r.(io.Seeker); ok && enc == Auto {
			if off, err := s.Seek(0, io.SeekCurrent); err == nil {
				start = off
			}
		}
		if err := k.head.fill(r); err != nil {
			return Result{}, err
		}
		src = &k.head
		enc, strict = sniff(k.head.b[:k.head.n], enc)
	}
	res, err := k.passAs(ctx, src, enc, strict)
	if err != errNotUTF8 {
		return res, err
	}
	if start < 0 {
		return Result{}, ErrNotSeekable
	}
	if _, err := r.(io.Seeker).Seek(start, io.SeekStart); err != nil {
		return Result{}, fmt.Errorf("bookkey: seek back to read as gb18030: %w", err)
	}
	return k.passAs(ctx, r, GB18030, false)
}

// sniff chooses the encoding from the first bytes of the input, in Auto or
// UTF16 mode. strict means the choice is UTF-8 only if the text proves to be.
func sniff(head []byte, mode Encoding) (enc Encoding, strict bool) {
	switch {
	case mode == Auto && len(head) >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF:
		return UTF8, false
	case len(head) >= 2 && head[0] == 0xFF && head[1] == 0xFE:
		return UTF16LE, false
	case len(head) >= 2 && head[0] == 0xFE && head[1] == 0xFF:
		return UTF16BE, false
	case mode == UTF16:
		return UTF16LE, false
	}
	return UTF8, true
}

// passAs keys src decoded from enc.
func (k *keyer) passAs(ctx context.Context, src io.Reader, enc Encoding, strict bool) (Result, error) {
	if enc != UTF8 {
		k.dec.reset(src, k.decoder(enc))
		src = &k.dec
	}
	res, err := k.pass(ctx, src, strict)
	if err != nil {
		return Result{}, err
	}
	res.Encoding = enc
	return res, nil
}

// decoder returns a reset decoder from enc to UTF-8. A UTF-16 byte-order mark
// is decoded, not skipped, so that rule 2 removes it as it removes UTF-8's:
// the same text then has the same key in every encoding.
func (k *keyer) decoder(enc Encoding) transform.Transformer {
	t := k.decoders[enc]
	if t == nil {
		switch enc {
		case UTF16LE:
			t = unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewDecoder()
		case UTF16BE:
			t = unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM).NewDecoder()
		case GB18030:
			t = simplifiedchinese.GB18030.NewDecoder()
		default:
			panic("bookkey: no decoder for " + enc.String())
		}
		k.decoders[enc] = t
	}
	t.Reset()
	return t
}

// headReader replays the first bytes of the input, read to sniff the
// encoding, before the rest.
type headReader struct {
	r   io.Reader
	b   [3]byte
	n   int   // bytes in b
	off int   // bytes of b already replayed
	err error // io.EOF if the input ended within the head
}

func (h *headReader) fill(r io.Reader) error {
	n, err := io.ReadFull(r, h.b[:])
	*h = headReader{r: r, b: h.b, n: n}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		h.err = io.EOF
		return nil
	}
	return err
}

func (h *headReader) Read(p []byte) (int, error) {
	if h.off < h.n {
		n := copy(p, h.b[h.off:h.n])
		h.off += n
		return n, nil
	}
	if h.err != nil {
		return 0, h.err
	}
	return h.r.Read(p)
}
