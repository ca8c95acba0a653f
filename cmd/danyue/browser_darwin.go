//go:build darwin || ios

package main

// browserCommand is how to open url in the user's browser.
func browserCommand(url string, _ func(string) string) (string, []string, bool) {
	return "/usr/bin/open", []string{url}, true
}
