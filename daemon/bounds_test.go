package daemon

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/library"
)

// GET /v1/status names a member whose records this daemon refused, being
// over the bounds of what one device may write; with none, the list is
// empty, never null.
func TestStatusNamesAWriterOverItsBounds(t *testing.T) {
	ctx := ctxT(t)
	a := startDaemon(t, func(c *Config) {
		c.bounds = library.Bounds{Burst: 20, PerMinute: 1, Total: 1000}
	})
	var raw map[string]json.RawMessage
	if err := a.client.Do(ctx, "GET", "/v1/status", nil, nil, &raw); err != nil {
		t.Fatal(err)
	}
	if got := string(raw["boundsWarnings"]); got != "[]" {
		t.Fatalf("boundsWarnings of a daemon that refused nothing: %s, want []", got)
	}
	r := startDaemon(t, func(c *Config) { c.Name = "rogue" })
	if _, err := r.client.Join(ctx, mustDo(a.client.Invite(ctx))(t)); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		mustDo(r.client.SetPosition(ctx, fmt.Sprintf("md5:%032x", 0xb0b0+i), 1, 0.1, ""))(t)
	}
	poll.Until(t, "A's status to name the rogue", time.Minute, func() bool {
		st := mustDo(a.client.Status(ctx))(t)
		return len(st.BoundsWarnings) > 0
	})
	st := mustDo(a.client.Status(ctx))(t)
	w := st.BoundsWarnings[0]
	if len(st.BoundsWarnings) != 1 || w.Device != r.Device().String() || w.Name != "rogue" || w.Reason != "rate" || w.Refused == 0 || !strings.Contains(w.Warning, "rogue wrote more records per minute") {
		t.Fatalf("A's bounds warnings %+v, want one naming the rogue", st.BoundsWarnings)
	}
	if st.Counts.Books > 20 {
		t.Errorf("A holds %d books, past the rogue's burst of 20", st.Counts.Books)
	}
}
