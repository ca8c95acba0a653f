package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
)

// The Termux:Boot script takes the wake lock, makes the data dir 0700 and
// starts the daemon in the background with its log in the data dir. Run with
// /bin/sh and stand-ins for termux-wake-lock and danyue.
func TestTermuxBootScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	script, err := filepath.Abs("termux/boot-danyue")
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(body), "#!/data/data/com.termux/files/usr/bin/sh\n") {
		t.Errorf("the script does not start with Termux's sh")
	}
	if st, err := os.Stat(script); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("the script is not executable: %v", err)
	}
	home, bin := t.TempDir(), t.TempDir()
	calls := filepath.Join(bin, "calls")
	for _, name := range []string{"termux-wake-lock", "danyue"} {
		stub := "#!/bin/sh\necho \"" + name + " $*\" >>" + calls + "\necho logged-by-" + name + "\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(sh, script)
	cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("boot-danyue: %v\n%s", err, out)
	}
	data := filepath.Join(home, ".local", "share", "danyue")
	want := "termux-wake-lock \ndanyue daemon --data " + data + " --log-format json\n"
	// The daemon's stand-in runs in the background: the script returns
	// before it has written.
	poll.Until(t, "the calls:\n"+want, time.Minute, func() bool {
		got, _ := os.ReadFile(calls)
		return string(got) == want
	})
	if st, err := os.Stat(data); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("data dir: %v %v, want mode 0700", st.Mode(), err)
	}
	poll.Until(t, "the daemon's output in DATA/danyue.log", time.Minute, func() bool {
		log, _ := os.ReadFile(filepath.Join(data, "danyue.log"))
		return strings.Contains(string(log), "logged-by-danyue")
	})
}
