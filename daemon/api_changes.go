package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/store"
)

// GET /v1/changes: the books that changed on this device after a sequence
// number of its change sequence, as CouchDB's _changes feed does. The store
// keeps each record once, under its latest sequence number (store.Since), so
// a book that changed several times comes once, as it is now; an app that
// keeps its own copy pays for what changed, not for the library. Only
// durable changes are answered, so a sequence number once answered is never
// taken back.

// maxWait bounds the long poll: a client that wants longer asks again.
const maxWait = 5 * time.Minute

// errPageFull stops a Since scan once a page is full.
var errPageFull = errors.New("page full")

func (d *Daemon) handleChanges(w http.ResponseWriter, r *http.Request) error {
	qv := r.URL.Query()
	var (
		since uint64
		limit = defaultPage
		wait  time.Duration
	)
	if qv.Has("since") {
		v := qv.Get("since")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return errorf(http.StatusBadRequest, api.CodeInvalid, "since must be a sequence number (an integer >= 0), not %q", v)
		}
		since = n
	}
	if qv.Has("limit") {
		n, err := strconv.Atoi(qv.Get("limit"))
		if err != nil || n < 1 || n > store.MaxPage {
			return errorf(http.StatusBadRequest, api.CodeInvalid, "limit must be an integer in [1, %d], not %q", store.MaxPage, qv.Get("limit"))
		}
		limit = n
	}
	if qv.Has("wait") {
		var err error
		if wait, err = parseWait(qv.Get("wait")); err != nil {
			return err
		}
	}
	if last := d.store.LastSeq(); since > last {
		return errorf(http.StatusBadRequest, api.CodeInvalid,
			"since %d is past this device's last change %d: it comes from another epoch of the store (this one is %016x); start again from since=0", since, last, d.store.Epoch())
	}

	st := newJSONStream(w, fmt.Sprintf(`{"epoch":"%016x","changes":[`, d.store.Epoch()))
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		cur, changed := d.store.Watch()
		if cur > since {
			last, more, err := d.changesAfter(r, st, since, limit)
			if err != nil {
				return st.fail(err)
			}
			since = last
			if st.n > 0 || more || wait == 0 {
				return st.end(fmt.Sprintf(`,"last":%d,"more":%v`, since, more))
			}
			continue // only records that are not books changed: wait on
		}
		if wait == 0 {
			break
		}
		select {
		case <-changed:
			continue
		case <-timeout:
		case <-d.closing:
		case <-r.Context().Done():
			return nil
		}
		break
	}
	return st.end(fmt.Sprintf(`,"last":%d,"more":false`, since))
}

// parseWait reads wait as a Go duration ("30s") or a number of seconds.
func parseWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseUint(v, 10, 32)
		if nerr != nil {
			return 0, errorf(http.StatusBadRequest, api.CodeInvalid, "wait must be a duration such as 30s, or seconds, not %q", v)
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 || d > maxWait {
		return 0, errorf(http.StatusBadRequest, api.CodeInvalid, "wait must be between 0 and %v, not %v", maxWait, d)
	}
	return d, nil
}

// changesAfter streams the books whose latest change comes after since, at
// most limit of them. It returns the sequence number up to which every
// change has been answered, and whether changes were left out for the
// limit.
func (d *Daemon) changesAfter(r *http.Request, st *jsonStream, since uint64, limit int) (last uint64, more bool, err error) {
	v := d.viewer()
	// Since answers up to the LastSeq of its call, which is at least this
	// one: if it ends without stopping, everything up to here is answered.
	upto := d.store.LastSeq()
	last, n := since, 0
	err = d.store.Since(r.Context(), since, 0, func(seq uint64, data []byte) error {
		if n == limit {
			more = true
			return errPageFull
		}
		e, err := crdt.Decode(data)
		if err != nil {
			return fmt.Errorf("change %d: %w", seq, err)
		}
		last = seq
		if e.Kind != crdt.KindBook {
			return nil
		}
		n++
		return st.item(api.Change{Seq: seq, Book: v.book(&e.Book)})
	})
	if errors.Is(err, errPageFull) {
		return last, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	return max(last, upto), false, nil
}
