package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/registry"
)

// ListTools connects to the server once, lists all its tools (every page) and disconnects.
func ListTools(ctx context.Context, c ServerConfig) ([]*sdk.Tool, *sdk.InitializeResult, error) {
	sv := newServer(New(nil), c)
	defer sv.close()
	sess, err := sv.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer sess.Close()
	var tools []*sdk.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, fmt.Errorf("MCP server %q: list tools: %w", c.Name, err)
		}
		tools = append(tools, t)
	}
	return tools, sess.InitializeResult(), nil
}

// ImportOptions are the operator's choices for `airlock mcp import`. Everything the registry
// decides defaults from the tool's annotations only as a suggestion: the operator reviews
// the layer before loading it.
type ImportOptions struct {
	// Prefix is put before every model-facing tool name (to keep two servers' names apart).
	Prefix string
	// Only, when set, imports only these tools (MCP names).
	Only []string
	// SideEffect and Network override the suggestion per MCP tool name; NetworkAll for all.
	SideEffect map[string]registry.SideEffect
	Network    map[string]registry.Network
	NetworkAll registry.Network
	// Timeout is each entry's execute timeout (default "30s").
	Timeout string
	// Revision is the layer's revision (default "mcp-<server>.<digest of the tool list>").
	Revision string
	// Automatic lists the tools (MCP names) the operator reviewed and lets run without a
	// human: each gets autonomy automatic if its classes allow it (local, side effect none),
	// else stays confirm with a note. Every other tool is confirmed.
	Automatic []string
}

// Note is one thing the operator must read about an imported (or skipped) tool.
type Note struct {
	Tool    string `json:"tool"`
	Skipped bool   `json:"skipped,omitempty"`
	Text    string `json:"text"`
}

// Imported is what an import produced: the registry layer and its policy stub (indented
// JSON, ready to write), the entries, and the notes for review.
type Imported struct {
	Layer   []byte
	Policy  []byte
	Entries []registry.Entry
	Notes   []Note
}

// MaxDescription bounds the description written to the registry for the model (runes).
const MaxDescription = 1024

var reSlugRun = regexp.MustCompile(`[^a-z0-9]+`)

