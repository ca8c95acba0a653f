package kosync

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const (
	docA = "0b229176d4e8db7f6d2b5a4952368d7a"
	docB = "c5a4d1e0b3f2a1908172635445362718"
)

// Issue 8: every endpoint as KOReader uses it, with open registration:
// create an account (a taken name is 402), authenticate, push and pull.
func TestProtocolAsKOReaderUsesIt(t *testing.T) {
	s := startServer(t, Config{Registration: true})
	a := koreader(t, "POST", s.url+"/users/create", "", "", `{"username":"alice","password":"`+aliceKey+`"}`)
	checkJSON(t, "create", a, http.StatusCreated)
	if got := a.json(t); got["username"] != "alice" || len(got) != 1 {
		t.Errorf("create answered %s, want {\"username\":\"alice\"}", a.body)
	}
	a = koreader(t, "POST", s.url+"/users/create", "", "", `{"username":"alice","password":"`+bobKey+`"}`)
	checkError(t, "create a taken name", a, http.StatusPaymentRequired, 2002)
	if !strings.Contains(string(a.body), "already registered") {
		t.Errorf("taken name: message %s does not say so", a.body)
	}

	a = koreader(t, "GET", s.url+"/users/auth", "alice", aliceKey, "")
	checkJSON(t, "auth", a, http.StatusOK)
	if string(bytes.TrimSpace(a.body)) != `{"authorized":"OK"}` {
		t.Errorf("auth answered %s", a.body)
	}

	// A push, then a pull gives the same position back: the progress byte
	// for byte (an XPointer with characters JSON escapes and CJK), the
	// percentage as a number.
	progress := `/body/DocFragment[20]/body/div/p[22]/text().17 «第三章» <&> "quoted" \ é`
	body, _ := json.Marshal(map[string]any{"document": docA, "progress": progress, "percentage": 0.3242, "device": "Kobo Libra 2", "device_id": "8B2FD53C1F5E4A3E9A4F7C11D2E0B6A1"})
	a = koreader(t, "PUT", s.url+"/syncs/progress", "alice", aliceKey, string(body))
	checkJSON(t, "put", a, http.StatusOK)
	put := a.json(t)
	if put["document"] != docA || put["timestamp"] != float64(s.lib.now.Unix()) || len(put) != 2 {
		t.Errorf("put answered %s, want {document, timestamp: %d}", a.body, s.lib.now.Unix())
	}

	a = koreader(t, "GET", s.url+"/syncs/progress/"+docA, "alice", aliceKey, "")
	checkJSON(t, "get", a, http.StatusOK)
	var got struct {
		Document   string   `json:"document"`
		Percentage *float64 `json:"percentage"`
		Progress   string   `json:"progress"`
		Device     string   `json:"device"`
		DeviceID   string   `json:"device_id"`
		Timestamp  *int64   `json:"timestamp"`
	}
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Document != docA || got.Progress != progress || got.Percentage == nil || *got.Percentage != 0.3242 ||
		got.Device != "Kobo Libra 2" || got.DeviceID != "8B2FD53C1F5E4A3E9A4F7C11D2E0B6A1" || got.Timestamp == nil || *got.Timestamp != s.lib.now.Unix() {
		t.Errorf("get answered %s", a.body)
	}
	if len(a.json(t)) != 6 {
		t.Errorf("get answered %s, want exactly the six fields", a.body)
	}

	// An unknown document is 200 {}: a 404 shows as a sync error.
	a = koreader(t, "GET", s.url+"/syncs/progress/"+docB, "alice", aliceKey, "")
	checkJSON(t, "unknown document", a, http.StatusOK)
	if string(bytes.TrimSpace(a.body)) != "{}" {
		t.Errorf("unknown document answered %q, want {}", a.body)
	}
}

