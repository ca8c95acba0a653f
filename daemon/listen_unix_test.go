//go:build unix

package daemon

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// errAddrInUse is how the OS says that an address is taken.
var errAddrInUse error = syscall.EADDRINUSE

// dialLocal opens a raw connection to the daemon's local endpoint.
func dialLocal(path string) (net.Conn, error) { return net.Dial("unix", path) }

func TestSocketAndSecretsArePrivate(t *testing.T) {
	d := startDaemon(t, nil)
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{
		{d.dir, 0o700},
		{d.Socket(), 0o600},
		{filepath.Join(d.dir, "api-token"), 0o600},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.mode {
			t.Errorf("%s has mode %o, want %o", c.path, got, c.mode)
		}
	}
}

func TestDefaultSocketIsInTheDataDir(t *testing.T) {
	if got, want := DefaultSocket("/data/danyue"), "/data/danyue/api.sock"; got != want {
		t.Errorf("DefaultSocket = %q, want %q", got, want)
	}
}

// localCaller reads the peer credentials of a real connection: this
// process's uid, vouched for by the OS.
func TestLocalCallerReadsPeerCredentials(t *testing.T) {
	path := filepath.Join(tempDir(t), "s.sock")
	ln, err := listenLocal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer server.Close()
	got := localCaller(server)
	if want := (connInfo{kind: connUnix, uid: os.Getuid(), vouched: true}); got != want {
		t.Fatalf("localCaller = %+v, want %+v", got, want)
	}
	if got := localCaller(&net.TCPConn{}); got.vouched {
		t.Fatalf("localCaller of a TCP connection = %+v, want not vouched", got)
	}
}

// TestOtherUserCannotConnect runs curl as another user against the socket:
// the 0700 data dir and 0600 socket must stop it before any request.
func TestOtherUserCannotConnect(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("needs curl")
	}
	d := startDaemon(t, nil)
	cmd := exec.Command(curl, "-s", "--max-time", "5", "--unix-socket", d.Socket(), "http://danyue/v1/status")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 { // 7: could not connect
		t.Fatalf("curl as uid 65534: %v, output %q; want refused at connect (exit 7)", err, out)
	}
}

// The daemon runs with its soft open files limit raised to the hard one
// (where the system allows: macOS caps it), and the budget sees it.
func TestFileLimitIsRaised(t *testing.T) {
	var before syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	// Lower it, as a service manager might, and let the daemon raise it.
	lowered := before
	lowered.Cur = min(before.Cur, 256)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Skipf("cannot lower the limit here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &before) })
	got := fileLimit()
	var after syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &after); err != nil {
		t.Fatal(err)
	}
	if got != uint64(after.Cur) || got < uint64(lowered.Cur) {
		t.Fatalf("fileLimit() = %d, soft limit now %d (was lowered to %d)", got, after.Cur, lowered.Cur)
	}
	if runtime.GOOS == "linux" && uint64(after.Cur) != uint64(before.Max) {
		t.Fatalf("soft limit %d, want the hard limit %d", after.Cur, before.Max)
	}
}
