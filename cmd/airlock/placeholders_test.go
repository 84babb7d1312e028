package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Only entries a team's Go worker binds get a placeholder: an MCP tool entry is bound by the
// MCP bridge and an HTTP entry by its declaration, so doctor and registry check --go-bound
// must not bind them a second time (doctor used to report an MCP layer as "implementation
// bound twice" while the worker ran it).
func TestGoBoundPlaceholdersLeaveMCPAndHTTPEntriesToTheirBinders(t *testing.T) {
	layer := filepath.Join(t.TempDir(), "mixed.v1.json")
	doc := `{"schema/v":"capability-registry.v1","revision":"m","entries":[
 {"capability/id":"go.tool","version":1,"owner":"t","surfaces":["host-local"],"wire/name":"app/go.tool","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":"go_tool","description":"Go.","side-effect":"none","network":"local","per-turn/cap":1,"timeout":"1s","model-visible":true}},
 {"capability/id":"mcp.files.read","version":1,"owner":"t",
  "airlock":{"tool/name":"read_file","description":"Read.","side-effect":"none","network":"local",
   "mcp":{"server":"files","tool":"read_file","digest":"sha256:` + "0000000000000000000000000000000000000000000000000000000000000000" + `","definition":{"name":"read_file","inputSchema":{"type":"object"}}}}},
 {"capability/id":"inv.get","version":1,"owner":"t",
  "airlock":{"tool/name":"inv_get","description":"Get.","side-effect":"none","network":"external",
   "destination":{"kind":"host","name":"inv.example","fields":[]},
   "http":{"method":"GET","url":"https://inv.example/x","arguments":{"type":"object","additionalProperties":false,"properties":{}}}}}]}`
	if err := os.WriteFile(layer, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := `{"schema/v":"capability-authorization-policy.v1","revision":"m","capabilities":[]}`
	if err := os.WriteFile(filepath.Join(filepath.Dir(layer), "mixed.v1.policy.json"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := goBoundPlaceholders([]string{layer})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "go.tool" {
		t.Fatalf("placeholders = %+v, want only go.tool", got)
	}
}
