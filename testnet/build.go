package testnet

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// BinaryEnv names an environment variable that, when set, gives the path of
// a danyue binary to use instead of building one.
const BinaryEnv = "DANYUE_TESTNET_BIN"

var built struct {
	once sync.Once
	dir  string // temporary dir holding the binary we built
	path string
	err  error
}

// Binary returns the path of the danyue binary the nodes run: $BinaryEnv if
// set, else ./cmd/danyue of this module, built once per process. Call
// RemoveBinary when the process is done with it.
func Binary() (string, error) {
	built.once.Do(func() {
		if p := os.Getenv(BinaryEnv); p != "" {
			built.path, built.err = filepath.Abs(p)
			return
		}
		built.path, built.err = buildBinary()
	})
	return built.path, built.err
}

func buildBinary() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find the module dir (go list -m): %w", err)
	}
	modDir := strings.TrimSpace(string(out))
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-bin-", prefix, os.Getpid()))
	if err != nil {
		return "", err
	}
	built.dir = dir
	bin := filepath.Join(dir, "danyue")
	if runtime.GOOS == "windows" {
		bin += ".exe" // or Windows will not run it
	}
	args := []string{"build", "-o", bin}
	cgo := "CGO_ENABLED=0" // as the README installs it
	if raceDetector {
		// The race detector needs cgo where it runs.
		args, cgo = append(args, "-race"), "CGO_ENABLED=1"
	}
	cmd := exec.Command("go", append(args, "./cmd/danyue")...)
	cmd.Env = append(os.Environ(), cgo)
	cmd.Dir = modDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/danyue in %s: %w\n%s", modDir, err, stderr.Bytes())
	}
	return bin, nil
}

// RemoveBinary deletes the binary Binary built, if any; TestMain and the
// testnet command call it on their way out.
func RemoveBinary() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}
