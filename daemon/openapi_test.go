package daemon

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes keeps openapi.json and the route table from
// drifting apart: every route is documented and every documented operation
// is served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	var documented, served []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "parameters", "summary", "description", "servers": // shared by the path's operations
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	for _, rt := range (&Daemon{}).routeTable() {
		served = append(served, rt.method+" "+rt.path)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("openapi.json documents\n  %s\nthe daemon serves\n  %s", strings.Join(documented, "\n  "), strings.Join(served, "\n  "))
	}
}

func TestOpenAPIIsServed(t *testing.T) {
	d := startDaemon(t, nil)
	var doc map[string]any
	if err := d.client.Do(ctxT(t), "GET", "/v1/openapi.json", nil, nil, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("served document has openapi=%v", doc["openapi"])
	}
}

// Every operation's x-danyue-permission in openapi.json is the permission
// the route table enforces.
func TestOpenAPIPermissions(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"` // operations, and shared "parameters"
	}
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	names := map[perm]string{permRead: "read", permWrite: "write", permAdmin: "admin"}
	for _, rt := range (&Daemon{}).routeTable() {
		var op struct {
			Perm string `json:"x-danyue-permission"`
		}
		if raw := doc.Paths[rt.path][strings.ToLower(rt.method)]; raw != nil {
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", rt.method, rt.path, err)
			}
		}
		if got := op.Perm; got != names[rt.perm] {
			t.Errorf("%s %s: openapi.json says x-danyue-permission %q, the route needs %q", rt.method, rt.path, got, names[rt.perm])
		}
	}
}
