package daemon

import (
	"context"
	"os"
	"testing"
)

// Issue 15: a device keeps its name across restarts without --name (as a
// service manager restarts it); only --name changes it, and a new device
// takes the hostname.
func TestNameSticks(t *testing.T) {
	dir := t.TempDir()
	start := func(name string) string {
		t.Helper()
		d, err := Start(context.Background(), Config{DataDir: dir, Name: name, NoMDNS: true, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		return d.status().Device.Name
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "danyue"
	}
	for _, step := range []struct{ flag, want string }{
		{"", host},           // a new device: the hostname
		{"laptop", "laptop"}, // --name renames
		{"", "laptop"},       // a restart without --name keeps it
		{"", "laptop"},
		{"书房", "书房"},
	} {
		if got := start(step.flag); got != step.want {
			t.Fatalf("started with --name %q: named %q, want %q", step.flag, got, step.want)
		}
	}
}
