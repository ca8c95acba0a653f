package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/kosync"
	"github.com/danyue/danyue/store"
)

// KOReader's progress sync: the kosync listener (off unless Config.Kosync
// names an address) and the library operations behind it. Accounts and
// progress are library records, written through the crdt operations and the
// store like books, so every daemon of the library serves the same accounts
// and converges on the newest position.

// serveKosync starts the kosync listener, if one is configured. It serves
// the protocol and nothing else: the local API never listens there.
func (d *Daemon) serveKosync() error {
	if d.cfg.Kosync == "" {
		return nil
	}
	log := d.log.With("component", "kosync")
	h, err := kosync.New(kosync.Config{
		Library:      kosyncLibrary{d},
		Registration: d.cfg.KosyncRegistration,
		Prefix:       d.cfg.KosyncPrefix,
		Logger:       log,
	})
	if err != nil {
		return fmt.Errorf("--kosync-prefix: %w", err)
	}
	ln := d.early.kosync
	d.kosyncAddr = ln.Addr().String()
	d.serveLimited("kosync", ln, kosync.NewServer(h, log), d.limits.kosync, nil)
	prefix, _ := kosync.CleanPrefix(d.cfg.KosyncPrefix)
	log.Info("serving KOReader progress sync", "addr", d.kosyncAddr, "urls", reachableURLs(d.kosyncAddr, prefix), "registration", d.cfg.KosyncRegistration)
	if d.cfg.KosyncRegistration {
		log.Warn("kosync registration is open: anyone who reaches the listener can create an account in this library")
	}
	return nil
}

// KosyncAddr returns the address of the kosync listener, if there is one
// (useful when it was started on port 0).
func (d *Daemon) KosyncAddr() string { return d.kosyncAddr }

// createKosyncUser adds the account name with the key hash, unless this
// device already knows the name. Two devices cut off from each other can
// both create a name; the later account wins everywhere once they meet.
func (d *Daemon) createKosyncUser(ctx context.Context, name, hash string) error {
	e, err := crdt.SetKosyncUser(d.stamp(), name, hash)
	if err != nil {
		return err
	}
	id := e.AppendID(nil)
	// The check runs inside the store's write, so two requests for one
	// name cannot both succeed.
	_, err = d.apply(ctx, store.Batch{Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(id)
		if err != nil {
			return nil, err
		}
		if ok && cur.KosyncUser.Exists() {
			return nil, fmt.Errorf("kosync user %q: %w", name, kosync.ErrUserExists)
		}
		return []crdt.Entry{e}, nil
	}})
	return err
}

// changeKosyncUser writes e, a new key or a removal of the account, if the
// account exists, checked inside the store's write; ErrNoUser if not.
func (d *Daemon) changeKosyncUser(ctx context.Context, e crdt.Entry) error {
	id := e.AppendID(nil)
	_, err := d.apply(ctx, store.Batch{Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(id)
		if err != nil {
			return nil, err
		}
		if !ok || !cur.KosyncUser.Exists() {
			return nil, fmt.Errorf("kosync user %q: %w", e.KosyncUser.Name, kosync.ErrNoUser)
		}
		return []crdt.Entry{e}, nil
	}})
	return err
}

// kosyncLibrary is the daemon's library as the kosync protocol sees it.
type kosyncLibrary struct{ d *Daemon }

var _ kosync.Library = kosyncLibrary{}

func (l kosyncLibrary) UserAuth(ctx context.Context, name string) (string, bool, error) {
	e, ok, err := l.d.store.Get(ctx, kosyncUserID(name))
	if err != nil || !ok || !e.KosyncUser.Exists() {
		return "", false, err
	}
	return e.KosyncUser.Auth.Value, true, nil
}

// ReplaceAuth rewrites the account with a new key hash (an upgrade of its
// form), checked inside the store's write so that a key changed meanwhile,
// here or synced from another device, is kept. The rewrite is a write like
// any other: it reaches every device of the library.
func (l kosyncLibrary) ReplaceAuth(ctx context.Context, name, old, new string) (bool, error) {
	e, err := crdt.SetKosyncUser(l.d.stamp(), name, new)
	if err != nil {
		return false, err
	}
	id := e.AppendID(nil)
	replaced := false
	_, err = l.d.apply(ctx, store.Batch{Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(id)
		if err != nil || !ok || !cur.KosyncUser.Exists() || cur.KosyncUser.Auth.Value != old {
			return nil, err
		}
		replaced = true
		return []crdt.Entry{e}, nil
	}})
	return replaced && err == nil, err
}

func (l kosyncLibrary) CreateUser(ctx context.Context, name, hash string) error {
	return l.d.createKosyncUser(ctx, name, hash)
}

func (l kosyncLibrary) Progress(ctx context.Context, user, document string) (kosync.Progress, bool, error) {
	e, ok, err := l.d.store.Get(ctx, kosyncProgressID(user, document))
	if err != nil || !ok || e.KosyncProgress.At.IsZero() {
		return kosync.Progress{}, false, err
	}
	return progressOf(&e.KosyncProgress), true, nil
}

// SetProgress stamps the write on the hybrid clock, after everything this
// daemon has seen of the record (Daemon.write): here it always wins, and
// elsewhere it wins over every write made before it, whenever they arrive.
func (l kosyncLibrary) SetProgress(ctx context.Context, user string, p kosync.Progress) (kosync.Progress, error) {
	res, err := l.d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
		return crdt.SetKosyncProgress(at, crdt.KosyncProgress{
			User: user, Document: p.Document, Progress: p.Progress, Percentage: p.Percentage, Device: p.Device, DeviceID: p.DeviceID,
		})
	})
	if err != nil {
		return kosync.Progress{}, err
	}
	stored := crdt.KosyncProgress{User: user, Document: p.Document, Progress: p.Progress, Percentage: p.Percentage, Device: p.Device, DeviceID: p.DeviceID}
	for _, c := range res.Changed {
		if c.Entry.Kind == crdt.KindKosyncProgress && c.Entry.KosyncProgress.User == user && c.Entry.KosyncProgress.Document == p.Document {
			stored = c.Entry.KosyncProgress
		}
	}
	return progressOf(&stored), nil
}

func progressOf(p *crdt.KosyncProgress) kosync.Progress {
	return kosync.Progress{
		Document: p.Document, Progress: p.Progress, Percentage: p.Percentage, Device: p.Device, DeviceID: p.DeviceID,
		Time: time.UnixMilli(int64(p.At.Wall)),
	}
}

func kosyncUserID(name string) []byte {
	e := crdt.KosyncUserEntry(crdt.KosyncUser{Name: name})
	return e.AppendID(nil)
}

func kosyncProgressID(user, document string) []byte {
	e := crdt.KosyncProgressEntry(crdt.KosyncProgress{User: user, Document: document})
	return e.AppendID(nil)
}
