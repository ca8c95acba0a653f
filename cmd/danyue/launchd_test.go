package main

import (
	"encoding/xml"
	"os"
	"strings"
	"testing"
)

// plistNode is any element of a property list: a dict's children alternate
// <key> and value.
type plistNode struct {
	XMLName xml.Name
	Text    string      `xml:",chardata"`
	Items   []plistNode `xml:",any"`
}

// The launchd agent is a well-formed property list that runs the daemon at
// login, restarts it after a crash only, and logs JSON to ~/Library/Logs.
func TestLaunchdPlist(t *testing.T) {
	const file = "launchd/org.danyue.daemon.plist"
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var root plistNode
	if err := xml.Unmarshal(raw, &root); err != nil {
		t.Fatalf("%s is not XML: %v", file, err)
	}
	if root.XMLName.Local != "plist" || len(root.Items) != 1 || root.Items[0].XMLName.Local != "dict" {
		t.Fatalf("%s: want <plist><dict>, got %v", file, root.XMLName)
	}
	dict := map[string]plistNode{}
	items := root.Items[0].Items
	for i := 0; i+1 < len(items); i += 2 {
		if items[i].XMLName.Local != "key" {
			t.Fatalf("%s: dict item %d is <%s>, want <key>", file, i, items[i].XMLName.Local)
		}
		dict[items[i].Text] = items[i+1]
	}
	if len(items)%2 != 0 {
		t.Fatalf("%s: a key without a value", file)
	}
	if got := dict["Label"].Text; got != "org.danyue.daemon" || !strings.HasSuffix(file, "/"+got+".plist") {
		t.Errorf("Label %q does not match the file name", got)
	}
	var args []string
	for _, a := range dict["ProgramArguments"].Items {
		args = append(args, a.Text)
	}
	cmdline := strings.Join(args, " ")
	for _, want := range []string{"exec danyue daemon", "--log-format json", `"$HOME/Library/Logs/danyue.log"`} {
		if !strings.Contains(cmdline, want) {
			t.Errorf("ProgramArguments %q lack %q", args, want)
		}
	}
	if !strings.HasPrefix(args[0], "/") {
		t.Errorf("launchd needs an absolute program path, got %q", args[0])
	}
	if dict["RunAtLoad"].XMLName.Local != "true" {
		t.Error("RunAtLoad is not true")
	}
	keep := dict["KeepAlive"]
	if len(keep.Items) != 2 || keep.Items[0].Text != "SuccessfulExit" || keep.Items[1].XMLName.Local != "false" {
		t.Errorf("KeepAlive is not {SuccessfulExit: false} (restart after a crash only): %+v", keep)
	}
}
