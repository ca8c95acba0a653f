package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/internal/startproc"
)

// daemonProc is a `danyue daemon` process started by a test.
type daemonProc struct {
	data string
	cmd  *exec.Cmd
	done chan error
}

// startDaemonProc runs the built binary as a daemon on a fresh data dir
// (loopback only, no mDNS) and waits until its API answers.
func startDaemonProc(t *testing.T, name string, extra ...string) *daemonProc {
	t.Helper()
	dir, err := os.MkdirTemp("", "dycli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return startDaemonProcAt(t, filepath.Join(dir, "data"), name, extra...)
}

// startDaemonProcAt runs a daemon on the data dir data, new or not.
func startDaemonProcAt(t *testing.T, data, name string, extra ...string) *daemonProc {
	t.Helper()
	args := append([]string{"daemon", "--data", data, "--name", name, "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0"}, extra...)
	cmd, err := startproc.Start(func() *exec.Cmd {
		cmd := exec.Command(danyueBin, args...)
		cmd.Stderr = testWriter{t, name}
		interruptible(cmd)
		return cmd
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &daemonProc{data: data, cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	c := client.New(daemon.DefaultSocket(data))
	defer c.Close()
	poll.Until(t, "daemon "+name+" to answer", time.Minute, func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("daemon %s exited before answering: %v", name, err)
		default:
		}
		// Each try is bounded, so that one connection that stalls (a
		// pipe instance nobody serves, under wine: daemon/listen_windows.go)
		// cannot outlast the poll's deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.Status(ctx)
		return err == nil
	})
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *daemonProc) stop(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	if err := terminate(p.cmd); err != nil {
		// Under wine the test has no console, so there is no Ctrl-Break
		// to send (noConsole); the daemon is killed instead.
		if !noConsole(err) {
			t.Errorf("stop the daemon: %v", err)
		}
		_ = p.cmd.Process.Kill()
		<-p.done
		return
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("daemon exited with %v after SIGTERM, want a clean exit", err)
		}
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("daemon did not stop within 15s of SIGTERM")
	}
}

func (p *daemonProc) cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLI(t, nil, append(args, "--data", p.data)...)
}

type testWriter struct {
	t    *testing.T
	name string
}

func (w testWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.t.Logf("%s: %s", w.name, line)
	}
	return len(b), nil
}

func TestCLIWithoutDaemonSaysWhatToDo(t *testing.T) {
	data := filepath.Join(t.TempDir(), "nothing")
	for _, cmd := range []string{"status", "peers", "books", "invite"} {
		res := runCLI(t, nil, cmd, "--data", data)
		if res.code != 1 || !strings.Contains(res.stderr, "no daemon is running for "+data) || !strings.Contains(res.stderr, "danyue daemon") {
			t.Errorf("danyue %s without a daemon: exit %d, stderr %q", cmd, res.code, res.stderr)
		}
	}
}

func TestCLIHelpHasExample(t *testing.T) {
	for _, c := range commands() {
		res := runInProcess(t, c.name, "--help")
		if res.code != 0 || !strings.Contains(res.stdout, "Usage: danyue "+c.name) || !strings.Contains(res.stdout, "Example:") {
			t.Errorf("danyue %s --help: exit %d, stdout %q", c.name, res.code, res.stdout)
		}
	}
	if res := runCLI(t, nil, "help"); res.code != 0 || !strings.Contains(res.stdout, "daemon") || !strings.Contains(res.stdout, "join") {
		t.Errorf("danyue help: exit %d, stdout %q", res.code, res.stdout)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"status", "extra"}, "status takes no arguments"},
		{[]string{"join"}, "join takes exactly one invite code"},
		{[]string{"books", "--frobnicate"}, "flag provided but not defined"},
		{[]string{"daemon", "--log-format", "xml"}, "--log-format"},
		{[]string{"daemon", "--keep-deleted", "-1h"}, "--keep-deleted -1h0m0s must not be negative"},
		{[]string{"restore"}, "restore takes one KEY"},
	}
	for _, tt := range tests {
		res := runInProcess(t, tt.args...)
		if res.code != 2 || !strings.Contains(res.stderr, tt.want) || !strings.Contains(res.stderr, "Try: ") {
			t.Errorf("danyue %s: exit %d, stderr %q; want 2 with %q and a hint", strings.Join(tt.args, " "), res.code, res.stderr, tt.want)
		}
	}
}

