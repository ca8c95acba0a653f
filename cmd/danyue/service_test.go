package main

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

// splitWindowsCommandLine splits a command line as CommandLineToArgvW does
// for arguments (Go's runtime on Windows follows it): the oracle for
// windowsCommandLine.
func splitWindowsCommandLine(s string) []string {
	var args []string
	var cur strings.Builder
	inArg, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			n := 0
			for i < len(s) && s[i] == '\\' {
				n++
				i++
			}
			if i < len(s) && s[i] == '"' {
				cur.WriteString(strings.Repeat(`\`, n/2))
				if n%2 == 1 {
					cur.WriteByte('"')
				} else {
					quoted = !quoted
				}
			} else {
				cur.WriteString(strings.Repeat(`\`, n))
				i--
			}
			inArg = true
		case c == '"':
			quoted = !quoted
			inArg = true
		case (c == ' ' || c == '\t') && !quoted:
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteByte(c)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args
}

func TestWindowsCommandLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"service", "run"}, `service run`},
		{[]string{"--data", `C:\Users\Zhang San\AppData\Local\danyue`}, `--data "C:\Users\Zhang San\AppData\Local\danyue"`},
		{[]string{"--data", `D:\books dir\`}, `--data "D:\books dir\\"`},
		{[]string{"--name", `my "laptop"`}, `--name "my \"laptop\""`},
		{[]string{"--name", `a\"b`}, `--name "a\\\"b"`},
		{[]string{"--name", ""}, `--name ""`},
		{[]string{`C:\plain\path`}, `C:\plain\path`},
		{[]string{"tab\there"}, "\"tab\there\""},
	}
	for _, tt := range tests {
		got := windowsCommandLine(tt.args)
		if got != tt.want {
			t.Errorf("windowsCommandLine(%q) = %s, want %s", tt.args, got, tt.want)
		}
		if back := splitWindowsCommandLine(got); !slices.Equal(back, tt.args) {
			t.Errorf("%s splits back into %q, want %q", got, back, tt.args)
		}
	}
}

func TestTaskArgs(t *testing.T) {
	tests := []struct {
		data    string
		dataSet bool
		flags   []string
		want    []string
	}{
		{`C:\Users\a\AppData\Local\danyue`, false, nil, []string{"service", "run"}},
		{`D:\my books`, true, nil, []string{"service", "run", "--data", `D:\my books`}},
		{`D:\d`, true, []string{"--kosync", "0.0.0.0:7200"}, []string{"service", "run", "--data", `D:\d`, "--", "--kosync", "0.0.0.0:7200"}},
	}
	for _, tt := range tests {
		if got := taskArgs(tt.data, tt.dataSet, tt.flags); !slices.Equal(got, tt.want) {
			t.Errorf("taskArgs(%q, %v, %q) = %q, want %q", tt.data, tt.dataSet, tt.flags, got, tt.want)
		}
	}
	if got, want := daemonArgs(`D:\d`, []string{"--name", "pc"}), []string{"--data", `D:\d`, "--log-format", "json", "--name", "pc"}; !slices.Equal(got, want) {
		t.Errorf("daemonArgs = %q, want %q", got, want)
	}
}

func TestCheckInstallable(t *testing.T) {
	const tmp = `C:\Users\a\AppData\Local\Temp`
	tests := []struct {
		exe string
		ok  bool
	}{
		{`C:\Users\a\go\bin\danyue.exe`, true},
		{`C:\Program Files\danyue\danyue.exe`, true},
		{`C:\Users\a\AppData\Local\Temp\go-build123\b001\exe\danyue.exe`, false},
		{`c:\users\A\appdata\local\temp\go-build1\danyue.exe`, false},
		{`C:\Users\a\AppData\Local\Temporary\danyue.exe`, true},
	}
	for _, tt := range tests {
		err := checkInstallable(tt.exe, tmp)
		if (err == nil) != tt.ok {
			t.Errorf("checkInstallable(%s) = %v, want ok=%v", tt.exe, err, tt.ok)
		}
	}
}

func TestSchtasksArgs(t *testing.T) {
	tests := []struct {
		action string
		want   [][]string
	}{
		{"install", [][]string{
			{"/Create", "/TN", "danyue", "/XML", `C:\Temp\danyue task.xml`, "/F"},
			{"/Run", "/TN", "danyue"},
		}},
		{"uninstall", [][]string{{"/End", "/TN", "danyue"}, {"/Delete", "/TN", "danyue", "/F"}}},
		{"status", [][]string{{"/Query", "/TN", "danyue", "/V", "/FO", "LIST"}}},
		{"frobnicate", nil},
	}
	for _, tt := range tests {
		got := schtasksArgs(tt.action, `C:\Temp\danyue task.xml`)
		if !slices.EqualFunc(got, tt.want, slices.Equal) {
			t.Errorf("schtasksArgs(%s) = %q, want %q", tt.action, got, tt.want)
		}
	}
}

// The task definition is UTF-16 XML that Task Scheduler accepts from a
// standard user: the logon trigger and the principal name the user, the
// token is limited, the daemon is never stopped for running long or on
// battery, and the program path with spaces is one element, not quoted.
func TestTaskXML(t *testing.T) {
	exe := `C:\Program Files\danyue\danyue.exe`
	user := `DESKTOP-1\Zhang San`
	def, err := taskXML(exe, user, []string{"service", "run", "--data", `D:\my books & notes`})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(def, []byte{0xff, 0xfe}) || len(def)%2 != 0 {
		t.Fatalf("not UTF-16LE with a byte-order mark: % x", def[:min(len(def), 8)])
	}
	units := make([]uint16, 0, len(def)/2-1)
	for i := 2; i < len(def); i += 2 {
		units = append(units, uint16(def[i])|uint16(def[i+1])<<8)
	}
	text := string(utf16.Decode(units))
	if !strings.HasPrefix(text, `<?xml version="1.0" encoding="UTF-16"?>`) {
		t.Errorf("declaration: %.60s", text)
	}
	var task struct {
		XMLName  xml.Name
		Triggers []string `xml:"Triggers>LogonTrigger>UserId"`
		User     string   `xml:"Principals>Principal>UserId"`
		Logon    string   `xml:"Principals>Principal>LogonType"`
		RunLevel string   `xml:"Principals>Principal>RunLevel"`
		Settings struct {
			DisallowStartIfOnBatteries string
			StopIfGoingOnBatteries     string
			ExecutionTimeLimit         string
			MultipleInstancesPolicy    string
			Restart                    string `xml:"RestartOnFailure>Interval"`
		}
		Command   string `xml:"Actions>Exec>Command"`
		Arguments string `xml:"Actions>Exec>Arguments"`
	}
	// encoding/xml reads only UTF-8: hand it the decoded text without the
	// declaration.
	_, body, _ := strings.Cut(text, "?>")
	if err := xml.Unmarshal([]byte(body), &task); err != nil {
		t.Fatalf("the definition does not parse: %v\n%s", err, text)
	}
	checks := []struct{ what, got, want string }{
		{"namespace", task.XMLName.Space, "http://schemas.microsoft.com/windows/2004/02/mit/task"},
		{"root", task.XMLName.Local, "Task"},
		{"trigger user", strings.Join(task.Triggers, ","), user},
		{"principal", task.User, user},
		{"logon type", task.Logon, "InteractiveToken"},
		{"run level", task.RunLevel, "LeastPrivilege"},
		{"start on battery", task.Settings.DisallowStartIfOnBatteries, "false"},
		{"stop on battery", task.Settings.StopIfGoingOnBatteries, "false"},
		{"time limit", task.Settings.ExecutionTimeLimit, "PT0S"},
		{"second instance", task.Settings.MultipleInstancesPolicy, "IgnoreNew"},
		{"restart", task.Settings.Restart, "PT1M"},
		{"command", task.Command, exe},
		{"arguments", task.Arguments, `service run --data "D:\my books & notes"`},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if _, err := taskXML("", user, nil); err == nil {
		t.Error("a definition without a program was made")
	}
}

func TestServiceInstructions(t *testing.T) {
	for _, tt := range []struct{ goos, want string }{
		{"windows", "danyue service install"},
		{"darwin", "launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/org.danyue.daemon.plist"},
		{"android", "~/.termux/boot"},
		{"linux", "systemctl --user enable --now danyue"},
		{"freebsd", "danyue service file"},
	} {
		got := serviceInstructions(tt.goos)
		if !strings.Contains(got, tt.want) {
			t.Errorf("instructions for %s lack %q:\n%s", tt.goos, tt.want, got)
		}
		// Issue 49: a path in a source checkout is no instruction for
		// someone who installed a binary.
		if strings.Contains(got, "cmd/danyue/") {
			t.Errorf("instructions for %s name a file of the source tree:\n%s", tt.goos, got)
		}
	}
}

// Issue 49: the file to install comes from the binary, and the systemd
// unit runs the binary that printed it.
func TestServiceFile(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ goos, want string }{
		{"linux", "ExecStart=" + exe + " daemon"},
		{"freebsd", "[Service]"},
		{"darwin", "<key>ProgramArguments</key>"},
		{"android", "termux"},
	} {
		got, ok := serviceFile(tt.goos)
		if !ok || !strings.Contains(got, tt.want) {
			t.Errorf("service file for %s lacks %q:\n%s", tt.goos, tt.want, got)
		}
	}
	if _, ok := serviceFile("windows"); ok {
		t.Error("a service file for Windows, which has a Scheduled Task")
	}
}

// "danyue service" explains; an action other than on Windows is a usage
// error (exit 2) that points back to it, and changes nothing.
func TestServiceCommand(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("install would register a real task")
	}
	data := filepath.Join(t.TempDir(), "data")
	res := runCLI(t, nil, "service", "--data", data)
	if res.code != 0 || !strings.Contains(res.stdout, "starts at logon") {
		t.Fatalf("danyue service: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, args := range [][]string{{"install"}, {"uninstall"}, {"status"}, {"run"}} {
		res := runCLI(t, nil, append([]string{"service", "--data", data}, args...)...)
		if res.code != 2 || !strings.Contains(res.stderr, "is for Windows") || !strings.Contains(res.stderr, "Try: danyue service") {
			t.Errorf("danyue service %s: exit %d, stderr %q", args[0], res.code, res.stderr)
		}
	}
	res = runCLI(t, nil, "service", "frobnicate")
	if res.code != 2 || !strings.Contains(res.stderr, "unknown service action") {
		t.Errorf("danyue service frobnicate: exit %d, stderr %q", res.code, res.stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the data dir was created: %v", err)
	}
}

func TestOpenLogFileRotates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	f, err := openLogFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("x"), 10<<20+1)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f, err = openLogFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, err := os.Stat(filepath.Join(dir, logFileName)); err != nil || st.Size() != 0 {
		t.Errorf("the log was not started afresh: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, logFileName+".1")); err != nil || st.Size() != 10<<20+1 {
		t.Errorf("the old log was not kept as .1: %v", err)
	}
}
