package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// TestBookJSONIsPrintJSON: `books --json`, written a book at a time, is what
// printJSON writes for the whole slice.
func TestBookJSONIsPrintJSON(t *testing.T) {
	at := "2025-01-01T00:00:00Z"
	all := []api.Book{
		{Key: "md5:1", Title: "A & <B>", Position: &api.Position{Char: 3, At: at}, ReadTime: api.ReadTime{ByDevice: map[string]uint64{"d": 1}}},
		{Key: "md5:2", Deleted: true, DeletedAt: &at, ReadTime: api.ReadTime{ByDevice: map[string]uint64{}}},
		{Key: "md5:3", Title: "三体", ReadTime: api.ReadTime{ByDevice: map[string]uint64{}}},
	}
	for n := range len(all) + 1 {
		var want, got bytes.Buffer
		if err := printJSON(&want, append([]api.Book{}, all[:n]...)); err != nil {
			t.Fatal(err)
		}
		j := &bookJSON{w: &got}
		for _, b := range all[:n] {
			if err := j.book(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.end(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d books: streamed\n%s\nwant\n%s", n, got.String(), want.String())
		}
	}
}

// TestBooksSortAndLimit: `books` pages through the shelf in the order asked
// and stops at --limit.
func TestBooksSortAndLimit(t *testing.T) {
	p := startDaemonProc(t, "shelf")
	c := client.New(daemon.DefaultSocket(p.data))
	defer c.Close()
	keys := []string{"md5:00000000000000000000000000000001", "md5:00000000000000000000000000000002", "md5:00000000000000000000000000000003"}
	for i, title := range []string{"Cc", "aa", "Bb"} {
		if _, err := c.SetPosition(context.Background(), keys[i], 1, 0.1, title); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"books", "--json"}, []string{keys[2], keys[1], keys[0]}},
		{[]string{"books", "--json", "--sort", "title"}, []string{keys[1], keys[2], keys[0]}},
		{[]string{"books", "--json", "--sort", "key", "--limit", "2"}, []string{keys[0], keys[1]}},
	} {
		res := p.cli(t, tc.args...)
		var books []api.Book
		if err := json.Unmarshal([]byte(res.stdout), &books); err != nil || res.code != 0 {
			t.Fatalf("%v: exit %d, %v\n%s%s", tc.args, res.code, err, res.stdout, res.stderr)
		}
		var got []string
		for _, b := range books {
			got = append(got, b.Key)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.args, got, tc.want)
		}
	}
	if res := p.cli(t, "books", "--sort", "size"); res.code != 2 || !strings.Contains(res.stderr, "--sort must be") {
		t.Errorf("books --sort size: exit %d, stderr %q; want a usage error", res.code, res.stderr)
	}
}
