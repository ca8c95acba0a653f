package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/store"
)

// ErrHealthy is returned by Repair, unless forced, for a store that opens
// without a fault: moving it aside would make every peer send the whole
// library again for nothing, and drop what only this device holds.
var ErrHealthy = errors.New("the store is healthy")

// Repair moves the damaged store of the data dir aside and returns where it
// went; the next start of the daemon makes a new store, keeping the device
// identity, name and library, and the other devices send the library again
// (store.Repair). The daemon must not be running. Unless force is set it
// first opens the store, and refuses with ErrHealthy if that works, or with
// store.ErrNewerSchema for a store a newer build wrote (a newer danyue
// reads it; a new store here would lose what only it holds).
func Repair(ctx context.Context, dataDir string, force bool) (string, error) {
	dir := storeDir(dataDir)
	if !force {
		st, err := store.Open(ctx, dir, store.Options{Logger: slog.New(slog.DiscardHandler)})
		switch {
		case err == nil:
			if err := st.Close(); err != nil {
				return "", fmt.Errorf("repair %s: %w", dir, err)
			}
			return "", fmt.Errorf("repair %s: %w: it opens and reads without a fault, so there is nothing to repair", dir, ErrHealthy)
		case errors.Is(err, store.ErrLocked), errors.Is(err, store.ErrNewerSchema), ctx.Err() != nil:
			return "", err
		}
	}
	return store.Repair(dir)
}

// storeDir is where the daemon keeps its store in a data dir.
func storeDir(dataDir string) string { return filepath.Join(dataDir, "store") }

// storeLoss renders the store's last loss of acknowledged changes, if any.
func storeLoss(s *store.Store) *api.StoreLoss {
	l, ok := s.Loss()
	if !ok {
		return nil
	}
	out := &api.StoreLoss{
		FoundAt: l.FoundAt.UTC().Format(time.RFC3339),
		Changes: l.Changes(),
		Records: make([]string, 0, len(l.Records)),
		Unnamed: l.Unnamed,
	}
	for _, r := range l.Records {
		out.Records = append(out.Records, r.Name())
	}
	out.Warning = fmt.Sprintf("on %s this device found that its store had lost %d changes it had acknowledged (%d records, a damaged disk or file); it asked every peer to send everything again, so what they hold comes back",
		l.FoundAt.UTC().Format(time.DateOnly), l.Changes(), len(l.Records))
	return out
}
