package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon/api"
)

// freePort returns a loopback address nobody listens on, for a daemon
// process's --kosync (the process cannot tell the test which port it took).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// koreaderStatus sends a request to a kosync listener as KOReader does and
// returns the status.
func koreaderStatus(t *testing.T, method, url, user, key, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header["accept"] = []string{"application/vnd.koreader.v1+json"}
	req.Header["content-type"] = []string{"application/json"}
	req.Header["x-auth-user"] = []string{user}
	req.Header["x-auth-key"] = []string{key}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Issue 8: `danyue kosync adduser --password-stdin` creates an account that
// KOReader can log in with (its key is md5 of the password), a second one of
// the same name is refused clearly, and `danyue books` shows what KOReader
// pushed, while `books --json` keeps its shape.
func TestCLIKosync(t *testing.T) {
	addr := freePort(t)
	d := startDaemonProc(t, "nas", "--kosync", addr)
	url := "http://" + addr

	res := runCLIWith(t, nil, "correct horse battery staple\n", "kosync", "adduser", "alice", "--password-stdin", "--data", d.data)
	if res.code != 0 || !strings.Contains(res.stdout, `Created the KOReader account "alice"`) {
		t.Fatalf("adduser: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	// What KOReader sends for that password: md5, lowercase hex.
	const key = "9cc2ae8a1ba7a93da39b46fc1019c481"
	if s := koreaderStatus(t, "GET", url+"/users/auth", "alice", key, ""); s != http.StatusOK {
		t.Fatalf("KOReader login with the password given to adduser: %d", s)
	}
	if s := koreaderStatus(t, "GET", url+"/users/auth", "alice", "88b5e2ade5a87faa8b0ccf4a42433b55" /* md5 with the newline */, ""); s != http.StatusUnauthorized {
		t.Fatalf("the line end became part of the password: %d", s)
	}

	res = runCLIWith(t, nil, "other\n", "kosync", "adduser", "alice", "--password-stdin", "--data", d.data)
	if res.code != 1 || !strings.Contains(res.stderr, `"alice" exists already`) {
		t.Fatalf("adduser of a taken name: exit %d, stderr %q", res.code, res.stderr)
	}
	for _, tt := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{"kosync", "adduser", "bob", "--password-stdin"}, 1, "read the password from stdin"},
		{"   \n", []string{"kosync", "adduser", "bob", "--password-stdin"}, 1, "password is empty"},
		{"pw\n", []string{"kosync", "adduser", "bob"}, 2, "--password-stdin"}, // stdin is not a terminal
		{"pw\n", []string{"kosync", "adduser", "--password-stdin"}, 2, "exactly one account NAME"},
		{"pw\n", []string{"kosync", "rmuser", "bob"}, 2, "unknown kosync subcommand"},
		{"pw\n", []string{"kosync", "deluser", "bob"}, 1, `no KOReader account "bob"`},
		{"pw\n", []string{"kosync", "passwd", "bob", "--password-stdin"}, 1, "danyue kosync adduser bob"},
		{"pw\n", []string{"kosync", "adduser", " bob", "--password-stdin"}, 2, "blanks"},
	} {
		res := runCLIWith(t, nil, tt.stdin, append(tt.args, "--data", d.data)...)
		if res.code != tt.code || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("danyue %s: exit %d, stderr %q; want %d and %q", strings.Join(tt.args, " "), res.code, res.stderr, tt.code, tt.want)
		}
	}
	if res := runCLIWith(t, nil, "pw\n", "kosync", "adduser", "bob", "--password-stdin", "--data", t.TempDir()); res.code != 1 || !strings.Contains(res.stderr, "no daemon is running") {
		t.Errorf("adduser without a daemon: exit %d, stderr %q", res.code, res.stderr)
	}

	// A push as KOReader sends it, then the books command.
	const doc = "0b229176d4e8db7f6d2b5a4952368d7a"
	push := `{"document":"` + doc + `","progress":"/body/DocFragment[20]/body/p[22]/text().17","percentage":0.3242,"device":"Kobo Libra 2","device_id":"8B2F"}`
	if s := koreaderStatus(t, "PUT", url+"/syncs/progress", "alice", key, push); s != http.StatusOK {
		t.Fatalf("push: %d", s)
	}
	res = d.cli(t, "books")
	for _, want := range []string{"The shelf is empty.", "KOReader documents", "USER", "alice", doc, "32.4%", "Kobo Libra 2", "nas"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("books lacks %q:\n%s", want, res.stdout)
		}
	}
	var books []api.Book
	if res := d.cli(t, "books", "--json"); json.Unmarshal([]byte(res.stdout), &books) != nil || len(books) != 0 {
		t.Errorf("books --json is not the array of books it was: %q", res.stdout)
	}
	var docs []api.KosyncProgress
	if res := d.cli(t, "books", "--kosync", "--json"); json.Unmarshal([]byte(res.stdout), &docs) != nil || len(docs) != 1 || docs[0].Document != doc || docs[0].User != "alice" {
		t.Errorf("books --kosync --json = %q", res.stdout)
	}
	if res := d.cli(t, "books", "--kosync"); !strings.Contains(res.stdout, doc) || strings.Contains(res.stdout, "shelf") {
		t.Errorf("books --kosync:\n%s", res.stdout)
	}

	// passwd: the old password stops working, the new one works.
	res = runCLIWith(t, nil, "new password\n", "kosync", "passwd", "alice", "--password-stdin", "--data", d.data)
	if res.code != 0 || !strings.Contains(res.stdout, `Changed the password of "alice"`) {
		t.Fatalf("passwd: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	newKey := koreaderKey("new password")
	if s := koreaderStatus(t, "GET", url+"/users/auth", "alice", key, ""); s != http.StatusUnauthorized {
		t.Errorf("the old password still logs in after passwd: %d", s)
	}
	if s := koreaderStatus(t, "GET", url+"/users/auth", "alice", newKey, ""); s != http.StatusOK {
		t.Errorf("the new password does not log in: %d", s)
	}
	// deluser: nobody logs in; the name can be made again. (Another
	// account: alice has used up her failed sign-ins for the minute.)
	if res := runCLIWith(t, nil, "carol's\n", "kosync", "adduser", "carol", "--password-stdin", "--data", d.data); res.code != 0 {
		t.Fatalf("adduser carol: exit %d, stderr %q", res.code, res.stderr)
	}
	res = runCLIWith(t, nil, "", "kosync", "deluser", "carol", "--data", d.data)
	if res.code != 0 || !strings.Contains(res.stdout, `Removed the KOReader account "carol"`) {
		t.Fatalf("deluser: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if s := koreaderStatus(t, "GET", url+"/users/auth", "carol", koreaderKey("carol's"), ""); s != http.StatusUnauthorized {
		t.Errorf("a removed account still logs in: %d", s)
	}
	if res := runCLIWith(t, nil, "", "kosync", "deluser", "carol", "--data", d.data); res.code != 1 {
		t.Errorf("deluser twice: exit %d, stderr %q", res.code, res.stderr)
	}
	res = runCLIWith(t, nil, "again\n", "kosync", "adduser", "carol", "--password-stdin", "--data", d.data)
	if res.code != 0 {
		t.Fatalf("adduser after deluser: exit %d, stderr %q", res.code, res.stderr)
	}
	if s := koreaderStatus(t, "GET", url+"/users/auth", "carol", koreaderKey("again"), ""); s != http.StatusOK {
		t.Errorf("the account made again does not log in: %d", s)
	}
}