// Issue 8: percentage 0 is a position like any other: it is stored and
// returned as the number 0, not left out. Unicode progress strings come back
// as they went in.
func TestPercentageZeroAndUnicode(t *testing.T) {
	s := startServer(t, Config{})
	s.lib.addUser(t, "李雷", aliceKey)
	for _, progress := range []string{"1", "第一章", "😀 emoji \u2028 line separator", ""} {
		body, _ := json.Marshal(map[string]any{"document": docA, "progress": progress, "percentage": 0, "device": "文石 Leaf", "device_id": "x"})
		checkJSON(t, "put "+progress, koreader(t, "PUT", s.url+"/syncs/progress", "李雷", aliceKey, string(body)), http.StatusOK)
		a := koreader(t, "GET", s.url+"/syncs/progress/"+docA, "李雷", aliceKey, "")
		if !bytes.Contains(a.body, []byte(`"percentage":0,`)) {
			t.Errorf("percentage 0 answered as %s", a.body)
		}
		var got struct{ Progress, Device string }
		if json.Unmarshal(a.body, &got) != nil || got.Progress != progress || got.Device != "文石 Leaf" {
			t.Errorf("progress %q answered as %s", progress, a.body)
		}
	}
	// -0 is 0.
	checkJSON(t, "put -0", koreader(t, "PUT", s.url+"/syncs/progress", "李雷", aliceKey, `{"document":"`+docA+`","progress":"1","percentage":-0,"device":"d","device_id":"i"}`), http.StatusOK)
	if a := koreader(t, "GET", s.url+"/syncs/progress/"+docA, "李雷", aliceKey, ""); !bytes.Contains(a.body, []byte(`"percentage":0,`)) {
		t.Errorf("percentage -0 answered as %s", a.body)
	}
}

// Issue 8: header names are case-insensitive: KOReader writes them in lower
// case, other clients canonically or in capitals.
func TestAuthHeaderNamesAnyCase(t *testing.T) {
	s := startServer(t, Config{})
	s.lib.addUser(t, "alice", aliceKey)
	for _, names := range [][2]string{{"x-auth-user", "x-auth-key"}, {"X-Auth-User", "X-Auth-Key"}, {"X-AUTH-USER", "X-AUTH-KEY"}, {"x-Auth-uSer", "X-auth-KEY"}} {
		req, _ := http.NewRequest("GET", s.url+"/users/auth", nil)
		req.Header[names[0]] = []string{"alice"}
		req.Header[names[1]] = []string{aliceKey}
		checkJSON(t, names[0], do(t, req), http.StatusOK)
	}
}

// Issue 8: a missing, empty or wrong pair is 401 with a JSON body on every
// endpoint, stores nothing, and does not tell an unknown account from a
// wrong key. (The guess limits are out of the way: with them, this many
// wrong pairs from one address get the lock's 429, see oracle_test.go.)
func TestUnauthorizedEverywhere(t *testing.T) {
	s := startServer(t, Config{limits: &noLimits})
	s.lib.addUser(t, "alice", aliceKey)
	writes := s.lib.writeCount()
	push := `{"document":"` + docA + `","progress":"1","percentage":0.5,"device":"d","device_id":"i"}`
	pairs := []struct{ name, user, key string }{
		{"no headers", "", ""},
		{"no key", "alice", ""},
		{"no user", "", aliceKey},
		{"wrong key", "alice", bobKey},
		{"key in upper case", "alice", strings.ToUpper(aliceKey)},
		{"unknown user", "mallory", aliceKey},
		{"user in other case", "Alice", aliceKey},
	}
	var bodies = map[string]string{}
	for _, p := range pairs {
		for _, ep := range []struct{ method, path, body string }{
			{"GET", "/users/auth", ""},
			{"PUT", "/syncs/progress", push},
			{"GET", "/syncs/progress/" + docA, ""},
		} {
			a := koreader(t, ep.method, s.url+ep.path, p.user, p.key, ep.body)
			checkError(t, p.name+": "+ep.method+" "+ep.path, a, http.StatusUnauthorized, 2001)
			bodies[string(a.body)] = p.name
		}
	}
	if len(bodies) != 1 {
		t.Errorf("refusals differ, so they tell why: %v", bodies)
	}
	// Empty values, and the pair sent twice.
	for name, h := range map[string]http.Header{
		"empty user": {"x-auth-user": {""}, "x-auth-key": {aliceKey}},
		"empty key":  {"x-auth-user": {"alice"}, "x-auth-key": {""}},
		"two users":  {"x-auth-user": {"alice", "bob"}, "x-auth-key": {aliceKey}},
	} {
		req, _ := http.NewRequest("PUT", s.url+"/syncs/progress", strings.NewReader(push))
		for k, v := range h {
			req.Header[k] = v
		}
		checkError(t, name, do(t, req), http.StatusUnauthorized, 2001)
	}
	if s.lib.writeCount() != writes {
		t.Errorf("refused requests wrote %d times", s.lib.writeCount()-writes)
	}
}

