package bookkey

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/danyue/danyue/internal/keyalgo"
)

// Algo is the hash function of a key, numbered as package crdt numbers it
// (both use keyalgo). In Options the zero value means MD5, the default.
type Algo = keyalgo.Algo

const (
	MD5    = keyalgo.MD5
	SHA256 = keyalgo.SHA256
)

// ParseAlgo parses "md5" or "sha256".
func ParseAlgo(s string) (Algo, error) {
	a, err := keyalgo.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("bookkey: %w", err)
	}
	return a, nil
}

// Encoding is the text encoding of the input. As an option it says how to
// decode; in a Result it says how the input was decoded, and is then always
// one of UTF8, UTF16LE, UTF16BE or GB18030.
type Encoding uint8

const (
	// Auto detects the encoding; see the package documentation.
	Auto Encoding = iota
	UTF8
	// UTF16 is UTF-16 in the byte order its byte-order mark gives,
	// little-endian if it has none. It is only an option.
	UTF16
	UTF16LE
	UTF16BE
	// GB18030 also decodes GBK and GB2312, which it extends.
	GB18030
)

func (e Encoding) String() string {
	switch e {
	case Auto:
		return "auto"
	case UTF8:
		return "utf-8"
	case UTF16:
		return "utf-16"
	case UTF16LE:
		return "utf-16le"
	case UTF16BE:
		return "utf-16be"
	case GB18030:
		return "gb18030"
	}
	return "encoding(" + strconv.Itoa(int(e)) + ")"
}

// ParseEncoding parses the names String returns, case-insensitively, and the
// aliases "utf8", "utf16" and "gbk" (decoded as GB18030, its superset).
func ParseEncoding(s string) (Encoding, error) {
	switch strings.ToLower(s) {
	case "auto":
		return Auto, nil
	case "utf-8", "utf8":
		return UTF8, nil
	case "utf-16", "utf16":
		return UTF16, nil
	case "utf-16le", "utf16le":
		return UTF16LE, nil
	case "utf-16be", "utf16be":
		return UTF16BE, nil
	case "gb18030", "gbk":
		return GB18030, nil
	}
	return 0, fmt.Errorf("bookkey: unknown encoding %q (want auto, utf-8, gb18030 or utf-16)", s)
}

// Options say how to key a text. The zero value keys with MD5 and detects the
// encoding.
type Options struct {
	Algo     Algo
	Encoding Encoding
}

// algo is the hash to key with: the zero Algo means MD5.
func (o Options) algo() Algo {
	if o.Algo == 0 {
		return MD5
	}
	return o.Algo
}

func (o Options) check() error {
	if o.Algo > SHA256 {
		return fmt.Errorf("bookkey: unknown hash %v", o.Algo)
	}
	if o.Encoding > GB18030 {
		return fmt.Errorf("bookkey: unknown encoding %v", o.Encoding)
	}
	return nil
}

// Result is the BookKey of a text and what was measured on the way.
type Result struct {
	// Key is the BookKey: "md5:<32 hex digits>" or "sha256:<64 hex
	// digits>" in its text form.
	Key Key
	// Encoding is the encoding the input was decoded from.
	Encoding Encoding
	// UTF16Len is the length of the normalized text in UTF-16 code units, the
	// unit of character offsets into the book.
	UTF16Len int64
	// Bytes is the length of the normalized text in UTF-8: the bytes hashed.
	Bytes int64
}

// Key is a BookKey: the hash function and the digest. It is a value, so that
// keying allocates nothing; String gives the text form.
type Key struct {
	algo Algo
	n    uint8
	sum  [32]byte
}

func makeKey(a Algo, sum []byte) Key {
	k := Key{algo: a, n: uint8(len(sum))}
	copy(k.sum[:], sum)
	return k
}

// String returns "md5:<hex>" or "sha256:<hex>".
func (k Key) String() string {
	var b [len("sha256:") + 64]byte
	n := copy(b[:], k.algo.String())
	b[n] = ':'
	n++
	n += hex.Encode(b[n:], k.sum[:k.n])
	return string(b[:n])
}

// MarshalText makes a Key print as its text form in JSON and elsewhere.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// ErrNotSeekable is returned in Auto mode when the input turns out not to be
// UTF-8 and the reader cannot seek back to read it again as GB18030. Key such
// input with an explicit Options.Encoding.
var ErrNotSeekable = errors.New("bookkey: input is not utf-8 and the reader cannot seek back to read it as gb18030; give the encoding")

// keyers holds idle keyers: the buffers and hash states are the only memory a
// call needs, so reusing them makes keying allocation-free.
var keyers = sync.Pool{New: func() any { return newKeyer(defaultBufSize) }}

// Read keys the text r yields until io.EOF, in one pass and in memory that
// does not depend on the length of the text. Errors from r are returned as
// they are. ctx is checked between reads.
//
// In Auto mode, input that is not UTF-8 is read a second time as GB18030: r
// must then be an io.Seeker, whose position Read restores before the second
// pass; otherwise Read returns ErrNotSeekable.
func Read(ctx context.Context, r io.Reader, opt Options) (Result, error) {
	if err := opt.check(); err != nil {
		return Result{}, err
	}
	k := keyers.Get().(*keyer)
	defer keyers.Put(k)
	return k.read(ctx, r, opt)
}

// String keys s. It panics if opt is invalid; it cannot otherwise fail.
func String(s string, opt Options) Result {
	res, err := Read(context.Background(), strings.NewReader(s), opt)
	if err != nil {
		panic(err)
	}
	return res
}
