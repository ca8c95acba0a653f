package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unicode/utf16"
)

// The daemon starts at logon as the user who owns the data dir. On Windows
// that is a per-user Scheduled Task, not a Windows service: a service runs
// as LocalSystem (or a service account) with another profile, so it would
// use another %LocalAppData%, another data dir and another API socket than
// the reader apps of the user, and installing one needs an administrator.
// A task that runs at the user's logon, with the user's limited token, needs
// neither. Other platforms have their own user-level mechanism, shipped next
// to this file: a systemd user unit, a launchd agent, a Termux:Boot script.

func serviceCommand() command {
	return command{
		name:    "service",
		usage:   "[install [--data DIR] [-- DAEMON-FLAGS...] | uninstall | status | file]",
		summary: "Start the daemon at logon: on Windows as a per-user Scheduled Task; elsewhere, says how, and `danyue service file` prints the unit, agent or boot script to install.",
		run:     runService,
	}
}

// taskName is the Scheduled Task's name, in the root folder of the user's
// Task Scheduler library.
const taskName = "danyue"

// logFileName is where the task's daemon logs, in its data dir: a task has
// no terminal to write to.
const logFileName = "danyue.log"

func runService(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, serviceCommand(), "danyue service install -- --kosync 0.0.0.0:7200")
	data := daemonDataDirFlag(fs, e)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fmt.Fprint(e.stdout, serviceInstructions(runtime.GOOS))
		return nil
	}
	dataSet := false
	fs.Visit(func(f *flag.Flag) { dataSet = dataSet || f.Name == "data" })
	action, rest := pos[0], pos[1:]
	switch action {
	case "install", "run":
		// Flags for the daemon come after "--"; the task passes them on.
	case "file":
		if len(rest) > 0 {
			return &usageError{msg: fmt.Sprintf("service file takes no arguments, got %q", rest), hint: "danyue service"}
		}
		f, ok := serviceFile(runtime.GOOS)
		if !ok {
			return &usageError{msg: fmt.Sprintf("there is no service file for %s", runtime.GOOS), hint: "danyue service"}
		}
		_, err := io.WriteString(e.stdout, f)
		return err
	case "uninstall", "status":
		if len(rest) > 0 {
			return &usageError{msg: fmt.Sprintf("service %s takes no arguments, got %q", action, rest), hint: "danyue help service"}
		}
	default:
		return &usageError{msg: fmt.Sprintf("unknown service action %q: want install, uninstall or status", action), hint: "danyue help service"}
	}
	if runtime.GOOS != "windows" {
		return &usageError{
			msg:  fmt.Sprintf("danyue service %s is for Windows; on %s the daemon starts at logon through %s", action, runtime.GOOS, serviceMechanism(runtime.GOOS)),
			hint: "danyue service",
		}
	}
	return serviceAction(ctx, e, action, *data, dataSet, rest)
}

// taskArgs are the arguments the task gives danyue.exe: "service run",
// which runs the daemon with its console hidden and its log in a file, with
// the data dir given at install and the daemon flags.
func taskArgs(data string, dataSet bool, daemonFlags []string) []string {
	args := []string{"service", "run"}
	if dataSet {
		args = append(args, "--data", data)
	}
	if len(daemonFlags) > 0 {
		args = append(append(args, "--"), daemonFlags...)
	}
	return args
}

// daemonArgs are the arguments of the daemon that "service run" runs.
func daemonArgs(data string, daemonFlags []string) []string {
	return append([]string{"--data", data, "--log-format", "json"}, daemonFlags...)
}

// serviceMechanism names what starts the daemon at logon on goos.
func serviceMechanism(goos string) string {
	switch goos {
	case "windows":
		return "a per-user Scheduled Task (danyue service install)"
	case "darwin":
		return "a launchd agent (danyue service file prints it)"
	case "android":
		return "Termux:Boot (danyue service file prints its script)"
	case "linux":
		return "a systemd user unit (danyue service file prints it)"
	}
	return "your system's way of starting a program at logon (the systemd unit that danyue service file prints shows the command)"
}

// The files that start the daemon at logon off Windows, in the binary: a
// user who installed danyue with go install or a release has no checkout
// to copy them from.
var (
	//go:embed systemd/danyue.service
	systemdUnit string
	//go:embed launchd/org.danyue.daemon.plist
	launchdAgent string
	//go:embed termux/boot-danyue
	termuxBoot string
)

