package crdt

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// Device ids read the same in every log format: 16 hex digits, never a
// decimal that JavaScript would round.
func TestDeviceIDText(t *testing.T) {
	const id DeviceID = 7021886444450608406
	const want = "6172c084869bf516"
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "device", id)
	if !strings.Contains(buf.String(), `"device":"`+want+`"`) {
		t.Errorf("JSON log: %s, want device %q", buf.String(), want)
	}
	buf.Reset()
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "device", id)
	if !strings.Contains(buf.String(), "device="+want) {
		t.Errorf("text log: %s, want device=%s", buf.String(), want)
	}
	b, err := json.Marshal(map[string]DeviceID{"d": id})
	if err != nil || string(b) != `{"d":"`+want+`"}` {
		t.Fatalf("json: %s, %v", b, err)
	}
	var back map[string]DeviceID
	if err := json.Unmarshal(b, &back); err != nil || back["d"] != id {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"d":"123"}`), &back); err == nil {
		t.Error("a malformed id was accepted")
	}
}
