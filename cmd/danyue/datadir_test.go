package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestDataDirFor(t *testing.T) {
	noHome := func() (string, error) { return "", errors.New("no home") }
	fallbackHome := func() (string, error) { return "/from/passwd", nil }
	tests := []struct {
		goos string
		env  map[string]string
		home func() (string, error)
		want string
	}{
		// $DANYUE_DATA wins everywhere.
		{"linux", map[string]string{"DANYUE_DATA": "/srv/d", "XDG_DATA_HOME": "/x", "HOME": "/home/a"}, noHome, "/srv/d"},
		{"darwin", map[string]string{"DANYUE_DATA": "/srv/d", "HOME": "/Users/a"}, noHome, "/srv/d"},
		{"windows", map[string]string{"DANYUE_DATA": `D:\danyue`, "LocalAppData": `C:\Users\a\AppData\Local`}, noHome, `D:\danyue`},
		{"android", map[string]string{"DANYUE_DATA": "/sdcard/d", "HOME": "/data/data/com.termux/files/home"}, noHome, "/sdcard/d"},

		// Linux and the other Unixes: XDG.
		{"linux", map[string]string{"XDG_DATA_HOME": "/home/a/data", "HOME": "/home/a"}, noHome, "/home/a/data/danyue"},
		{"linux", map[string]string{"HOME": "/home/a"}, noHome, "/home/a/.local/share/danyue"},
		{"linux", map[string]string{"XDG_DATA_HOME": "rel/data", "HOME": "/home/a"}, noHome, "/home/a/.local/share/danyue"},
		{"linux", map[string]string{}, fallbackHome, "/from/passwd/.local/share/danyue"},
		{"freebsd", map[string]string{"HOME": "/home/a"}, noHome, "/home/a/.local/share/danyue"},
		{"openbsd", map[string]string{"XDG_DATA_HOME": "/d"}, noHome, "/d/danyue"},

		// Termux sets HOME (and PREFIX) for its own user.
		{"android", map[string]string{"HOME": "/data/data/com.termux/files/home", "PREFIX": "/data/data/com.termux/files/usr"}, noHome, "/data/data/com.termux/files/home/.local/share/danyue"},

		// macOS: Application Support, whatever XDG says.
		{"darwin", map[string]string{"HOME": "/Users/a", "XDG_DATA_HOME": "/Users/a/.local/share"}, noHome, "/Users/a/Library/Application Support/danyue"},
		{"darwin", map[string]string{}, fallbackHome, "/from/passwd/Library/Application Support/danyue"},
		{"ios", map[string]string{"HOME": "/var/mobile"}, noHome, "/var/mobile/Library/Application Support/danyue"},

		// Windows: %LocalAppData%, else the profile's AppData\Local.
		{"windows", map[string]string{"LocalAppData": `C:\Users\Zhang San\AppData\Local`, "HOME": "/ignored"}, noHome, `C:\Users\Zhang San\AppData\Local\danyue`},
		{"windows", map[string]string{"LocalAppData": `C:\Users\a\AppData\Local\`}, noHome, `C:\Users\a\AppData\Local\danyue`},
		{"windows", map[string]string{"USERPROFILE": `C:\Users\a`}, noHome, `C:\Users\a\AppData\Local\danyue`},
		{"windows", map[string]string{}, func() (string, error) { return `C:\Users\b`, nil }, `C:\Users\b\AppData\Local\danyue`},

		// No home at all: a relative dir rather than the filesystem root.
		{"linux", map[string]string{}, noHome, ".local/share/danyue"},
		{"windows", map[string]string{}, noHome, `AppData\Local\danyue`},
	}
	for _, tt := range tests {
		got := dataDirFor(tt.goos, func(k string) string { return tt.env[k] }, tt.home)
		if got != tt.want {
			t.Errorf("%s %v: got %q, want %q", tt.goos, tt.env, got, tt.want)
		}
	}
}

// The help of --data says what the dir is for each kind of command and
// shows the default once (the flag package prints it).
func TestDataDirHelp(t *testing.T) {
	for _, tt := range []struct {
		cmd, want string
	}{
		{"daemon", "data DIR of this device"},
		{"status", "data DIR of the daemon to talk to"},
	} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out, getenv: func(k string) string {
			return map[string]string{"DANYUE_DATA": "/tmp/danyue-help"}[k]
		}}
		if code := run(context.Background(), e, []string{"help", tt.cmd}); code != 0 {
			t.Fatalf("danyue help %s: exit %d\n%s", tt.cmd, code, &out)
		}
		_, after, ok := strings.Cut(out.String(), "  -data DIR\n")
		line, _, _ := strings.Cut(after, "\n")
		if !ok || !strings.Contains(line, tt.want) {
			t.Errorf("danyue help %s: --data is not described as %q:\n%s", tt.cmd, tt.want, &out)
		}
		if strings.Count(line, "(default") != 1 || !strings.HasSuffix(line, `(default "/tmp/danyue-help")`) {
			t.Errorf("danyue help %s: want the default printed once, by the flag package: %q", tt.cmd, line)
		}
	}
}
