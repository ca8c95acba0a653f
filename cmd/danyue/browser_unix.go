//go:build !darwin && !windows && !ios

package main

import "os/exec"

// browserCommand is how to open url in the user's browser: xdg-open where a
// desktop session is running (without one it would start a text browser in
// this terminal), termux-open-url on Android.
func browserCommand(url string, getenv func(string) string) (string, []string, bool) {
	if p, err := exec.LookPath("termux-open-url"); err == nil {
		return p, []string{url}, true
	}
	if getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "" {
		return "", nil, false
	}
	if p, err := exec.LookPath("xdg-open"); err == nil {
		return p, []string{url}, true
	}
	return "", nil, false
}
