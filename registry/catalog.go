package registry

import (
	"encoding/json"
	"fmt"
	"time"
)

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

// Use is what a capability is being admitted for at the registry-admission gate.
type Use string

// Uses of the registry-admission gate (P072: "registered and eligible for the surface/use in
// play"). Catalog: model-visible ∧ dispatchable ∧ admitted. Resolve: dispatchable ∧ admitted.
const (
	UseCatalog Use = "catalog"
	UseResolve Use = "resolve"
)

// Registry-admission refusal codes (stage 1, resolve).
const (
	// RefusalUnregistered: no entry (or no entry under that tool name).
	RefusalUnregistered = "unknown_capability"
	// RefusalReserved: registered but reserved: refused at every gate.
	RefusalReserved = "reserved"
	// RefusalPastDeadline: deprecated and past its removal/deadline.
	RefusalPastDeadline = "deprecated_past_deadline"
	// RefusalNotDispatchable: registered but not eligible for dispatch.
	RefusalNotDispatchable = "not_dispatchable"
	// RefusalNotModelVisible: dispatchable but not offered to the model.
	RefusalNotModelVisible = "not_model_visible"
)

// Eligibility is the registry-admission gate's verdict. Code is "" when admitted; Warning is
// set for a deprecated entry admitted before its deadline (operators must see it).
type Eligibility struct {
	Code, Detail string
	Warning      string
}

// Admitted reports whether the gate admitted the capability.
func (e Eligibility) Admitted() bool { return e.Code == "" }

// Eligible is the registry-admission gate (the second of three; independent of the shape
// gate at load and of the policy gate, Authorize): c must be admitted by status at now (active;
// deprecated strictly before its removal/deadline; never reserved), dispatchable, and for
// UseCatalog model-visible. now is the turn's clock (the workflow's time), so a replayed or
// retried step judges the deadline as the turn saw it.
func (r *Registry) Eligible(c *Capability, use Use, now time.Time) Eligibility {
	switch c.Status {
	case StatusReserved:
		return Eligibility{Code: RefusalReserved, Detail: c.Key() + " is reserved: registered but not admitted"}
	case StatusDeprecated:
		dl, ok := c.Deadline()
		if !ok || !now.Before(dl) {
			return Eligibility{Code: RefusalPastDeadline, Detail: fmt.Sprintf("%s was deprecated and removed at %s", c.Key(), c.RemovalDeadline)}
		}
	case StatusActive:
	default:
		return Eligibility{Code: RefusalReserved, Detail: fmt.Sprintf("%s has status %q", c.Key(), c.Status)}
	}
	if !c.Flags.Dispatchable || c.Impl.Invoke == nil {
		return Eligibility{Code: RefusalNotDispatchable, Detail: c.Key() + " is not registered as dispatchable"}
	}
	if use == UseCatalog && !c.Airlock.ModelVisible {
		return Eligibility{Code: RefusalNotModelVisible, Detail: c.Key() + " is not offered to the model"}
	}
	if c.Status == StatusDeprecated {
		return Eligibility{Warning: fmt.Sprintf("%s is deprecated and will be refused from %s", c.Key(), c.RemovalDeadline)}
	}
	return Eligibility{}
}

// Catalog generates the model-facing projection of the registry: every entry the
// registry-admission gate admits for UseCatalog at now, in capability/id order. It is computed
// on every request (RFC-0004: the catalog is generated from the registry, never cached or
// hand-written). allow, when non-nil, limits the catalog to those capability ids (a turn's
// scope). The catalog is not a permission: the policy gate still decides each call.
func (r *Registry) Catalog(allow func(id string) bool, now time.Time) []CatalogEntry {
	var out []CatalogEntry
	for _, c := range r.caps {
		if !r.Eligible(c, UseCatalog, now).Admitted() {
			continue
		}
		if allow != nil && !allow(c.ID) {
			continue
		}
		if c.Airlock.Kind == KindProposal {
			continue // offered only when a turn's context admits a target (ProposalCatalog)
		}
		if c.Unavailable() != nil {
			continue // not offered while its provider is down or changed (issue 19)
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
