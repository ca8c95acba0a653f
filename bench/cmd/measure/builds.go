//go:build linux

package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// build is one build of danyue under measurement.
type build struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	GoVersion string `json:"goVersion,omitempty"`
	Revision  string `json:"revision,omitempty"` // the VCS revision the build says it was made from
}

// resolveBuilds turns the -bin values into builds; with none, it builds
// ./cmd/danyue of the checkout in the working directory into work.
func resolveBuilds(ctx context.Context, bins []string, work string, log io.Writer) ([]build, error) {
	if len(bins) == 0 {
		b, err := buildCheckout(ctx, work, log)
		if err != nil {
			return nil, err
		}
		return []build{b}, nil
	}
	var builds []build
	seen := map[string]bool{}
	for _, v := range bins {
		name, path, ok := strings.Cut(v, "=")
		if !ok {
			path = v
			name = strings.TrimPrefix(filepath.Base(v), "danyue-")
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		if st, err := os.Stat(abs); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, usageError("-bin %q is not an executable file", v)
		}
		if seen[name] {
			return nil, usageError("two builds are named %q: name them, -bin NAME=PATH", name)
		}
		seen[name] = true
		builds = append(builds, describe(build{Name: name, Path: abs}))
	}
	return builds, nil
}

// buildCheckout builds ./cmd/danyue as it is released: without cgo, so
// static, mapping no C library.
func buildCheckout(ctx context.Context, work string, log io.Writer) (build, error) {
	out := filepath.Join(work, "danyue")
	fmt.Fprintln(log, "measure: building ./cmd/danyue")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/danyue")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return build{}, fmt.Errorf("build ./cmd/danyue (run measure from the module's root, or give -bin): %w", err)
	}
	name := "checkout"
	if rev, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty").Output(); err == nil {
		name = strings.TrimSpace(string(rev))
	}
	return describe(build{Name: name, Path: out}), nil
}

// describe adds what the binary says of itself.
func describe(b build) build {
	info, err := buildinfo.ReadFile(b.Path)
	if err != nil {
		return b
	}
	b.GoVersion = info.GoVersion
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			b.Revision = s.Value
		}
	}
	return b
}