// Import builds a registry layer and a policy stub from a server's tools: one entry per tool
// (capability id mcp.<server>.<tool>, wire name plugin/mcp.<server>.<tool>), its definition
// pinned with its digest. Classes are suggested from the annotations (untrusted hints):
// side-effect none only when the server claims readOnlyHint; network local only for a stdio
// server that claims openWorldHint false; never idempotent. The registry description is the
// server's with every hidden character made visible, bounded to MaxDescription runes. A tool
// whose name cannot be a tool name or whose input schema Airlock cannot enforce is skipped
// with a note, never written half-checked.
func Import(server ServerConfig, tools []*sdk.Tool, o ImportOptions) (*Imported, error) {
	if !registry.MCPServerNamePattern.MatchString(server.Name) {
		return nil, fmt.Errorf("mcp import: server name %q does not match %s", server.Name, registry.MCPServerNamePattern)
	}
	if o.Timeout == "" {
		o.Timeout = "30s"
	}
	out := &Imported{}
	note := func(tool string, skipped bool, format string, a ...any) {
		out.Notes = append(out.Notes, Note{Tool: display.Visible(tool), Skipped: skipped, Text: fmt.Sprintf(format, a...)})
	}
	for _, name := range o.Only {
		if !slices.ContainsFunc(tools, func(t *sdk.Tool) bool { return t.Name == name }) {
			return nil, fmt.Errorf("mcp import: server %q lists no tool %q (--only)", server.Name, display.Visible(name))
		}
	}
	sorted := slices.Clone(tools)
	slices.SortFunc(sorted, func(a, b *sdk.Tool) int { return strings.Compare(a.Name, b.Name) })
	grant := "mcp." + server.Name
	pol := registry.PolicyDocument{SchemaV: registry.PolicySchemaVersion, Grants: []string{grant},
		Principals: []registry.PrincipalGrants{{Principal: registry.AnyPrincipal, Grants: []string{grant}}}}
	ids, names := map[string]bool{}, map[string]bool{}
	listDigest := sha256.New()
	for _, t := range sorted {
		if len(o.Only) > 0 && !slices.Contains(o.Only, t.Name) {
			continue
		}
		def, err := Definition(t)
		if err != nil {
			note(t.Name, true, "skipped: %v", err)
			continue
		}
		defJSON, digest, err := registry.MCPDefinitionJSON(def)
		if err != nil {
			note(t.Name, true, "skipped: %v", err)
			continue
		}
		listDigest.Write([]byte(digest))
		schema, err := registry.MCPArgumentSchema(def.InputSchema)
		if err == nil {
			err = registry.CheckArgumentSchema(schema)
		}
		if err != nil {
			note(t.Name, true, "skipped: its input schema cannot be enforced at stage 2: %v", err)
			continue
		}
		toolName := o.Prefix + t.Name
		if !registry.ToolNamePattern.MatchString(toolName) {
			note(t.Name, true, "skipped: %q is not a tool name a model may see (%s); give --prefix or import it under another server name", display.Visible(toolName), registry.ToolNamePattern)
			continue
		}
		if names[toolName] {
			note(t.Name, true, "skipped: tool name %q is listed twice", toolName)
			continue
		}
		names[toolName] = true
		slug := strings.Trim(reSlugRun.ReplaceAllString(strings.ToLower(t.Name), "-"), "-")
		if slug == "" {
			sum := sha256.Sum256([]byte(t.Name))
			slug = "tool-" + hex.EncodeToString(sum[:4])
		}
		id := "mcp." + server.Name + "." + slug
		for n := 2; ids[id]; n++ {
			id = fmt.Sprintf("mcp.%s.%s-%d", server.Name, slug, n)
		}
		ids[id] = true

		var ann sdk.ToolAnnotations
		if t.Annotations != nil {
			ann = *t.Annotations
		}
		side, net := suggest(server, ann)
		why := "suggested from the server's annotations (untrusted hints): review"
		if v, ok := o.SideEffect[t.Name]; ok {
			side, why = v, "set by the operator"
		}
		if o.NetworkAll != "" {
			net = o.NetworkAll
		}
		if v, ok := o.Network[t.Name]; ok {
			net = v
		}
		desc := description(t)
		if display.Flagged(t.Description) || display.Flagged(t.Title) || display.Flagged(t.Name) {
			note(t.Name, false, "its name, title or description holds hidden characters (%s): the registry description shows them as <U+XXXX>; read it before loading the layer",
				strings.Join(flagNames(display.Union(display.CharFlags(t.Description), display.CharFlags(t.Title), display.CharFlags(t.Name))), ", "))
		}
		if utf8.RuneCountInString(t.Description) > MaxDescription {
			note(t.Name, false, "its description (%d characters) was cut to %d in the registry", utf8.RuneCountInString(t.Description), MaxDescription)
		}
		cap := 3
		if side == registry.SideEffectNone {
			cap = 10
		}
		e := registry.Entry{ID: id, Version: 1, Owner: "MCP server " + server.Name + " (airlock mcp import)",
			Surfaces: []registry.Surface{registry.SurfaceHostLocal}, WireName: "plugin/" + id, Status: registry.StatusActive,
			Flags: registry.Flags{Dispatchable: true, HostRoute: true},
			Airlock: registry.Airlock{ToolName: toolName, Description: desc, SideEffect: side, Network: net, PerTurnCap: cap,
				Timeout: o.Timeout, ModelVisible: true,
				MCP:         &registry.MCP{Server: server.Name, Tool: t.Name, Digest: digest, Definition: defJSON},
				Destination: &registry.Destination{Kind: registry.DestinationServer, Name: server.Name, Fields: registry.ArgumentFields(schema)}}}
		out.Entries = append(out.Entries, e)
		// A tool new to Airlock is confirmed until an operator says otherwise, whatever its
		// annotations claim (a readOnlyHint is the server's word, not a review).
		autonomy := registry.AutonomyConfirm
		auto := ""
		switch {
		case slices.Contains(o.Automatic, t.Name) && e.Automatic():
			autonomy = registry.AutonomyAutomatic
		case slices.Contains(o.Automatic, t.Name):
			auto = " (not automatic as asked: only a local tool without side effects may run without a human)"
		case e.Automatic():
			auto = " until you set it automatic (--automatic " + t.Name + ", or in the policy; it is local and read-only as classed)"
		}
		pol.Capabilities = append(pol.Capabilities, registry.PolicyEntry{ID: id, Version: 1, GrantsRequired: []string{grant}, Autonomy: autonomy})
		idem := ""
		if ann.IdempotentHint {
			idem = "; its idempotentHint is not adopted (an interrupted call stays outcome_unknown)"
		}
		note(t.Name, false, "side-effect %s, network %s (%s; annotations: %s); autonomy %s%s; pinned %s%s",
			side, net, why, annotationText(t.Annotations), autonomy, auto, registry.MCPPinDigest(digest), idem)
	}
	if len(out.Entries) == 0 {
		return out, fmt.Errorf("mcp import: server %q: no tool could be imported", server.Name)
	}
	rev := o.Revision
	if rev == "" {
		rev = "mcp-" + server.Name + "." + hex.EncodeToString(listDigest.Sum(nil)[:6])
	}
	pol.Revision = rev + ".policy"
	doc := registry.Document{SchemaV: registry.SchemaVersion, Revision: rev, Entries: out.Entries}
	var err error
	if out.Layer, err = json.MarshalIndent(doc, "", "  "); err != nil {
		return nil, err
	}
	if out.Policy, err = json.MarshalIndent(pol, "", "  "); err != nil {
		return nil, err
	}
	out.Layer, out.Policy = append(out.Layer, '\n'), append(out.Policy, '\n')
	if _, err := registry.LoadUnbound([]registry.Source{{Name: "imported layer", Data: out.Layer}, {Name: "imported policy", Data: out.Policy}}); err != nil {
		return nil, fmt.Errorf("mcp import: the layer written would not load: %w", err)
	}
	return out, nil
}