// serviceFile is what "danyue service file" prints on goos. The systemd
// unit runs the binary that printed it when that path is known: where
// go install puts it is only the unit's guess.
func serviceFile(goos string) (string, bool) {
	switch goos {
	case "darwin", "ios":
		return launchdAgent, true
	case "android":
		return termuxBoot, true
	case "windows":
		return "", false
	}
	if exe, err := os.Executable(); err == nil && filepath.IsAbs(exe) && !strings.ContainsAny(exe, " %\"\n") {
		return strings.Replace(systemdUnit, "ExecStart=%h/go/bin/danyue ", "ExecStart="+exe+" ", 1), true
	}
	return systemdUnit, true
}

// serviceInstructions is what "danyue service" prints on goos: the two
// commands that install and start the daemon at logon.
func serviceInstructions(goos string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "On %s, the daemon starts at logon through %s.\n\n", goos, serviceMechanism(goos))
	switch goos {
	case "windows":
		b.WriteString(`  danyue service install      # creates the task "danyue" and starts it now
  danyue service status       # whether it runs; logs are in DATA\danyue.log
  danyue service uninstall    # stops it and removes the task

The task runs as you, at your logon, with a limited token: no administrator
is needed, and the daemon uses your data dir (%LocalAppData%\danyue) and
talks to your reader apps. A Windows service would run as another account
with another data dir. Flags after "--" go to the daemon:
  danyue service install -- --kosync 0.0.0.0:7200
`)
	case "darwin":
		b.WriteString(`  danyue service file > ~/Library/LaunchAgents/org.danyue.daemon.plist
  launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/org.danyue.daemon.plist

Logs go to ~/Library/Logs/danyue.log. The plist runs /usr/local/bin/danyue:
edit its ProgramArguments if danyue is elsewhere (go install puts it in ~/go/bin).
`)
	case "android":
		b.WriteString(`  mkdir -p ~/.termux/boot && danyue service file > ~/.termux/boot/boot-danyue
  chmod +x ~/.termux/boot/boot-danyue
  ~/.termux/boot/boot-danyue      # start it now; Termux:Boot starts it at every boot

Install the Termux:Boot app and open it once. Logs go to
~/.local/share/danyue/danyue.log.
`)
	default:
		b.WriteString(`  mkdir -p ~/.config/systemd/user
  danyue service file > ~/.config/systemd/user/danyue.service
  systemctl --user daemon-reload
  systemctl --user enable --now danyue

Logs: journalctl --user -u danyue -f
`)
	}
	return b.String()
}

// schtasksArgs are the schtasks.exe argument lists of each action. install
// registers the task from an XML definition rather than with /SC ONLOGON:
// schtasks' logon trigger fires for any user, which only an administrator
// may register, and its defaults would stop the daemon after 72 hours and
// on battery power. The XML names the user in the trigger and turns both off.
func schtasksArgs(action, xmlPath string) [][]string {
	switch action {
	case "install":
		return [][]string{
			{"/Create", "/TN", taskName, "/XML", xmlPath, "/F"},
			{"/Run", "/TN", taskName},
		}
	case "uninstall":
		return [][]string{
			{"/End", "/TN", taskName},
			{"/Delete", "/TN", taskName, "/F"},
		}
	case "status":
		return [][]string{{"/Query", "/TN", taskName, "/V", "/FO", "LIST"}}
	}
	return nil
}

