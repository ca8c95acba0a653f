package main

import (
	"os"
	"path"
	"runtime"
	"strings"
)

// dataDirFlag registers --data for the commands that talk to a daemon.
func dataDirFlag(fs *flagSet, e *env) *string {
	return fs.String("data", defaultDataDir(e), "data `DIR` of the daemon to talk to, where its API socket is; $DANYUE_DATA sets the default")
}

// daemonDataDirFlag registers --data for the daemon itself.
func daemonDataDirFlag(fs *flagSet, e *env) *string {
	return fs.String("data", defaultDataDir(e), "data `DIR` of this device: its store, API socket and token; $DANYUE_DATA sets the default")
}

// defaultDataDir is the data dir when --data is not given. The flag package
// prints it in the help, so the help shows where data lives on this system.
func defaultDataDir(e *env) string {
	return dataDirFor(runtime.GOOS, e.getenv, os.UserHomeDir)
}

// dataDirFor is the default data dir on goos: $DANYUE_DATA if set, else
// where that platform keeps an application's own data, so that its backup
// tools and its users find it where they expect:
//
//   - windows: %LocalAppData%\danyue. Local, not Roaming: the store holds
//     this device's identity and must not follow the user to another PC.
//   - darwin, ios: ~/Library/Application Support/danyue.
//   - android (Termux, which sets HOME), linux and the other Unixes: the XDG
//     base directory, $XDG_DATA_HOME/danyue, else ~/.local/share/danyue.
//
// It is a pure function of its arguments so that every platform's rule is
// tested on any one; home is consulted only when the environment does not
// say where the home directory is.
func dataDirFor(goos string, getenv func(string) string, home func() (string, error)) string {
	if d := getenv("DANYUE_DATA"); d != "" {
		return d
	}
	homeDir := func(envVar string) string {
		if h := getenv(envVar); h != "" {
			return h
		}
		if h, err := home(); err == nil {
			return h
		}
		return "" // nowhere better: a relative dir, as os.UserHomeDir's callers do
	}
	switch goos {
	case "windows":
		if d := getenv("LocalAppData"); d != "" {
			return windowsJoin(d, "danyue")
		}
		return windowsJoin(homeDir("USERPROFILE"), "AppData", "Local", "danyue")
	case "darwin", "ios":
		return path.Join(homeDir("HOME"), "Library", "Application Support", "danyue")
	default:
		// The XDG spec says a relative $XDG_DATA_HOME is invalid and
		// must be ignored.
		if d := getenv("XDG_DATA_HOME"); strings.HasPrefix(d, "/") {
			return path.Join(d, "danyue")
		}
		return path.Join(homeDir("HOME"), ".local", "share", "danyue")
	}
}

// windowsJoin joins with backslashes whatever the OS it runs on, so the
// Windows rule reads and tests the same everywhere.
func windowsJoin(elem ...string) string {
	var parts []string
	for i, e := range elem {
		if i > 0 {
			e = strings.TrimLeft(e, `\/`)
		}
		if i < len(elem)-1 {
			e = strings.TrimRight(e, `\/`)
		}
		if e != "" {
			parts = append(parts, e)
		}
	}
	return strings.Join(parts, `\`)
}
