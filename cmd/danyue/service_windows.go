//go:build windows

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"

	"golang.org/x/sys/windows"
)

func serviceAction(ctx context.Context, e *env, action, data string, dataSet bool, daemonFlags []string) error {
	switch action {
	case "run":
		return runTask(ctx, e, data, daemonFlags)
	case "install":
		return installTask(ctx, e, data, dataSet, daemonFlags)
	case "uninstall":
		steps := schtasksArgs("uninstall", "")
		_ = schtasks(ctx, nil, steps[0]) // fails when the task is not running
		if err := schtasks(ctx, nil, steps[1]); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "Removed the task %q: the daemon no longer starts at logon. The data dir stays: %s\n", taskName, data)
		return nil
	case "status":
		var out bytes.Buffer
		err := schtasks(ctx, &out, schtasksArgs("status", "")[0])
		e.stdout.Write(out.Bytes())
		return err
	}
	return &usageError{msg: fmt.Sprintf("unknown service action %q", action), hint: "danyue help service"}
}

func installTask(ctx context.Context, e *env, data string, dataSet bool, daemonFlags []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install task: find danyue.exe: %w", err)
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return fmt.Errorf("install task: %w", err)
	}
	if err := checkInstallable(exe, os.TempDir()); err != nil {
		return err
	}
	u, err := user.Current()
	if err != nil {
		return fmt.Errorf("install task: who is the user: %w", err)
	}
	def, err := taskXML(exe, u.Username, taskArgs(data, dataSet, daemonFlags))
	if err != nil {
		return fmt.Errorf("install task: %w", err)
	}
	f, err := os.CreateTemp("", "danyue-task-*.xml")
	if err != nil {
		return fmt.Errorf("install task: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(def); err != nil {
		f.Close()
		return fmt.Errorf("install task: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("install task: %w", err)
	}
	for _, args := range schtasksArgs("install", f.Name()) {
		if err := schtasks(ctx, nil, args); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "Installed the task %q: the daemon runs now and at each logon of %s.\nLogs: %s\n",
		taskName, u.Username, filepath.Join(data, logFileName))
	return nil
}

// schtasks runs schtasks.exe; its error output becomes the error.
func schtasks(ctx context.Context, stdout *bytes.Buffer, args []string) error {
	cmd := exec.CommandContext(ctx, "schtasks.exe", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if stdout != nil {
		stdout.Write(out.Bytes())
	}
	if err != nil {
		return fmt.Errorf("schtasks %s: %s: %w", strings.Join(args, " "), strings.TrimSpace(out.String()), err)
	}
	return nil
}

// runTask is what the task runs: the daemon with its log in DATA\danyue.log
// and without the console window Windows opens for a console program, which
// would stop the daemon when closed.
func runTask(ctx context.Context, e *env, data string, daemonFlags []string) error {
	log, err := openLogFile(data)
	if err != nil {
		return err
	}
	defer log.Close()
	// Detaching from the console closes the window: it was made for us.
	_, _, _ = windows.NewLazySystemDLL("kernel32.dll").NewProc("FreeConsole").Call()
	te := &env{stdin: strings.NewReader(""), stdout: log, stderr: log, getenv: e.getenv}
	if err := runDaemon(ctx, te, daemonArgs(data, daemonFlags)); err != nil {
		fmt.Fprintf(log, "danyue: %v\n", err)
		return err
	}
	return nil
}
