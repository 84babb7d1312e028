package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind says what the runtime does with an entry's calls.
type Kind string

// Entry kinds (airlock "kind"; absent means KindCapability).
const (
	// KindCapability: the executor runs the call (stages 1-6).
	KindCapability Kind = "capability"
	// KindProposal: an agent proposal tool (seed 2). Its call is captured as an inert, durable
	// proposal awaiting a human decision; it is never executed, never approves or applies
	// anything, and is offered only when the turn's context admits a target.
	KindProposal Kind = "proposal"
)

// Capability ids of the three agent proposal tools.
const (
	ProposalMemoryChange     = "proposal.memory-change"
	ProposalSelfCorrection   = "proposal.self-correction"
	ProposalFocusDeclaration = "proposal.focus-declaration"
)

// Bounds of the proposal tools' arguments, in characters (Unicode code points, as JSON
// Schema's maxLength counts them) or items.
const (
	MaxProposedText     = 32768
	MaxProposalReason   = 1000
	MaxReplacement      = 4096
	MaxEvidenceIDs      = 16
	MaxFocusObjective   = 2000
	MaxFocusPermissions = 16
)

// IsProposal reports whether the entry is an agent proposal tool.
func (e Entry) IsProposal() bool { return e.Airlock.Kind == KindProposal }

// ErrProposalNotExecutable is what a proposal tool's Invoke returns: proposal calls are
// captured by the turn, never executed. Reaching it means a proposal call took the executor
// path; the call fails closed.
var ErrProposalNotExecutable = errors.New("registry: a proposal tool is captured, never executed")

// evidenceSchema is the evidence_event_ids argument: unique ids, at most MaxEvidenceIDs.
const evidenceSchema = `{"type":"array","maxItems":16,"uniqueItems":true,"items":{"type":"string","minLength":1,"maxLength":64,"pattern":"^[a-z]+-[0-9a-f]{24}$"}}`

// proposalSchemas are the strict argument schemas of the proposal tools (no additional
// properties anywhere), by capability id at version 1.
var proposalSchemas = map[string]string{
	ProposalMemoryChange: `{"type":"object","additionalProperties":false,
		"required":["operation","proposed_text","reason","evidence_event_ids"],
		"properties":{
			"operation":{"enum":["append","replace-document"],"description":"append adds the text to the end of the memory document; replace-document replaces the whole document (its frontmatter id must stay the same)"},
			"proposed_text":{"type":"string","minLength":1,"maxLength":32768},
			"reason":{"type":"string","minLength":1,"maxLength":1000},
			"evidence_event_ids":` + evidenceSchema + `}}`,
	ProposalSelfCorrection: `{"type":"object","additionalProperties":false,
		"required":["target_output","replacement","reason","evidence_event_ids"],
		"properties":{
			"target_output":{"type":"string","pattern":"^(latest|out-[0-9a-f]{24})$","description":"the output id of one of your earlier answers in this conversation, or latest for the most recent one"},
			"replacement":{"type":"string","minLength":1,"maxLength":4096},
			"reason":{"type":"string","minLength":1,"maxLength":1000},
			"evidence_event_ids":` + evidenceSchema + `}}`,
	ProposalFocusDeclaration: `{"type":"object","additionalProperties":false,
		"required":["identity","scope","objective","budgets","requested_permissions","retirement"],
		"properties":{
			"identity":{"type":"object","additionalProperties":false,"required":["id","version"],"properties":{
				"id":{"type":"string","pattern":"^[a-z][a-z0-9-]{0,63}$"},
				"version":{"type":"integer","minimum":1,"maximum":1000000}}},
			"scope":{"type":"object","additionalProperties":false,"required":["conversations"],"properties":{
				"conversations":{"type":"array","minItems":1,"maxItems":16,"uniqueItems":true,"items":{"type":"string","minLength":1,"maxLength":200}}}},
			"objective":{"type":"string","minLength":1,"maxLength":2000},
			"budgets":{"type":"object","additionalProperties":false,"required":["max_turns","max_days"],"properties":{
				"max_turns":{"type":"integer","minimum":1,"maximum":1000},
				"max_days":{"type":"integer","minimum":1,"maximum":365}}},
			"requested_permissions":{"type":"array","maxItems":16,"uniqueItems":true,"items":{"type":"string","pattern":"^[a-z][a-z0-9-]*(\\.[a-z0-9-]+)*$"}},
			"retirement":{"type":"object","additionalProperties":false,"required":["rule"],"properties":{
				"rule":{"enum":["after-budget","objective-met","operator"]}}}}}`,
}

// ProposalImplementation is the registry's own binding of a proposal tool: its strict
// argument schema and an Invoke that refuses (ErrProposalNotExecutable). ok is false for an
// id or version Airlock defines no proposal tool for (RuleImplementationBound then applies).
func ProposalImplementation(id string, version int) (Implementation, bool) {
	s, ok := proposalSchemas[id]
	if !ok || version != 1 {
		return Implementation{}, false
	}
	var compact json.RawMessage
	if err := json.Unmarshal([]byte(s), &compact); err != nil {
		return Implementation{}, false
	}
	return Implementation{ID: id, Version: version, Schema: compact,
		Invoke: func(context.Context, Invocation) (Output, error) {
			return Output{Error: "proposal tools are captured, never executed"}, ErrProposalNotExecutable
		}}, true
}

// checkProposalEntry enforces RuleProposalKind on one entry with the airlock block.
func checkProposalEntry(src string, e Entry) []Diagnostic {
	a := e.Airlock
	var p []Diagnostic
	bad := func(format string, args ...any) {
		p = append(p, Diagnostic{Source: src, Entry: e.Key(), Rule: RuleProposalKind, Message: fmt.Sprintf(format, args...)})
	}
	switch a.Kind {
	case "", KindCapability:
		return nil
	case KindProposal:
	default:
		bad("kind %q is neither capability nor proposal", a.Kind)
		return p
	}
	if !e.Flags.Dispatchable {
		bad("a proposal tool is dispatchable (to the capture, never the executor)")
	}
	if a.Network != NetworkLocal || a.SideEffect != SideEffectLocalWrite {
		bad("a proposal tool is local and a local write (it records an inert proposal), not %s/%s", a.Network, a.SideEffect)
	}
	if a.PerTurnCap != 1 {
		bad("a proposal tool is capped at 1 call a turn, not %d", a.PerTurnCap)
	}
	if a.Idempotent {
		bad("a proposal tool is not idempotent")
	}
	return p
}

// ProposalCatalog is the proposal tools the registry-admission gate admits for UseCatalog at
// now (allow, when non-nil, limits them to those ids), in capability/id order. It is not an
// offer: trusted code offers a tool only when the turn's context snapshot admits its target
// (internal/proposals).
func (r *Registry) ProposalCatalog(allow func(id string) bool, now time.Time) []CatalogEntry {
	var out []CatalogEntry
	for _, c := range r.caps {
		if c.Airlock.Kind != KindProposal || !r.Eligible(c, UseCatalog, now).Admitted() {
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