func TestCLIBadClockOffset(t *testing.T) {
	res := runCLI(t, []string{"DANYUE_CLOCK_OFFSET=soon"}, "daemon", "--data", t.TempDir())
	if res.code != 2 || !strings.Contains(res.stderr, "DANYUE_CLOCK_OFFSET") {
		t.Fatalf("daemon with DANYUE_CLOCK_OFFSET=soon: exit %d, stderr %q", res.code, res.stderr)
	}
}

// TestCLITwoDevices drives two daemon processes with the CLI only: invite,
// join, status, peers and books, human and JSON.
func TestCLITwoDevices(t *testing.T) {
	a := startDaemonProc(t, "desk")
	b := startDaemonProc(t, "pocket")

	res := a.cli(t, "invite")
	code := strings.TrimSpace(res.stdout)
	if res.code != 0 || strings.Contains(code, "\n") || code == "" {
		t.Fatalf("invite: exit %d, stdout %q, stderr %q; want one line", res.code, res.stdout, res.stderr)
	}
	if res := b.cli(t, "join", code[:len(code)-2]+"zz"); res.code == 0 || !strings.Contains(res.stderr, "invite") {
		t.Fatalf("join with a typo: exit %d, stderr %q; want an error about the invite", res.code, res.stderr)
	}
	if res := b.cli(t, "join", code); res.code != 0 || !strings.Contains(res.stdout, "Joined library") {
		t.Fatalf("join: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}

	// A book written on A through the API shows on B through the CLI.
	ca := client.New(daemon.DefaultSocket(a.data))
	defer ca.Close()
	const key = "md5:900150983cd24fb0d6963f7d28e17f72"
	if _, err := ca.SetPosition(context.Background(), key, 500, 0.25, "The Story of the Stone"); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.AddReadTime(context.Background(), key, 90*60*1000, ""); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to show A's book", time.Minute, func() bool {
		res := b.cli(t, "books", "--json")
		if res.code != 0 {
			t.Fatalf("books --json: exit %d, stderr %q", res.code, res.stderr)
		}
		var books []api.Book
		if err := json.Unmarshal([]byte(res.stdout), &books); err != nil {
			t.Fatalf("books --json is not JSON: %v\n%s", err, res.stdout)
		}
		return len(books) == 1 && books[0].ReadTime.TotalMs == 90*60*1000
	})
	res = b.cli(t, "books")
	for _, want := range []string{"TITLE", "The Story of the Stone", "25.0%", "1h30m", "desk", key} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("books table lacks %q:\n%s", want, res.stdout)
		}
	}
	res = b.cli(t, "status")
	for _, want := range []string{"pocket", "1 on the shelf", "1 connected of 1 known", "desk", "connected"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, res.stdout)
		}
	}
	var st api.Status
	if res := b.cli(t, "status", "--json"); json.Unmarshal([]byte(res.stdout), &st) != nil || st.Device.Name != "pocket" || len(st.Peers) != 1 {
		t.Errorf("status --json = %q", res.stdout)
	}
	res = a.cli(t, "peers")
	if !strings.Contains(res.stdout, "pocket") || !strings.Contains(res.stdout, "connected") {
		t.Errorf("peers on A:\n%s", res.stdout)
	}
}

func TestCLISecondDaemonRefused(t *testing.T) {
	a := startDaemonProc(t, "only")
	res := runCLI(t, nil, "daemon", "--data", a.data, "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0")
	if res.code != 1 || !strings.Contains(res.stderr, a.data) || !strings.Contains(res.stderr, "another danyue daemon") {
		t.Fatalf("second daemon: exit %d, stderr %q", res.code, res.stderr)
	}
}
