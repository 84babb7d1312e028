package registry

import (
	"fmt"
	"path/filepath"
	"strings"
)

// A layer is named in AIRLOCK_REGISTRY_LAYERS (and --layers) either by the name of an embedded
// layer ("agentdojo-banking") or by a file: anything holding a path separator or ending in
// ".json". A file layer is a capability-registry.v1 document loaded under exactly the same
// gates as the embedded ones, with its policy sidecar beside it (LayerFilePaths). Issue 19,
// item 1: teams deploy their own layers without rebuilding Airlock.

// IsLayerFile reports whether spec names a layer file rather than an embedded layer.
func IsLayerFile(spec string) bool {
	return strings.ContainsRune(spec, '/') || strings.ContainsRune(spec, filepath.Separator) || strings.HasSuffix(spec, ".json")
}

// LayerFilePaths splits a layer file spec into the layer document's path and its policy
// sidecar's: "LAYER.json=POLICY.json" names both; "LAYER.json" alone has its policy at
// "LAYER.policy.json" beside it ("tickets.v1.json" → "tickets.v1.policy.json").
func LayerFilePaths(spec string) (layer, policy string) {
	if l, p, ok := strings.Cut(spec, "="); ok {
		return l, p
	}
	return spec, strings.TrimSuffix(spec, ".json") + ".policy.json"
}

// LayerFile reads a layer file and its policy sidecar (LayerFilePaths). A missing or unreadable
// file is an error naming it: a layer is never silently skipped.
func LayerFile(spec string) (layer, policy Source, err error) {
	lp, pp := LayerFilePaths(spec)
	if layer, err = FileSource(lp); err != nil {
		return Source{}, Source{}, fmt.Errorf("registry: layer file: %w", err)
	}
	if policy, err = FileSource(pp); err != nil {
		return Source{}, Source{}, fmt.Errorf("registry: policy of layer file %s (give LAYER.json=POLICY.json to name another): %w", lp, err)
	}
	return layer, policy, nil
}

// LayerSources returns the layer document and policy sidecar spec names: an embedded layer
// (Layer, LayerPolicy) or a layer file (LayerFile).
func LayerSources(spec string) (layer, policy Source, err error) {
	if IsLayerFile(spec) {
		return LayerFile(spec)
	}
	if layer, err = Layer(spec); err != nil {
		return Source{}, Source{}, err
	}
	if policy, err = LayerPolicy(spec); err != nil {
		return Source{}, Source{}, err
	}
	return layer, policy, nil
}
