package daemon

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/store"
)

// Repair moves the damaged store of the data dir aside and returns where it
// went; the next start of the daemon makes a new store, keeping the device
// identity and library, and the other devices send the library again
// (store.Repair). The daemon must not be running.
func Repair(dataDir string) (string, error) {
	return store.Repair(storeDir(dataDir))
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
