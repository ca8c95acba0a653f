package main

// browserCommand is how to open url in the user's browser: the shell's URL
// handler, which (unlike `cmd /c start`) takes the URL as one argument, so
// its & and ? are not read by cmd.exe.
func browserCommand(url string, _ func(string) string) (string, []string, bool) {
	return "rundll32", []string{"url.dll,FileProtocolHandler", url}, true
}
