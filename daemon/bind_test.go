package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/danyue/danyue/internal/testport"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A flag mistake is refused before the daemon creates anything: the data
// dir stays as it was (here: absent).
func TestFlagMistakesChangeNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		want string
	}{
		{"http not loopback", func(c *Config) { c.HTTP = "0.0.0.0:0" }, "not a loopback address"},
		{"http port in use", func(c *Config) { c.HTTP = busy.Addr().String() }, busy.Addr().String()},
		{"http no port", func(c *Config) { c.HTTP = "127.0.0.1" }, "--http"},
		{"kosync port in use", func(c *Config) { c.Kosync = busy.Addr().String() }, "--kosync"},
		{"kosync prefix", func(c *Config) { c.Kosync, c.KosyncPrefix = "127.0.0.1:0", "no-slash" }, "--kosync-prefix"},
		{"listen", func(c *Config) { c.Listen = []string{"tcp/0"} }, "--listen"},
		{"peer", func(c *Config) { c.Peers = []string{"1.2.3.4:5"} }, "--peer"},
		// The second listener fails after the first was bound: the
		// first must be released too.
		{"both, second fails", func(c *Config) { c.HTTP, c.Kosync = "127.0.0.1:0", busy.Addr().String() }, "--kosync"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cfg := Config{DataDir: dir, Logger: discardLogger(), NoMDNS: true}
			tc.cfg(&cfg)
			d, err := Start(context.Background(), cfg)
			if err == nil {
				d.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			// The OS says why in its own words (and language): the
			// cause must come through, not a text.
			if strings.HasSuffix(tc.name, "port in use") && !errors.Is(err, errAddrInUse) {
				t.Errorf("error %q does not wrap %v", err, errAddrInUse)
			}
			if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("the data dir was created (%v) although the flags were refused", serr)
			}
		})
	}
}

// The first listener is released when the second cannot be bound, so a
// corrected second attempt can bind the same address.
func TestEarlyListenersReleased(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", testport.Loopback(t))
	if _, err := bindEarly(Config{HTTP: addr, Kosync: busy.Addr().String()}); err == nil {
		t.Fatal("bound a busy address")
	}
	e, err := bindEarly(Config{HTTP: addr})
	if err != nil {
		t.Fatalf("the first attempt kept %s: %v", addr, err)
	}
	e.close()
}

func TestReachableURLs(t *testing.T) {
	if got := reachableURLs("127.0.0.1:7100", ""); len(got) != 1 || got[0] != "http://127.0.0.1:7100" {
		t.Errorf("loopback: %q", got)
	}
	for _, addr := range []string{"[::]:7200", "0.0.0.0:7200"} {
		got := reachableURLs(addr, "/kosync")
		if len(got) == 0 {
			t.Errorf("%s: no URL (this machine has at least a loopback address)", addr)
		}
		for _, u := range got {
			if strings.Contains(u, "[::]") || strings.Contains(u, "0.0.0.0") || !strings.HasSuffix(u, ":7200/kosync") {
				t.Errorf("%s: URL %q is not one to give another device", addr, u)
			}
			if addr == "0.0.0.0:7200" && strings.Contains(u, "[") {
				t.Errorf("%s: IPv6 URL %q for an IPv4 listener", addr, u)
			}
		}
	}
}
