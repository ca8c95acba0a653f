//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
)

// runKeyBounded runs `danyue key` and fails the test instead of hanging it
// if the command blocks (the bound is generous; nothing is timed).
func runKeyBounded(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, danyueBin, append([]string{"key"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("danyue key %s blocked", strings.Join(args, " "))
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// A named pipe, in a directory or named on the command line, is skipped
// with a message instead of blocking the command for ever.
func TestKeySkipsNonRegularFiles(t *testing.T) {
	dir := writeBooks(t, map[string]string{"a.txt": "abc"})
	fifo := filepath.Join(dir, "pipe.txt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	stdout, stderr, code := runKeyBounded(t, dir)
	if code != 0 || !strings.HasPrefix(stdout, keyABC) || !strings.Contains(stderr, fifo+": skipped: a named pipe (FIFO)") {
		t.Fatalf("key DIR: exit %d, stdout %q, stderr %q; want a.txt keyed and the pipe skipped with a message", code, stdout, stderr)
	}
	stdout, stderr, code = runKeyBounded(t, fifo, filepath.Join(dir, "a.txt"))
	if code != 1 || !strings.HasPrefix(stdout, keyABC) || !strings.Contains(stderr, "skipped: a named pipe") {
		t.Fatalf("key FIFO FILE: exit %d, stdout %q, stderr %q; want the file keyed, the pipe reported, exit 1", code, stdout, stderr)
	}
	if _, err := os.Stat("/dev/null"); err == nil {
		if _, stderr, code = runKeyBounded(t, "/dev/null"); code != 1 || !strings.Contains(stderr, "skipped: a device") {
			t.Fatalf("key /dev/null: exit %d, stderr %q", code, stderr)
		}
	}
}

// SIGTERM in the middle of keying a large file stops the command: the
// context reaches the hashing loop.
func TestKeyStopsOnSIGTERM(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("needs /proc/PID/io to see the command reading")
	}
	big := filepath.Join(t.TempDir(), "big.txt")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: 64 GiB of NUL bytes that take no disk and minutes to read.
	if err := f.Truncate(64 << 30); err != nil {
		t.Skipf("sparse file: %v", err)
	}
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, danyueBin, "key", big)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Reading has begun once the process has read well past its binary.
	// (On a timeout, the context's end kills the command.)
	poll.Until(t, "the command to start reading", time.Minute, func() bool {
		return readBytes(cmd.Process.Pid) >= 64<<20
	})
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatal("danyue key kept reading after SIGTERM")
	}
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "context canceled") {
		t.Fatalf("after SIGTERM: %v, stderr %q; want exit 1 saying it was cancelled", err, stderr.String())
	}
}

// readBytes is how much the process pid has read (rchar in /proc/PID/io).
func readBytes(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
