package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/display"
)

// MCP is the "mcp" member of an entry's airlock block: the entry is a tool of an MCP server,
// bridged by internal/mcp (issue 19, item 3). What the entry pins is the tool's definition as
// the operator reviewed it at import (`airlock mcp import`); at run time the tool is offered
// and called only while the server's live definition has the same Digest.
//
// Everything that decides how the tool is treated (side effect, network, cap, timeout,
// confirmation) comes from the rest of the entry and its policy, never from the definition:
// a server's annotations and descriptions are untrusted claims.
type MCP struct {
	// Server is the configured MCP server's name (MCPServerNamePattern), the one the
	// servers file (AIRLOCK_MCP_SERVERS) declares.
	Server string `json:"server"`
	// Tool is the tool's name on that server, exactly as the server lists it.
	Tool string `json:"tool"`
	// Digest is "sha256:" + 64 lowercase hex digits: SHA-256 of the RFC 8785 canonical form of
	// Definition (MCPDigest). The load checks that it matches Definition.
	Digest string `json:"digest"`
	// Definition is the pinned tool definition (MCPToolDefinition's shape): name, title,
	// description, input and output schema, annotations.
	Definition json.RawMessage `json:"definition"`
}

// MCPToolDefinition is the part of an MCP tool definition (tools/list, MCP 2025-06-18 "Tool")
// that is pinned: what the model, the server and the operator read of the tool. _meta and
// icons are not pinned (they change with the server's build and carry no contract).
// Annotations are the server's hints as the official Go SDK decodes them (ToolAnnotations:
// readOnlyHint, destructiveHint, idempotentHint, openWorldHint, title).
type MCPToolDefinition struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// MCPServerNamePattern is the grammar of MCP server names: they appear in capability ids
// ("mcp.<server>.<tool>"), grants and destinations.
var MCPServerNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

var reMCPDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// MCPDigest is the pin of a tool definition: "sha256:" + the lowercase hex SHA-256 of the
// definition's RFC 8785 canonical JSON (internal/canonical), so key order and white space
// never change it and any change of a name, text, schema or annotation does.
func MCPDigest(definition json.RawMessage) (string, error) {
	d, err := canonical.Digest(definition)
	if err != nil {
		return "", fmt.Errorf("mcp definition: %w", err)
	}
	return "sha256:" + d, nil
}

// ErrMCPDefinition is wrapped by DecodeMCPDefinition's errors.
var ErrMCPDefinition = errors.New("registry: invalid MCP tool definition")

// DecodeMCPDefinition strictly decodes a pinned definition (no unknown member, one JSON
// object, an object input schema).
func DecodeMCPDefinition(b json.RawMessage) (MCPToolDefinition, error) {
	def, err := decodeStrict[MCPToolDefinition](b)
	if err != nil {
		return def, fmt.Errorf("%w: %w", ErrMCPDefinition, err)
	}
	var schema map[string]any
	if json.Unmarshal(def.InputSchema, &schema) != nil || schema == nil {
		return def, fmt.Errorf("%w: inputSchema is not a JSON object", ErrMCPDefinition)
	}
	return def, nil
}

// draftURIs are the "$schema" values of the JSON Schema drafts MCP servers write (most
// generate draft-07 with zod-to-json-schema); MCPArgumentSchema reads them as 2020-12.
var draftURIs = []string{
	"http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-07/schema",
	"http://json-schema.org/draft-06/schema#", "http://json-schema.org/draft-04/schema#",
	"https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema",
}

// MCPArgumentSchema is the argument schema stage 2 validates an MCP tool's calls against,
// derived from the pinned inputSchema (deterministically, so a registry check and a worker
// agree): "$schema" of a known draft is dropped and the draft-07 spellings are rewritten to
// JSON Schema 2020-12 ("definitions" → "$defs" with their "$ref"s, array "items" →
// "prefixItems", "additionalItems" → "items", "dependencies" → "dependentRequired" /
// "dependentSchemas"). The top level is closed (additionalProperties false) unless the
// schema itself says what to do with other members: a model may not pass a server arguments
// the operator never saw. Keywords the validator would not enforce stay and are refused at
// load (RuleArgumentSchema), never silently ignored.
func MCPArgumentSchema(inputSchema json.RawMessage) (json.RawMessage, error) {
	var s map[string]any
	dec := json.NewDecoder(bytes.NewReader(inputSchema))
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil || s == nil {
		return nil, fmt.Errorf("%w: inputSchema is not a JSON object", ErrMCPDefinition)
	}
	if v, ok := s["$schema"].(string); ok && slices.Contains(draftURIs, v) {
		delete(s, "$schema")
	}
	out := upgradeSchema(s).(map[string]any)
	if out["type"] == nil {
		out["type"] = "object"
	}
	_, ap := out["additionalProperties"]
	_, pp := out["patternProperties"]
	_, up := out["unevaluatedProperties"]
	if !ap && !pp && !up {
		out["additionalProperties"] = false
	}
	return json.Marshal(out)
}

