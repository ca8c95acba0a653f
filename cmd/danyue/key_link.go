package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/client"
)

// kosyncLinker tells the daemon of --data, if one runs, which book each
// keyed file's KOReader document is, so that every device of the library
// shows KOReader's progress under the book's title. Keying works without a
// daemon, which is the common case: then nothing is sent and nothing said.
type kosyncLinker struct {
	c      *client.Client
	off    bool  // --no-link, or no daemon answered
	err    error // why linking stopped, if it did
	linked int
}

func newKosyncLinker(dataDir string, disabled bool) *kosyncLinker {
	if disabled {
		return &kosyncLinker{off: true}
	}
	return &kosyncLinker{c: client.New(daemon.DefaultSocket(dataDir))}
}

// link sends one file's link; after the first failure it stops trying.
func (l *kosyncLinker) link(ctx context.Context, koreaderID, key, path string) {
	if l.off {
		return
	}
	title := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if err := l.c.KosyncLink(ctx, koreaderID, key, title); err != nil {
		l.off, l.err = true, err
		return
	}
	l.linked++
}

// finish closes the client and says what happened, on w (stderr).
func (l *kosyncLinker) finish(w io.Writer) {
	if l.c != nil {
		l.c.Close()
	}
	switch {
	case errors.Is(l.err, client.ErrNoDaemon):
	case l.err != nil:
		fmt.Fprintf(w, "danyue: KOReader's ids were not linked to the books: %v\n", l.err)
	case l.linked > 0:
		fmt.Fprintf(w, "danyue: linked %d KOReader document(s) to their books in the library\n", l.linked)
	}
}
