package bookkey

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding"
	"hash"

	"golang.org/x/text/transform"
)

// The work of a call is split between two goroutines. The caller's goroutine
// reads, normalizes and counts into a ring of buffers; a worker hashes the
// buffers it is handed, in order. MD5 cannot be split, so one core hashing at
// full speed is the limit, and it is reached only if the scanning runs beside
// it rather than before it. The worker is started only for a text longer than
// half a buffer, and is joined before the call returns, on every path.

const (
	defaultBufSize = 128 << 10
	nBufs          = 4
)

// keyer is the reusable state of one call.
type keyer struct {
	bufs    [nBufs][]byte
	free    chan int // indexes of buffers the worker is done with
	jobs    chan job
	done    chan struct{}
	running bool // a worker owns k.h until it sends on done

	algo   Algo
	h      stateHash
	hashes [SHA256 + 1]stateHash // by Algo, made on first use
	snap   []byte                // a hash state saved at the start of a blank run
	sum    []byte

	nz        normalizer
	cnt       counter
	emitted   int64 // normalized bytes after the leading blanks
	runLen    int64 // blank bytes at the end of what was emitted so far
	runMarked bool  // the worker was told to save the hash state where that run starts

	head     headReader
	dec      decodeReader
	decoders [GB18030 + 1]transform.Transformer // by Encoding, made on first use
}

// stateHash is a hash whose state can be saved and restored, as the
// standard library's are. The hashes are asserted to it once, when made: an
// assertion from one interface to another in the hot path would go through
// the runtime's per-site cache, which the runtime fills at random (about one
// miss in a thousand), allocating then, so a call could allocate long after
// the first.
type stateHash interface {
	hash.Hash
	encoding.BinaryAppender
	encoding.BinaryUnmarshaler
}

// job is one message to the worker: hash bufs[buf][:n], saving the hash state
// after the first mark bytes if mark >= 0.
type job struct {
	buf, n, mark int
	// restore: after hashing, go back to the saved state, because the text
	// ended inside the blank run that started there.
	restore bool
	final   bool // then put the digest in k.sum and stop
	stop    bool // stop without a digest (the call failed); buf is -1
}

func newKeyer(bufSize int) *keyer {
	k := &keyer{
		free: make(chan int, nBufs),
		jobs: make(chan job, nBufs+1),
		done: make(chan struct{}, 1),
		snap: make([]byte, 0, 256),
		sum:  make([]byte, 0, sha256.Size),
	}
	for i := range k.bufs {
		k.bufs[i] = make([]byte, bufSize)
	}
	return k
}

// useAlgo selects and resets the hash for the next pass.
func (k *keyer) useAlgo(a Algo) {
	k.algo = a
	if k.hashes[a] == nil {
		switch a {
		case MD5:
			k.hashes[a] = md5.New().(stateHash)
		case SHA256:
			k.hashes[a] = sha256.New().(stateHash)
		}
	}
	k.h = k.hashes[a]
}

// resetPass prepares for a pass over the text from its start.
func (k *keyer) resetPass() {
	k.h.Reset()
	k.nz = normalizer{}
	k.cnt = counter{}
	k.emitted, k.runLen, k.runMarked = 0, 0, false
	for len(k.free) > 0 {
		<-k.free
	}
	for i := range k.bufs {
		k.free <- i
	}
}

// workers hands a keyer to the goroutine started for it. Starting a goroutine
// on a plain function instead of a closure over k keeps calls allocation-free;
// which worker takes which keyer does not matter.
var workers = make(chan *keyer, 1)

func work() {
	k := <-workers
	for {
		j := <-k.jobs
		if j.buf >= 0 {
			k.hash(j)
			k.free <- j.buf
		}
		if j.final || j.stop {
			k.done <- struct{}{}
			return
		}
	}
}

// submit hands j to the worker, starting it for the first job that is not
// also the last; a text that fits in one buffer is hashed inline. After a
// final job k.sum holds the digest.
func (k *keyer) submit(j job) {
	if !k.running {
		if j.final {
			k.hash(j)
			return
		}
		k.running = true
		workers <- k
		go work()
	}
	k.jobs <- j
	if j.final {
		<-k.done
		k.running = false
	}
}

// stop joins the worker, if one is running; the jobs already queued are
// hashed and thrown away.
func (k *keyer) stop() {
	if k.running {
		k.jobs <- job{buf: -1, stop: true}
		<-k.done
		k.running = false
	}
}

func (k *keyer) hash(j job) {
	b := k.bufs[j.buf][:j.n]
	if j.mark >= 0 {
		k.h.Write(b[:j.mark])
		// AppendBinary into a buffer with room does not allocate, so only
		// blank runs cost a snapshot, and a snapshot costs ~100 bytes.
		var err error
		if k.snap, err = k.h.AppendBinary(k.snap[:0]); err != nil {
			panic("bookkey: save hash state: " + err.Error())
		}
		b = b[j.mark:]
	}
	k.h.Write(b)
	if j.restore {
		if err := k.h.UnmarshalBinary(k.snap); err != nil {
			panic("bookkey: restore hash state: " + err.Error())
		}
	}
	if j.final {
		k.sum = k.h.Sum(k.sum[:0])
	}
}
