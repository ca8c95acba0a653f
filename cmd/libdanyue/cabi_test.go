package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCABI builds the library with -buildmode=c-shared and drives it from
// Python's ctypes, as a Flutter, .NET or Electron app drives it through its
// FFI: start with an HTTP API, status and a position over HTTP with the
// token, the error paths, stop.
func TestCABI(t *testing.T) {
	if testing.Short() {
		t.Skip("building the shared library takes a minute; skipped with -short")
	}
	// The package's C half needs cgo; without it only this file builds.
	if out, err := exec.Command("go", "env", "CGO_ENABLED", "CC").Output(); err != nil || !strings.HasPrefix(string(out), "1\n") {
		t.Skipf("cgo is not enabled (go env CGO_ENABLED: %q); the C library needs it and a C compiler", strings.TrimSpace(string(out)))
	} else if _, err := exec.LookPath(strings.Fields(strings.TrimPrefix(string(out), "1\n"))[0]); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found; it drives the library")
	}
	dir, err := os.MkdirTemp("", "dyc") // short: the API socket's path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	lib := filepath.Join(dir, "libdanyue.so")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", lib, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-shared: %v\n%s", err, out)
	}
	header := filepath.Join(dir, "libdanyue.h")
	h, err := os.ReadFile(header)
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"danyue_start", "danyue_start_opts", "danyue_stop", "danyue_api_address", "danyue_api_token", "danyue_last_error", "danyue_free", "danyue_set_memory_limit"} {
		if !strings.Contains(string(h), fn+"(") {
			t.Errorf("libdanyue.h declares no %s", fn)
		}
	}

	cmd := exec.Command(python, "testdata/smoke.py", lib, filepath.Join(dir, "data"))
	var logs strings.Builder
	cmd.Stderr = &logs // the node's logs
	out, err := cmd.Output()
	t.Logf("smoke.py:\n%s\nits stderr:\n%s", out, logs.String())
	if err != nil {
		t.Fatalf("smoke.py: %v", err)
	}
	want := []string{
		`^bad start: -1 danyue_start: data_dir is NULL$`,
		`^bad listen: -1 True$`,
		`^unknown handle: None no node 99$`,
		`^memory limit: 67108864 67108864$`,
		`^handle: [1-9][0-9]*$`,
		`^address: 127\.0\.0\.1:[1-9][0-9]*$`,
		`^token length: 64$`,
		`^status: 200 device name: smoke books: 0$`,
		`^without token: 401$`,
		`^position: 200 md5:900150983cd24fb0d6963f7d28e17f72 1234 Smoke$`,
		`^bad key: 400 bad_key$`,
		`^books after: 1$`,
		`^stop: 0$`,
		`^stop again: -1 danyue_stop: no node [0-9]+$`,
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("smoke.py printed %d lines, want %d", len(lines), len(want))
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d = %q, want %s", i+1, lines[i], re)
		}
	}
}