// Issue 8: an account sees and writes only its own documents.
func TestAccountIsolation(t *testing.T) {
	s := startServer(t, Config{})
	s.lib.addUser(t, "alice", aliceKey)
	s.lib.addUser(t, "bob", bobKey)
	push := func(user, key, progress string) {
		t.Helper()
		a := koreader(t, "PUT", s.url+"/syncs/progress", user, key, `{"document":"`+docA+`","progress":"`+progress+`","percentage":0.5,"device":"d","device_id":"i"}`)
		checkJSON(t, user+" push", a, http.StatusOK)
	}
	pull := func(user, key string) string {
		t.Helper()
		var got struct{ Progress string }
		json.Unmarshal(koreader(t, "GET", s.url+"/syncs/progress/"+docA, user, key, "").body, &got)
		return got.Progress
	}
	push("alice", aliceKey, "alice's place")
	if got := pull("bob", bobKey); got != "" {
		t.Fatalf("bob reads alice's document: %q", got)
	}
	push("bob", bobKey, "bob's place")
	if got := pull("alice", aliceKey); got != "alice's place" {
		t.Fatalf("bob's push changed alice's document: %q", got)
	}
	// Bob's key does not open alice's account, whatever the user header.
	checkError(t, "bob's key as alice", koreader(t, "GET", s.url+"/syncs/progress/"+docA, "alice", bobKey, ""), http.StatusUnauthorized, 2001)
}

// Issue 8: registration is off unless asked for; the refusal is a 4xx with a
// message that says what to do, and creates nothing.
func TestRegistrationOffByDefault(t *testing.T) {
	s := startServer(t, Config{})
	a := koreader(t, "POST", s.url+"/users/create", "", "", `{"username":"alice","password":"`+aliceKey+`"}`)
	checkError(t, "create with registration off", a, http.StatusPaymentRequired, 2005)
	if !strings.Contains(string(a.body), "danyue kosync adduser") || s.lib.writeCount() != 0 {
		t.Errorf("refusal %s, %d writes", a.body, s.lib.writeCount())
	}
	checkError(t, "auth of the refused account", koreader(t, "GET", s.url+"/users/auth", "alice", aliceKey, ""), http.StatusUnauthorized, 2001)
}

// Issue 49: a push without device_id reads back without the field, as
// from the reference server, not with "device_id": "".
func TestPushWithoutDeviceID(t *testing.T) {
	s := startServer(t, Config{limits: &noLimits})
	s.lib.addUser(t, "alice", aliceKey)
	push := `{"document":"` + docA + `","progress":"1","percentage":0.5,"device":"d"}`
	checkJSON(t, "push", koreader(t, "PUT", s.url+"/syncs/progress", "alice", aliceKey, push), http.StatusOK)
	a := koreader(t, "GET", s.url+"/syncs/progress/"+docA, "alice", aliceKey, "")
	checkJSON(t, "get", a, http.StatusOK)
	var got map[string]any
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["device_id"]; ok || got["device"] != "d" {
		t.Errorf("GET after a push without device_id: %s", a.body)
	}
}