// taskXML is the Task Scheduler definition of the logon task: at user's
// logon, as user with a limited token, run exe with args, restarted after a
// crash, never stopped for running long or on battery. It is encoded in
// UTF-16 with a byte-order mark, the encoding schtasks /XML reads reliably.
func taskXML(exe, user string, args []string) ([]byte, error) {
	if exe == "" || user == "" {
		return nil, errors.New("task definition: no program or no user")
	}
	type exec struct {
		Command   string
		Arguments string `xml:",omitempty"`
	}
	type restart struct {
		Interval string
		Count    int
	}
	t := struct {
		XMLName     xml.Name `xml:"http://schemas.microsoft.com/windows/2004/02/mit/task Task"`
		Version     string   `xml:"version,attr"`
		Description string   `xml:"RegistrationInfo>Description"`
		Trigger     struct {
			Enabled bool
			UserID  string `xml:"UserId"`
		} `xml:"Triggers>LogonTrigger"`
		Principal struct {
			ID        string `xml:"id,attr"`
			UserID    string `xml:"UserId"`
			LogonType string
			RunLevel  string
		} `xml:"Principals>Principal"`
		Settings struct {
			MultipleInstancesPolicy    string
			DisallowStartIfOnBatteries bool
			StopIfGoingOnBatteries     bool
			ExecutionTimeLimit         string
			RestartOnFailure           restart
			Priority                   int
		}
		Actions struct {
			Context string `xml:",attr"`
			Exec    exec
		}
	}{Version: "1.2", Description: "danyue reading-progress sync daemon (danyue service install)"}
	t.Trigger.Enabled, t.Trigger.UserID = true, user
	t.Principal.ID, t.Principal.UserID = "Author", user
	t.Principal.LogonType, t.Principal.RunLevel = "InteractiveToken", "LeastPrivilege"
	s := &t.Settings
	s.MultipleInstancesPolicy = "IgnoreNew"
	s.ExecutionTimeLimit = "PT0S"                              // no limit
	s.RestartOnFailure = restart{Interval: "PT1M", Count: 999} // the scheduler's minimum and maximum
	s.Priority = 7                                             // normal; the scheduler's default is below normal
	t.Actions.Context = "Author"
	t.Actions.Exec = exec{Command: exe, Arguments: windowsCommandLine(args)}

	body, err := xml.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("task definition: %w", err)
	}
	text := `<?xml version="1.0" encoding="UTF-16"?>` + "\n" + string(body) + "\n"
	var out bytes.Buffer
	out.Write([]byte{0xff, 0xfe}) // UTF-16LE byte-order mark
	for _, u := range utf16.Encode([]rune(text)) {
		out.WriteByte(byte(u))
		out.WriteByte(byte(u >> 8))
	}
	return out.Bytes(), nil
}

// checkInstallable refuses to register a danyue.exe that will be gone at
// the next logon: "go run" builds it in the temp dir and deletes it on exit.
// Paths are Windows paths, compared without regard to case.
func checkInstallable(exe, tempDir string) error {
	dir := strings.ToLower(strings.TrimRight(tempDir, `\/`))
	if dir != "" && strings.HasPrefix(strings.ToLower(exe), dir+`\`) {
		return &usageError{
			msg:  fmt.Sprintf("%s is a temporary build (go run?); the task needs a danyue.exe that stays", exe),
			hint: "go install ./cmd/danyue, then danyue service install",
		}
	}
	return nil
}

// windowsCommandLine joins args the way Windows programs split their command
// line (CommandLineToArgvW, which Go's runtime follows), so that a data dir
// with spaces reaches the daemon as one argument.
func windowsCommandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = windowsQuote(a)
	}
	return strings.Join(quoted, " ")
}

// windowsQuote quotes one argument: backslashes are literal except before a
// quote, where each must be doubled.
func windowsQuote(a string) string {
	if a != "" && !strings.ContainsAny(a, " \t\"") {
		return a
	}
	var b strings.Builder
	b.WriteByte('"')
	slashes := 0
	for i := 0; i < len(a); i++ {
		switch c := a[i]; c {
		case '\\':
			slashes++
		case '"':
			b.WriteString(strings.Repeat(`\`, slashes+1)) // the slashes so far, doubled, and one for the quote
			slashes = 0
		default:
			slashes = 0
		}
		b.WriteByte(a[i])
	}
	b.WriteString(strings.Repeat(`\`, slashes)) // doubled before the closing quote
	b.WriteByte('"')
	return b.String()
}

// openLogFile opens DATA/danyue.log for appending, creating the data dir as
// the daemon would (0700). A log past maxLog is moved to danyue.log.1 first,
// so the log of a daemon that runs for years stays bounded.
func openLogFile(dataDir string) (*os.File, error) {
	const maxLog = 10 << 20
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	name := filepath.Join(dataDir, logFileName)
	if st, err := os.Stat(name); err == nil && st.Size() > maxLog {
		_ = os.Rename(name, name+".1") // if it fails, keep appending
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return f, nil
}
