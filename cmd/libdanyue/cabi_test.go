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
	for _, fn := range []string{"danyue_start", "danyue_start_opts", "danyue_stop", "danyue_api_address", "danyue_api_token", "danyue_last_error", "danyue_free", "danyue_set_memory_limit",
		"danyue_set_log", "danyue_invite", "danyue_pair_open", "danyue_pair_wait", "danyue_pair_cancel", "danyue_join", "danyue_join_cancel", "danyue_last_error_code"} {
		if !strings.Contains(string(h), fn+"(") {
			t.Errorf("libdanyue.h declares no %s", fn)
		}
	}

	checkLines(t, "smoke.py", runSmoke(t, python, lib, dir), smokeWant)
	checkLines(t, "pair.c", runPair(t, lib, dir), pairWant)
}

// smokeWant are the lines smoke.py prints, as regular expressions.
var smokeWant = []string{
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

// runSmoke runs smoke.py on the library and returns what it printed.
func runSmoke(t *testing.T, python, lib, dir string) string {
	t.Helper()
	cmd := exec.Command(python, "testdata/smoke.py", lib, filepath.Join(dir, "data"))
	var logs strings.Builder
	cmd.Stderr = &logs // the node's logs
	out, err := cmd.Output()
	t.Logf("smoke.py:\n%s\nits stderr:\n%s", out, logs.String())
	if err != nil {
		t.Fatalf("smoke.py: %v", err)
	}
	return string(out)
}

// pairWant are the lines pair.c prints, as regular expressions.
var pairWant = []string{
	`^bad level: -1 danyue_set_log: LogLevel must be .*"loud"$`,
	`^set log: 0$`,
	`^opened: open$`,
	`^inviter: paired phone joined$`,
	`^joiner: joined$`,
	`^spent code: (no_inviter|code_spent)$`,
	`^cancel: 0$`,
	`^cancelled: cancelled$`,
	`^long code: danyue1- joined$`,
	`^unknown handle: NULL no node 99$`,
	`^null id: -1 danyue_pair_cancel: id is NULL$`,
	`^bad code: bad_invite$`,
	`^stop: 0 0 0$`,
	`^logged: yes$`,
}

// runPair compiles pair.c, the README's pairing flow in C, against the
// library and runs it.
func runPair(t *testing.T, lib, dir string) string {
	t.Helper()
	cc := strings.TrimSpace(string(must(exec.Command("go", "env", "CC").Output())(t)))
	bin := filepath.Join(dir, "pair")
	build := exec.Command(cc, "-Wall", "-Wextra", "-Werror", "-I", dir, "-o", bin, "testdata/pair.c", lib, "-Wl,-rpath,"+dir, "-lpthread")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s pair.c: %v\n%s", cc, err, out)
	}
	cmd := exec.Command(bin, filepath.Join(dir, "laptop"), filepath.Join(dir, "phone"), filepath.Join(dir, "tablet"))
	var logs strings.Builder
	cmd.Stderr = &logs // the warnings pair.c's log sink passes on
	out, err := cmd.Output()
	t.Logf("pair.c:\n%s\nits stderr:\n%s", out, logs.String())
	if err != nil {
		t.Fatalf("pair.c: %v", err)
	}
	return string(out)
}

// checkLines checks that out has one line per pattern of want, each
// matching.
func checkLines(t *testing.T, what, out string, want []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%s printed %d lines, want %d", what, len(lines), len(want))
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("%s line %d = %q, want %s", what, i+1, lines[i], re)
		}
	}
}

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
