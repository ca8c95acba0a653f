package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/poll"
)

// TestCLIDevices drives two daemon processes with the CLI: a joined device
// is listed on both with who added it, a rename shows everywhere, and a
// forgotten device is listed as forgotten and refused.
func TestCLIDevices(t *testing.T) {
	a := startDaemonProc(t, "desk")
	b := startDaemonProc(t, "pocket")
	code := strings.TrimSpace(a.cli(t, "invite").stdout)
	if res := b.cli(t, "join", code); res.code != 0 {
		t.Fatalf("join: exit %d, stderr %q", res.code, res.stderr)
	}
	var list []api.Member
	poll.Until(t, "A to list B connected", 15*time.Second, func() bool {
		res := a.cli(t, "devices", "--json")
		return res.code == 0 && json.Unmarshal([]byte(res.stdout), &list) == nil &&
			len(list) == 2 && list[1].Name == "pocket" && list[1].Connected
	})
	if !list[0].Self || list[0].Name != "desk" || list[1].AddedBy == nil || *list[1].AddedBy != list[0].ID {
		t.Fatalf("devices --json on A: %+v; want desk itself, then pocket added by desk", list)
	}
	res := a.cli(t, "devices")
	for _, want := range []string{"NAME", "ADDED BY", "desk", "pocket", "this device", "itself", "connected"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("devices table lacks %q:\n%s", want, res.stdout)
		}
	}

	if res := b.cli(t, "rename", "old", "phone"); res.code != 0 || !strings.Contains(res.stdout, "old phone") {
		t.Fatalf("rename: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	poll.Until(t, "A to learn B's new name", 15*time.Second, func() bool {
		return strings.Contains(a.cli(t, "devices").stdout, "old phone")
	})
	if res := a.cli(t, "forget", "old phone"); res.code != 0 || !strings.Contains(res.stdout, "Forgot old phone") || !strings.Contains(res.stdout, "secret has changed") {
		t.Fatalf("forget: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	res = a.cli(t, "devices")
	if !strings.Contains(res.stdout, "forgotten by desk") {
		t.Errorf("devices after forget:\n%s", res.stdout)
	}
	if res := a.cli(t, "forget", "nobody"); res.code != 1 || !strings.Contains(res.stderr, "nobody") {
		t.Errorf("forget of an unknown device: exit %d, stderr %q", res.code, res.stderr)
	}
	if res := a.cli(t, "rename"); res.code != 2 {
		t.Errorf("rename without a name: exit %d", res.code)
	}
	if res := a.cli(t, "leave", "now"); res.code != 2 {
		t.Errorf("leave with an argument: exit %d", res.code)
	}
	if res := a.cli(t, "leave"); res.code != 0 || !strings.Contains(res.stdout, "library of its own") {
		t.Errorf("leave: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}
