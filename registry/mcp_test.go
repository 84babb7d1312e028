package registry

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The pin is the canonical form's digest: key order and white space never change it, any
// change of a name, text, schema or annotation does.
func TestMCPDigestIsCanonical(t *testing.T) {
	a, err := MCPDigest(json.RawMessage(`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := MCPDigest(json.RawMessage(" {\"inputSchema\": {\"properties\": {\"x\": {\"type\": \"string\"}}, \"type\": \"object\"},\n \"description\": \"d\", \"name\": \"t\"}"))
	if a != b || !reMCPDigest.MatchString(a) {
		t.Fatalf("digest depends on layout: %s %s", a, b)
	}
	for _, changed := range []string{
		`{"name":"t","description":"d ","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"x":{"type":"number"}}}}`,
		`{"name":"u","description":"d","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}},"annotations":{"readOnlyHint":true}}`,
	} {
		if c, _ := MCPDigest(json.RawMessage(changed)); c == a {
			t.Errorf("change not seen by the digest: %s", changed)
		}
	}
	if _, err := MCPDigest(json.RawMessage(`{"name":"t","name":"u"}`)); err == nil {
		t.Fatal("a definition with a duplicate key has a digest")
	}
}

// Draft-07 schemas are read as 2020-12 and the top level is closed.
func TestMCPArgumentSchemaUpgradesDraft07(t *testing.T) {
	in := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
	  "properties":{"p":{"$ref":"#/definitions/point"},"pair":{"type":"array","items":[{"type":"string"},{"type":"number"}],"additionalItems":false}},
	  "definitions":{"point":{"type":"object","properties":{"x":{"type":"number"}}}},
	  "dependencies":{"p":["pair"]}}`
	out, err := MCPArgumentSchema(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckArgumentSchema(out); err != nil {
		t.Fatalf("converted schema refused: %v\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{`"$defs"`, `"#/$defs/point"`, `"prefixItems"`, `"dependentRequired"`, `"additionalProperties":false`} {
		if !strings.Contains(s, want) {
			t.Errorf("converted schema lacks %s: %s", want, s)
		}
	}
	for _, gone := range []string{`"$schema"`, `"definitions"`, `"additionalItems"`, `"dependencies"`} {
		if strings.Contains(s, gone) {
			t.Errorf("converted schema keeps %s: %s", gone, s)
		}
	}
	c := &Capability{Entry: Entry{ID: "x", Version: 1}, Impl: Implementation{Schema: out, Invoke: okInvoke}}
	if err := c.bindSchema(); err != nil {
		t.Fatal(err)
	}
	for args, ok := range map[string]bool{
		`{"p":{"x":1},"pair":["a",2]}`: true,
		`{"p":{"x":1}}`:                false, // dependentRequired
		`{"pair":["a",2,3]}`:           false, // items false after the prefix
		`{"pair":["a",2],"other":1}`:   false, // closed top level
	} {
		if _, err := c.ValidateArguments(json.RawMessage(args)); (err == nil) != ok {
			t.Errorf("%s: accepted=%v, want %v (%v)", args, err == nil, ok, err)
		}
	}
	// An open schema stays open; a schema with a keyword the validator cannot enforce stays
	// refused rather than silently loosened.
	open, _ := MCPArgumentSchema(json.RawMessage(`{"type":"object","additionalProperties":true}`))
	if !strings.Contains(string(open), `"additionalProperties":true`) {
		t.Fatalf("open schema closed: %s", open)
	}
	bad, _ := MCPArgumentSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","x-secret":1}}}`))
	if err := CheckArgumentSchema(bad); err == nil {
		t.Fatal("an unenforceable keyword was accepted")
	}
	if _, err := MCPArgumentSchema(json.RawMessage(`[1]`)); !errors.Is(err, ErrMCPDefinition) {
		t.Fatalf("a non-object schema: %v", err)
	}
}

// The load checks an MCP entry's pin against its definition, its destination against its
// server, and refuses a local MCP entry that declares none.
func TestMCPEntryChecks(t *testing.T) {
	def := MCPToolDefinition{Name: "read", Description: "Read.", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)}
	b, d, err := MCPDefinitionJSON(def)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(mutate func(*Entry)) Entry {
		e := Entry{ID: "mcp.s.read", Version: 1, Airlock: Airlock{SideEffect: SideEffectNone, Network: NetworkLocal,
			MCP:         &MCP{Server: "s", Tool: "read", Digest: d, Definition: b},
			Destination: &Destination{Kind: DestinationServer, Name: "s", Fields: []string{"id"}}}}
		mutate(&e)
		return e
	}
	rules := func(e Entry) []string {
		var out []string
		for _, d := range checkMCPEntry("t", e) {
			out = append(out, string(d.Rule)+": "+d.Message)
		}
		return out
	}
	if got := rules(entry(func(*Entry) {})); len(got) != 0 {
		t.Fatalf("a good entry: %v", got)
	}
	for name, tc := range map[string]struct {
		mutate func(*Entry)
		want   string
	}{
		"digest": {func(e *Entry) { e.Airlock.MCP.Digest = "sha256:" + strings.Repeat("0", 64) }, "mcp-pin: mcp digest"},
		"tool":   {func(e *Entry) { e.Airlock.MCP.Tool = "write" }, `mcp-pin: the pinned definition names tool "read", the entry "write"`},
		"server": {func(e *Entry) { e.Airlock.MCP.Server = "Bad Name" }, "mcp-pin: mcp server"},
		"definition": {func(e *Entry) {
			e.Airlock.MCP.Definition = json.RawMessage(`{"name":"read","inputSchema":{},"extra":1}`)
		}, "mcp-pin: registry: invalid MCP tool definition"},
		"no dest":      {func(e *Entry) { e.Airlock.Destination = nil }, "destination-declared: an MCP tool declares its destination"},
		"other server": {func(e *Entry) { e.Airlock.Destination.Name = "t" }, "destination: an MCP tool's destination is its server"},
		"host dest":    {func(e *Entry) { e.Airlock.Destination = &Destination{Kind: DestinationHost, Name: "example.org"} }, "destination: an MCP tool's destination is its server"},
	} {
		got := strings.Join(rules(entry(tc.mutate)), "\n")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: diagnostics %q, want %q", name, got, tc.want)
		}
	}
}