// suggest derives default classes from annotations: only explicit claims relax a class.
func suggest(server ServerConfig, a sdk.ToolAnnotations) (registry.SideEffect, registry.Network) {
	net := registry.NetworkExternal
	if server.Transport() == "stdio" && a.OpenWorldHint != nil && !*a.OpenWorldHint {
		net = registry.NetworkLocal
	}
	switch {
	case a.ReadOnlyHint:
		return registry.SideEffectNone, net
	case net == registry.NetworkLocal:
		return registry.SideEffectLocalWrite, net
	default:
		return registry.SideEffectExternalWrite, net
	}
}

func annotationText(a *sdk.ToolAnnotations) string {
	if a == nil {
		return "none"
	}
	var parts []string
	if a.ReadOnlyHint {
		parts = append(parts, "readOnlyHint")
	}
	if a.DestructiveHint != nil {
		parts = append(parts, fmt.Sprintf("destructiveHint=%v", *a.DestructiveHint))
	}
	if a.IdempotentHint {
		parts = append(parts, "idempotentHint")
	}
	if a.OpenWorldHint != nil {
		parts = append(parts, fmt.Sprintf("openWorldHint=%v", *a.OpenWorldHint))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// description is the registry's description of a tool for the model: the server's text (or
// its title, or a fixed sentence) with hidden characters made visible, bounded.
func description(t *sdk.Tool) string {
	d := strings.TrimSpace(t.Description)
	if d == "" {
		d = strings.TrimSpace(t.Title)
	}
	d = display.Text(d)
	if utf8.RuneCountInString(d) > MaxDescription {
		r := []rune(d)
		d = string(r[:MaxDescription-1]) + "…"
	}
	if strings.TrimSpace(d) == "" {
		d = "MCP tool " + display.Visible(t.Name)
	}
	return d
}

func flagNames(fs []display.Flag) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}
