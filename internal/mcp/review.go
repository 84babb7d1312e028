package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/registry"
)

// Re-import review: running `airlock mcp import` against a layer that exists must never
// overwrite it blind. A tool whose upstream definition changed, a new tool and a tool the server
// no longer lists are each shown (a diff of the pinned definitions) and change the layer only
// when the operator accepts that tool by name; every other entry, and every policy entry the
// operator edited, stays exactly as it is. A changed tool not accepted keeps its old pin, so it
// stays unoffered until accepted (the bridge refuses a live definition that differs from it).

// ChangeKind is what happened to one tool between the existing layer and the server's list.
type ChangeKind string

// The kinds of ToolChange.
const (
	ChangeUnchanged ChangeKind = "unchanged"
	ChangeChanged   ChangeKind = "changed"
	ChangeNew       ChangeKind = "new"
	ChangeRemoved   ChangeKind = "removed"
)

// ToolChange is one tool's change as the operator reviews it.
type ToolChange struct {
	// Tool is the tool's MCP name (hidden characters shown as <U+XXXX>).
	Tool string     `json:"tool"`
	Kind ChangeKind `json:"kind"`
	// Members names the definition members that differ (changed tools).
	Members []string `json:"members,omitempty"`
	// Diff is a unified diff of the pinned definition, old to new (indented JSON, every line
	// made visible: it is the server's text).
	Diff string `json:"diff,omitempty"`
	// Accepted says whether the layer now holds the change.
	Accepted bool `json:"accepted"`
}

// Reviewed is the merged layer and policy (indented JSON) and each tool's change.
type Reviewed struct {
	Layer, Policy []byte
	Changes       []ToolChange
}

// Pending lists the tools with a change the operator has not accepted.
func (r *Reviewed) Pending() []string {
	var out []string
	for _, c := range r.Changes {
		if c.Kind != ChangeUnchanged && !c.Accepted {
			out = append(out, c.Tool)
		}
	}
	return out
}

