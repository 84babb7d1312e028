package registry

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ToolSpec describes one schema-defined tool of a generated layer (see GenerateLayer). The
// tool's argument schema is not part of the entry: the Implementation bound to the entry
// supplies it, named by SchemaRef.
type ToolSpec struct {
	// Name is the model-facing tool name (ToolNamePattern).
	Name string
	// Description is shown to the model in the catalog.
	Description string
	// SideEffect and Network are the registry's own classification of the tool; they decide
	// whether a call runs automatically (read-only and local) or waits for a human.
	SideEffect SideEffect
	Network    Network
	// SchemaRef names the schema source, e.g. "agentdojo:banking/send_money".
	SchemaRef string
	// Destination is where the tool's calls send what (required for external tools; nil for
	// a local read-only tool means kind none).
	Destination *Destination
}

// Caps and timeout of generated entries: read-only tools may be called often in one turn
// (lookups), consequential ones rarely; every generated capability is served locally, so a
// short timeout suffices.
const (
	generatedReadCap   = 10
	generatedWriteCap  = 3
	generatedTimeout   = "10s"
	generatedWirePrefx = "app/"
)

// GenerateLayer builds a capability-registry.v1 layer document (a Source) for tools defined
// outside Go code, such as an evaluation suite's tools.json. Each tool becomes one active,
// host-local, model-visible entry, version 1:
//
//	capability/id  <idPrefix>.<name lower-cased, "_" → "-">   (P072 bare dotted id)
//	wire/name      app/<capability/id>
//	per-turn/cap   10 for read-only tools, 3 otherwise; timeout 10s
//
// Its policy sidecar is GeneratePolicy over the same document.
//
// The document is only generated here; Load checks it like any other (grammar, uniqueness,
// an implementation per entry), so a tool name outside the grammar or two tools mapping to one
// id fail closed at load. Errors: no tools, an empty name, an unknown side-effect or network
// class, or an external tool without a Destination (a local one without is kind none, or
// system <name> when it writes).
func GenerateLayer(name, revision, owner, idPrefix string, tools []ToolSpec) (Source, error) {
	if len(tools) == 0 {
		return Source{}, fmt.Errorf("registry: generate layer %s: no tools", name)
	}
	doc := Document{SchemaV: SchemaVersion, Revision: revision}
	for _, t := range tools {
		if t.Name == "" {
			return Source{}, fmt.Errorf("registry: generate layer %s: a tool has no name", name)
		}
		switch t.SideEffect {
		case SideEffectNone, SideEffectLocalWrite, SideEffectExternalWrite:
		default:
			return Source{}, fmt.Errorf("registry: generate layer %s: tool %s: unknown side-effect %q", name, t.Name, t.SideEffect)
		}
		if t.Network != NetworkLocal && t.Network != NetworkExternal {
			return Source{}, fmt.Errorf("registry: generate layer %s: tool %s: unknown network %q", name, t.Name, t.Network)
		}
		id := idPrefix + "." + strings.ReplaceAll(strings.ToLower(t.Name), "_", "-")
		a := Airlock{
			ToolName: t.Name, Description: t.Description, SideEffect: t.SideEffect, Network: t.Network,
			PerTurnCap: generatedReadCap, Timeout: generatedTimeout, ModelVisible: true, SchemaRef: t.SchemaRef,
			Destination: t.Destination,
		}
		if a.Destination == nil {
			if t.Network == NetworkExternal || t.SideEffect == SideEffectExternalWrite {
				return Source{}, fmt.Errorf("registry: generate layer %s: tool %s: an external tool needs its destination", name, t.Name)
			}
			a.Destination = &Destination{Kind: DestinationNone}
			if t.SideEffect != SideEffectNone {
				a.Destination = &Destination{Kind: DestinationSystem, Name: name}
			}
		}
		if t.SideEffect != SideEffectNone {
			a.PerTurnCap = generatedWriteCap
		}
		doc.Entries = append(doc.Entries, Entry{
			ID: id, Version: 1, Owner: owner, Surfaces: []Surface{SurfaceHostLocal},
			WireName: generatedWirePrefx + id, Status: StatusActive,
			Flags:   Flags{Dispatchable: true, HostRoute: true},
			Airlock: a,
		})
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return Source{}, fmt.Errorf("registry: generate layer %s: %w", name, err)
	}
	return Source{Name: "generated layer " + name, Data: data}, nil
}

// GeneratePolicy is the capability-authorization-policy.v1 sidecar of a generated layer: the
// structural policy (automatic only where the entry is local and read-only, confirm
// otherwise), every principal granted the layer's grants, and the four-eyes rule for every
// capability with a side effect. The embedded AgentDojo policies under registry/policies are
// its output for the embedded layers; a test keeps them equal.
func GeneratePolicy(layer Source, revision string) Source {
	return StructuralPolicy("policy of "+layer.Name, revision, func(e Entry) bool { return !e.ReadOnly() }, layer)
}
