package bookkey

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// koreaderSample is the size of one sample of KOReader's document id, and the
// unit its offsets grow from.
const koreaderSample = 1024

// KOReaderID returns the id KOReader's progress sync ("kosync") gives a
// document file: its "partial MD5" (util.partialMD5 in KOReader), one MD5 over
// samples of up to 1 KiB at offsets 0, 1 KiB, 4 KiB, 16 KiB, ... 1 GiB
// (1024 << 2i for i = 0..10, after the first at 0), stopping at the first
// offset at or past the end of the file. The id is 32 lowercase hex digits:
// an empty file gives the MD5 of nothing, a file under 1 KiB the MD5 of the
// whole file.
//
// The first offset is 0 because KOReader computes it as lshift(1024, -2):
// LuaJIT's shifts take the count modulo 32 on 32-bit integers, so that is
// 1024 << 30 truncated to 32 bits. Matching that quirk is the point: the id
// must equal the one on the device.
//
// Unlike a BookKey, the id is of the file's bytes, not of its text: a
// re-encoded copy or other line endings give another id. It reads at most
// 12 KiB, wherever the file is large.
func KOReaderID(r io.ReaderAt) (string, error) {
	h := md5.New()
	var buf [koreaderSample]byte
	for i := -1; i <= 10; i++ {
		var off int64
		if i >= 0 {
			off = koreaderSample << (2 * i)
		}
		n, err := r.ReadAt(buf[:], off)
		h.Write(buf[:n])
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("koreader id: read at offset %d: %w", off, err)
		}
		// A short sample is the end of the file, and every later offset
		// is past it: KOReader's next read would find nothing and stop.
		if n < len(buf) {
			break
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
