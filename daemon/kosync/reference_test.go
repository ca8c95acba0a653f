package kosync

import (
	"net/http"
	"testing"
)

// Where the reference server answers something, danyue answers the same:
// a progress without device_id is stored (3 of the reference's sync tests
// push one), and /healthcheck answers 200 {"state":"OK"} without an
// account, under the prefix too.
func TestLikeTheReference(t *testing.T) {
	for _, prefix := range []string{"", "/kosync"} {
		s := startServer(t, Config{Prefix: prefix})
		s.lib.addUser(t, "alice", aliceKey)
		base := s.url // with the prefix

		a := koreader(t, "GET", base+"/healthcheck", "", "", "")
		if a.status != http.StatusOK || a.json(t)["state"] != "OK" {
			t.Errorf("%q: healthcheck: %d %s", prefix, a.status, a.body)
		}

		const doc = "0b229176d4e8db7f6d2b5a4952368d7a"
		a = koreader(t, "PUT", base+"/syncs/progress", "alice", aliceKey, `{"document":"`+doc+`","progress":"12","percentage":0.5,"device":"web"}`)
		if a.status != http.StatusOK {
			t.Fatalf("%q: a progress without device_id: %d %s", prefix, a.status, a.body)
		}
		got := koreader(t, "GET", base+"/syncs/progress/"+doc, "alice", aliceKey, "").json(t)
		if got["progress"] != "12" || got["device"] != "web" {
			t.Errorf("%q: stored %v", prefix, got)
		}
		if id, ok := got["device_id"]; ok && id != "" {
			t.Errorf("%q: device_id %v made up for a push without one", prefix, id)
		}
	}
}
