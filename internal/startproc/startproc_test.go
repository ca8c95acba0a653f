package startproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestStartRetriesOnlyUnderWine(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-program")
	tests := []struct {
		name      string
		wine      string
		failFirst int // how many starts fail before one succeeds
		wantCalls int
		wantErr   bool
	}{
		{"native, a failed start is final", "", 1, 1, true},
		{"native, a good start", "", 0, 1, false},
		{"wine, a failed start is tried again", "1", 2, 3, false},
		{"wine, gives up after its tries", "1", wineTries, wineTries, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DANYUE_WINE", tc.wine)
			calls := 0
			err := Run(func() *exec.Cmd {
				calls++
				if calls <= tc.failFirst {
					return exec.Command(missing)
				}
				// The test binary itself, running no test.
				return exec.Command(self, "-test.run=^$")
			})
			if calls != tc.wantCalls {
				t.Errorf("newCmd called %d times, want %d", calls, tc.wantCalls)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("Run: %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}
