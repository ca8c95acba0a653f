// Package netnstest runs a test again in a network namespace of its own,
// for the tests that change or hold what a host's network has for all its
// processes: a UDP port held without sharing, an interface added. It is
// imported by tests only.
package netnstest

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"testing"
)

// env marks a test process that Rerun started.
const env = "DANYUE_TEST_OWN_NETNS"

// Inside reports whether this process is a test Rerun started in a
// namespace of its own.
func Inside() bool { return os.Getenv(env) != "" }

// Rerun runs the calling test again in a network namespace of its own
// (loopback up, nothing else), where it can, and reports whether it did:
// the caller then returns, its outcome being the rerun's. It can as root on
// Linux with unshare and ip, which is what CI has; elsewhere, and inside
// the rerun itself, it returns false.
func Rerun(t *testing.T) bool {
	t.Helper()
	if Inside() || runtime.GOOS != "linux" || os.Geteuid() != 0 {
		return false
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return false
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return false
	}
	cmd := exec.CommandContext(t.Context(), unshare, "--net", "--", "sh", "-c", `"$0" link set lo up && exec "$@"`, ip,
		os.Args[0], "-test.run", "^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("in a network namespace of its own: %v\n%s", err, out)
	}
	t.Logf("passed in a network namespace of its own")
	return true
}
