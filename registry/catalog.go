package registry

import "encoding/json"

// Tool is one model-facing catalog entry: wire tool name, description and argument schema.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// CatalogEntry adds what the executor needs to know per advertised name without another
// lookup: the version advertised and the per-turn cap (budgets are checked in the workflow).
type CatalogEntry struct {
	Tool
	CapabilityID string `json:"capability_id"`
	Version      int    `json:"version"`
	PerTurnCap   int    `json:"per_turn_cap"`
}

// Catalog generates the model-facing projection of the registry: every active or deprecated,
// dispatchable, model-visible entry, in capability/id order. It is computed on every request
// (RFC-0004: the catalog is generated from the registry, never cached or hand-written).
// allow, when non-nil, limits the catalog to those capability ids (a turn's scope).
func (r *Registry) Catalog(allow func(id string) bool) []CatalogEntry {
	var out []CatalogEntry
	for _, c := range r.caps {
		if c.Status == StatusReserved || !c.Flags.Dispatchable || !c.Airlock.ModelVisible {
			continue
		}
		if allow != nil && !allow(c.ID) {
			continue
		}
		out = append(out, CatalogEntry{
			Tool:         Tool{Name: c.Airlock.ToolName, Description: c.Airlock.Description, Parameters: c.Schema},
			CapabilityID: c.ID,
			Version:      c.Version,
			PerTurnCap:   c.Airlock.PerTurnCap,
		})
	}
	return out
}