// Review merges a fresh import into the existing layer and policy. accept says whether the
// operator accepted the change of a tool (by its MCP name). Unchanged tools keep their existing
// entries, edits and all; an accepted changed tool takes the new pin, description and
// destination fields and keeps the operator's classes, cap and timeout; an accepted new tool is
// added with a confirm policy entry; an accepted removed tool is dropped with its policy entry.
// The policy's other entries are never rewritten. Errors: an existing layer or policy that does
// not parse, or a merged result that would not load.
func Review(existingLayer, existingPolicy []byte, imp *Imported, accept func(tool string) bool) (*Reviewed, error) {
	var doc registry.Document
	if err := json.Unmarshal(existingLayer, &doc); err != nil {
		return nil, fmt.Errorf("mcp import: the existing layer: %w", err)
	}
	var pol registry.PolicyDocument
	if err := json.Unmarshal(existingPolicy, &pol); err != nil {
		return nil, fmt.Errorf("mcp import: the existing policy: %w", err)
	}
	var fresh registry.Document
	if err := json.Unmarshal(imp.Layer, &fresh); err != nil {
		return nil, fmt.Errorf("mcp import: the imported layer: %w", err)
	}
	var freshPol registry.PolicyDocument
	if err := json.Unmarshal(imp.Policy, &freshPol); err != nil {
		return nil, fmt.Errorf("mcp import: the imported policy: %w", err)
	}
	old, now := byTool(doc.Entries), byTool(fresh.Entries)
	tools := make([]string, 0, len(old)+len(now))
	for t := range old {
		tools = append(tools, t)
	}
	for t := range now {
		if _, ok := old[t]; !ok {
			tools = append(tools, t)
		}
	}
	slices.Sort(tools)

	out := &Reviewed{}
	var entries []registry.Entry
	drop := map[string]bool{}
	var add []registry.PolicyEntry
	for _, t := range tools {
		o, hadOld := old[t]
		n, hasNew := now[t]
		c := ToolChange{Tool: display.Visible(t)}
		switch {
		case hadOld && hasNew && o.Airlock.MCP.Digest == n.Airlock.MCP.Digest:
			c.Kind, c.Accepted = ChangeUnchanged, true
			entries = append(entries, o)
		case hadOld && hasNew:
			c.Kind = ChangeChanged
			var od, nd registry.MCPToolDefinition
			_ = json.Unmarshal(o.Airlock.MCP.Definition, &od)
			_ = json.Unmarshal(n.Airlock.MCP.Definition, &nd)
			c.Members = ChangedMembers(od, nd)
			c.Diff = definitionDiff(t, o.Airlock.MCP.Definition, n.Airlock.MCP.Definition)
			if c.Accepted = accept(t); c.Accepted {
				e := o
				mcpPin := *n.Airlock.MCP
				e.Airlock.MCP = &mcpPin
				e.Airlock.Description = n.Airlock.Description
				e.Airlock.Destination = n.Airlock.Destination
				entries = append(entries, e)
			} else {
				entries = append(entries, o)
			}
		case hasNew:
			c.Kind = ChangeNew
			c.Diff = definitionDiff(t, nil, n.Airlock.MCP.Definition)
			if c.Accepted = accept(t); c.Accepted {
				entries = append(entries, n)
				add = append(add, registry.PolicyEntry{ID: n.ID, Version: n.Version, GrantsRequired: policyGrants(freshPol, n.ID), Autonomy: registry.AutonomyConfirm})
			}
		default:
			c.Kind = ChangeRemoved
			if c.Accepted = accept(t); c.Accepted {
				drop[o.ID] = true
			} else {
				entries = append(entries, o)
			}
		}
		out.Changes = append(out.Changes, c)
	}
	// Entries keep the existing layer's order, new ones after it.
	slices.SortStableFunc(entries, func(a, b registry.Entry) int { return indexOf(doc.Entries, a.ID) - indexOf(doc.Entries, b.ID) })
	doc.Entries = entries
	if changed := slices.ContainsFunc(out.Changes, func(c ToolChange) bool { return c.Kind != ChangeUnchanged && c.Accepted }); changed {
		doc.Revision = fresh.Revision
	}
	var caps []registry.PolicyEntry
	for _, pe := range pol.Capabilities {
		if !drop[pe.ID] {
			caps = append(caps, pe)
		}
	}
	pol.Capabilities = append(caps, add...)
	var err error
	if out.Layer, err = json.MarshalIndent(doc, "", "  "); err != nil {
		return nil, err
	}
	if out.Policy, err = json.MarshalIndent(pol, "", "  "); err != nil {
		return nil, err
	}
	out.Layer, out.Policy = append(out.Layer, '\n'), append(out.Policy, '\n')
	if _, err := registry.LoadUnbound([]registry.Source{{Name: "reviewed layer", Data: out.Layer}, {Name: "reviewed policy", Data: out.Policy}}); err != nil {
		return nil, fmt.Errorf("mcp import: the reviewed layer would not load: %w", err)
	}
	return out, nil
}

// byTool indexes a layer's MCP entries by MCP tool name.
func byTool(es []registry.Entry) map[string]registry.Entry {
	out := map[string]registry.Entry{}
	for _, e := range es {
		if e.Airlock.MCP != nil {
			out[e.Airlock.MCP.Tool] = e
		}
	}
	return out
}

// indexOf is the position of id in es, or len(es) (after every existing entry).
func indexOf(es []registry.Entry, id string) int {
	if i := slices.IndexFunc(es, func(e registry.Entry) bool { return e.ID == id }); i >= 0 {
		return i
	}
	return len(es)
}

// policyGrants is the grants the fresh policy stub requires for id.
func policyGrants(p registry.PolicyDocument, id string) []string {
	for _, pe := range p.Capabilities {
		if pe.ID == id {
			return pe.GrantsRequired
		}
	}
	return nil
}

// definitionDiff is a unified diff of two pinned definitions as indented JSON, each line made
// visible (the definitions are the server's text: hidden characters show as <U+XXXX>).
func definitionDiff(tool string, a, b json.RawMessage) string {
	pretty := func(raw json.RawMessage) string {
		if len(raw) == 0 {
			return ""
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return display.Visible(string(raw)) + "\n"
		}
		lines := strings.Split(buf.String(), "\n")
		for i, l := range lines {
			lines[i] = display.Visible(l)
		}
		return strings.Join(lines, "\n") + "\n"
	}
	name := display.Visible(tool)
	return udiff.Unified("pinned/"+name, "upstream/"+name, pretty(a), pretty(b))
}
