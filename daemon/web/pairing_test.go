package web

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon/api"
)

// pairingBackend is the fake backend with pairing warnings in its status.
type pairingBackend struct {
	*fakeBackend
	warnings []api.PairingWarning
}

func (b pairingBackend) Status(ctx context.Context) (api.Status, error) {
	st, err := b.fakeBackend.Status(ctx)
	st.PairingWarnings = b.warnings
	return st, err
}

// The page names an address that burned pairing codes, as the status
// gives it, escaped like everything else.
func TestPagePairingWarnings(t *testing.T) {
	_, f, _ := testServer(t)
	warning := "2 pairing codes burned by 192.0.2.66 in the last 10 minutes, the last at 12:00:00: someone on this network is trying to pair <b>"
	s := New(Config{Backend: pairingBackend{f, []api.PairingWarning{{Address: "192.0.2.66", Burns: 2, Warning: warning}}}})
	c, _ := login(t, s)
	body := serve(s, withCookie(httptest.NewRequest("GET", "/", nil), c)).Body.String()
	if !strings.Contains(body, "Pairing: 2 pairing codes burned by 192.0.2.66 in the last 10 minutes") || strings.Contains(body, "pair <b>") {
		t.Fatalf("the page does not show the pairing warning, escaped:\n%s", body)
	}
}
