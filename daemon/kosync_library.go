package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/kosync"
	"github.com/danyue/danyue/library"
)

// KOReader's progress sync: the kosync listener (off unless Config.Kosync
// names an address), serving the library's accounts and progress records
// (library/kosync.go), which every device of the library shares.

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

// kosyncLibrary is the daemon's library as the kosync protocol sees it
// (library/kosync.go has the records).
type kosyncLibrary struct{ d *Daemon }

var _ kosync.Library = kosyncLibrary{}

func (l kosyncLibrary) UserAuth(ctx context.Context, name string) (string, bool, error) {
	return l.d.lib.KosyncAuth(ctx, name)
}

func (l kosyncLibrary) ReplaceAuth(ctx context.Context, name, old, new string) (bool, error) {
	return l.d.lib.ReplaceKosyncAuth(ctx, name, old, new)
}

func (l kosyncLibrary) CreateUser(ctx context.Context, name, hash string) error {
	err := l.d.lib.CreateKosyncUser(ctx, name, hash)
	if errors.Is(err, library.ErrKosyncUserExists) {
		return fmt.Errorf("kosync user %q: %w", name, kosync.ErrUserExists)
	}
	return err
}

func (l kosyncLibrary) Progress(ctx context.Context, user, document string) (kosync.Progress, bool, error) {
	p, ok, err := l.d.lib.KosyncProgress(ctx, user, document)
	if err != nil || !ok {
		return kosync.Progress{}, false, err
	}
	return progressOf(&p), true, nil
}

func (l kosyncLibrary) SetProgress(ctx context.Context, user string, p kosync.Progress) (kosync.Progress, error) {
	stored, err := l.d.lib.SetKosyncProgress(ctx, crdt.KosyncProgress{
		User: user, Document: p.Document, Progress: p.Progress, Percentage: p.Percentage, Device: p.Device, DeviceID: p.DeviceID,
	})
	if err != nil {
		return kosync.Progress{}, err
	}
	return progressOf(&stored), nil
}

func progressOf(p *crdt.KosyncProgress) kosync.Progress {
	return kosync.Progress{
		Document: p.Document, Progress: p.Progress, Percentage: p.Percentage, Device: p.Device, DeviceID: p.DeviceID,
		Time: time.UnixMilli(int64(p.At.Wall)),
	}
}
