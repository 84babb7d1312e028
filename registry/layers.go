package registry

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed layers/*.json policies/*.json policies/*.cedar
var layerFS embed.FS

// EmbeddedPolicy is the checked-in authorization policy sidecar of the base registry
// (capability-authorization-policy.v1).
//
//go:embed capability-authorization-policy.v1.json
var EmbeddedPolicy []byte

// EmbeddedGuidance is the checked-in capability guidance (capability-guidance.v1): optional,
// lower-trust descriptions bound by digest to exact contracts. It is not part of the registry's
// authority: guidance that does not bind is omitted, never a load failure.
//
//go:embed capability-guidance.v1.json
var EmbeddedGuidance []byte

// LayerNames lists the embedded registry layers ("agentdojo-banking", …): extra
// capability-registry.v1 documents a worker may load on top of the base registry, for example
// the AgentDojo suites whose capabilities are defined by JSON Schema and served by replay.
func LayerNames() []string {
	ents, _ := fs.Glob(layerFS, "layers/*.v1.json")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(e, "layers/"), ".v1.json"))
	}
	sort.Strings(out)
	return out
}

// Layer returns the embedded layer document called name. Unknown names are an error listing
// the known ones.
func Layer(name string) (Source, error) {
	b, err := layerFS.ReadFile("layers/" + name + ".v1.json")
	if err != nil {
		return Source{}, fmt.Errorf("registry: unknown layer %q (known: %s)", name, strings.Join(LayerNames(), ", "))
	}
	return Source{Name: "layer " + name, Data: b}, nil
}

// LayerPolicy returns the embedded policy sidecar of the layer called name
// (registry/policies/<name>.v1.json, GeneratePolicy's output for the layer).
func LayerPolicy(name string) (Source, error) {
	b, err := layerFS.ReadFile("policies/" + name + ".v1.json")
	if err != nil {
		return Source{}, fmt.Errorf("registry: layer %q has no embedded policy (known layers: %s)", name, strings.Join(LayerNames(), ", "))
	}
	return Source{Name: "policy of layer " + name, Data: b}, nil
}

// LayerCedar returns the shipped Cedar policy of the layer called name
// (registry/policies/<name>.cedar, issue 37); ok is false when the layer ships none.
func LayerCedar(name string) (src Source, ok bool) {
	b, err := layerFS.ReadFile("policies/" + name + ".cedar")
	if err != nil {
		return Source{}, false
	}
	return Source{Name: "policies/" + name + ".cedar", Data: b}, true
}

// Base returns the embedded base registry document.
func Base() Source { return Source{Name: "registry/capability-registry.v1.json", Data: Embedded} }

// BasePolicy returns the embedded policy sidecar of the base registry.
func BasePolicy() Source {
	return Source{Name: "registry/capability-authorization-policy.v1.json", Data: EmbeddedPolicy}
}

// Entries decodes the entries of a source without binding, for tooling that must list them
// (for example to bind schema-defined implementations per entry).
func Entries(src Source) ([]Entry, error) {
	doc, err := decodeDocument(src.Data)
	if err != nil {
		return nil, fmt.Errorf("registry: %s: %w", src.Name, err)
	}
	return doc.Entries, nil
}
