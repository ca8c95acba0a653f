package bookkey

import (
	"context"
	"errors"
	"io"
)

// errNotUTF8 stops a strict pass: Auto mode then tries GB18030.
var errNotUTF8 = errors.New("bookkey: not utf-8")

// pass keys the UTF-8 stream src from its start. If strict, it stops with
// errNotUTF8 as soon as the normalized text is known to be ill-formed UTF-8.
func (k *keyer) pass(ctx context.Context, src io.Reader, strict bool) (Result, error) {
	k.resetPass()
	defer k.stop()

	cur := <-k.free
	buf := k.bufs[cur]
	w := 0   // normalized bytes in buf
	raw := 0 // bytes read after them and not yet normalized
	for {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		n, rerr := src.Read(buf[w+raw:])
		raw += n
		// The byte-order mark is looked for in the first segment, which must
		// therefore hold three bytes unless the input is shorter.
		if raw > 0 && (k.nz.headDone || raw >= 3 || rerr != nil) {
			seg := buf[w : w+raw]
			m := k.nz.segment(seg)
			k.track(seg[:m])
			w += m
			raw = 0
			if strict && k.cnt.invalid {
				return Result{}, errNotUTF8
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return Result{}, rerr
		}
		// Hand over half-full buffers too: reads into the rest would be small.
		if w >= len(buf)/2 {
			k.submit(job{buf: cur, n: w, mark: k.mark(w)})
			cur = <-k.free
			buf = k.bufs[cur]
			w = 0
		}
	}

	j := job{buf: cur, n: w, mark: k.mark(w), final: true}
	if k.runLen > 0 {
		// The text ends in a blank run: rule 4 drops it.
		if j.mark >= 0 {
			j.n, j.mark = j.mark, -1 // it started in this buffer: never hash it
		} else {
			j.restore = true // it started earlier: go back to the saved state
		}
	}
	k.submit(j)
	return Result{
		Key:      makeKey(k.algo, k.sum),
		UTF16Len: k.cnt.units, // an incomplete sequence still pending is not counted
		Bytes:    k.emitted - k.runLen,
	}, nil
}

// track follows a normalized segment: where the last blank run starts, and
// the UTF-16 length of everything before it. The counter sees a blank run
// only once text follows it, so at the end it has counted exactly the trimmed
// text, and the incomplete sequence before a trailing run stays pending as it
// does at the very end of a text.
func (k *keyer) track(out []byte) {
	k.emitted += int64(len(out))
	q := lastContent(out)
	if q < 0 {
		k.runLen += int64(len(out))
		return
	}
	if k.runLen > 0 {
		k.cnt.blank(k.runLen)
	}
	k.cnt.feed(out[:q+1])
	k.runLen = int64(len(out) - q - 1)
	k.runMarked = false
}

// mark returns where, in a buffer of w normalized bytes about to be hashed,
// the worker must save the hash state: at the start of a blank run that
// reaches the end of the buffer, if that run has not been marked in an
// earlier buffer. It returns -1 otherwise. Because every buffer that ends in
// a run is marked, an unmarked run started in this one: w-runLen >= 0.
func (k *keyer) mark(w int) int {
	if k.runLen == 0 || k.runMarked {
		return -1
	}
	k.runMarked = true
	return w - int(k.runLen)
}