// upgradeSchema rewrites draft-07 keywords to their 2020-12 spelling, recursively.
func upgradeSchema(v any) any {
	switch s := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(s))
		for k, x := range s {
			out[k] = upgradeSchema(x)
		}
		if d, ok := out["definitions"]; ok {
			if _, has := out["$defs"]; !has {
				out["$defs"] = d
				delete(out, "definitions")
			}
		}
		if ref, ok := out["$ref"].(string); ok && strings.HasPrefix(ref, "#/definitions/") {
			out["$ref"] = "#/$defs/" + strings.TrimPrefix(ref, "#/definitions/")
		}
		if items, ok := out["items"].([]any); ok {
			out["prefixItems"] = items
			delete(out, "items")
			if ai, ok := out["additionalItems"]; ok {
				out["items"] = ai
				delete(out, "additionalItems")
			}
		}
		if deps, ok := out["dependencies"].(map[string]any); ok {
			req, sch := map[string]any{}, map[string]any{}
			for k, x := range deps {
				if _, isList := x.([]any); isList {
					req[k] = x
				} else {
					sch[k] = x
				}
			}
			delete(out, "dependencies")
			if len(req) > 0 {
				out["dependentRequired"] = req
			}
			if len(sch) > 0 {
				out["dependentSchemas"] = sch
			}
		}
		return out
	case []any:
		out := make([]any, len(s))
		for i, x := range s {
			out[i] = upgradeSchema(x)
		}
		return out
	default:
		return v
	}
}

// checkMCPEntry enforces RuleMCPPin on an entry whose airlock block has the mcp member: a
// server name of the grammar, the tool named, a definition that decodes strictly and names
// that tool, a digest of the right shape that matches the definition, and an entry that is a
// capability (a proposal tool is Airlock's own, never a server's).
func checkMCPEntry(src string, e Entry) []Diagnostic {
	m := e.Airlock.MCP
	if m == nil {
		return nil
	}
	var p []Diagnostic
	bad := func(format string, a ...any) {
		p = append(p, Diagnostic{Source: src, Entry: e.Key(), Rule: RuleMCPPin, Message: fmt.Sprintf(format, a...)})
	}
	if !MCPServerNamePattern.MatchString(m.Server) {
		bad("mcp server %q does not match %s", m.Server, MCPServerNamePattern)
	}
	if m.Tool == "" {
		bad("mcp tool is empty")
	}
	if e.Airlock.Kind == KindProposal {
		bad("an MCP tool cannot be a proposal tool")
	}
	// Every argument of an MCP call goes to its server: the destination is that server, even
	// for a local stdio server (issue 19: a missing destination for an MCP entry refuses the
	// load). External entries without one are already refused by checkDestination.
	switch d := e.Airlock.Destination; {
	case d == nil && !e.External():
		p = append(p, Diagnostic{Source: src, Entry: e.Key(), Rule: RuleDestinationDeclared, Message: fmt.Sprintf(
			"an MCP tool declares its destination: add \"destination\": {\"kind\": \"server\", \"name\": %q, \"fields\": [its arguments]}", m.Server)})
	case d != nil && (d.Kind != DestinationServer || d.Name != m.Server):
		p = append(p, Diagnostic{Source: src, Entry: e.Key(), Rule: RuleDestination, Message: fmt.Sprintf(
			"an MCP tool's destination is its server: kind server, name %q (not %s %q)", m.Server, d.Kind, display.Visible(d.Name))})
	}
	def, err := DecodeMCPDefinition(m.Definition)
	if err != nil {
		bad("%v", err)
		return p
	}
	if def.Name != m.Tool {
		bad("the pinned definition names tool %q, the entry %q", def.Name, m.Tool)
	}
	if !reMCPDigest.MatchString(m.Digest) {
		bad("mcp digest %q is not sha256:<64 lowercase hex digits>", m.Digest)
		return p
	}
	if got, err := MCPDigest(m.Definition); err != nil {
		bad("%v", err)
	} else if got != m.Digest {
		bad("mcp digest %s does not match the pinned definition (its digest is %s): the definition was edited after import; import the tool again", m.Digest, got)
	}
	return p
}

// mcpConflict reports whether two entries that claim one tool/name are tools of two
// different MCP servers (RuleMCPToolUnique instead of the generic RuleToolNameUnique).
func mcpConflict(a, b Entry) bool {
	return a.Airlock.MCP != nil && b.Airlock.MCP != nil && a.Airlock.MCP.Server != b.Airlock.MCP.Server
}

// MCPPinDigest is a short, stable rendering of a digest for operators ("sha256:0123456789ab").
func MCPPinDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// MCPDefinitionJSON renders a definition in its pinned form (the bytes an import writes).
func MCPDefinitionJSON(def MCPToolDefinition) (json.RawMessage, string, error) {
	b, err := json.Marshal(def)
	if err != nil {
		return nil, "", err
	}
	d, err := MCPDigest(b)
	return b, d, err
}

// CheckArgumentSchema applies to schema the rules stage 2 binds argument schemas under
// (RuleArgumentSchema: it compiles as JSON Schema 2020-12 and uses only enforced keywords),
// for tools that write registry entries (airlock mcp import) and must not write one that a
// worker would refuse.
func CheckArgumentSchema(schema json.RawMessage) error {
	c := &Capability{Entry: Entry{ID: "argument-schema-check", Version: 1}, Impl: Implementation{Schema: schema,
		Invoke: func(context.Context, Invocation) (Output, error) { return Output{}, nil }}}
	return c.bindSchema()
}
