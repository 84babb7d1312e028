package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// PolicySchemaVersion is the discriminator every policy sidecar carries in "schema/v".
const PolicySchemaVersion = "capability-authorization-policy.v1"

// Autonomy is what the policy lets a capability do without a human (stage 3).
type Autonomy string

// Autonomy values. Automatic is allowed only where the registry declares the capability
// local and read-only (the structural rule); Confirm waits for a human; Deny refuses every
// call at stage 3.
const (
	AutonomyAutomatic Autonomy = "automatic"
	AutonomyConfirm   Autonomy = "confirm"
	AutonomyDeny      Autonomy = "deny"
	// AutonomyAutomaticWhenUserProvided (issue 24): the call runs without a human when every
	// argument value that leaves the machine appears literally in the principal's own messages
	// of the conversation (internal/provenance: Report.UserProvided), and is confirmed like
	// AutonomyConfirm otherwise. Only for capabilities without side effect (a web fetch of the
	// URL the user typed); refused at load for anything that writes (RulePolicyUserProvided).
	AutonomyAutomaticWhenUserProvided Autonomy = "automatic-when-user-provided"
)

// AnyPrincipal is the principal entry that applies to every principal not declared by name.
const AnyPrincipal = "*"

// PolicyEntry is the policy of one capability/id@version.
type PolicyEntry struct {
	ID             string   `json:"capability/id"`
	Version        int      `json:"version"`
	GrantsRequired []string `json:"grants/required"`
	Autonomy       Autonomy `json:"autonomy"`
	// DistinctApprover requires the approver of a confirmation to differ from the turn's
	// principal (the four-eyes rule; it lived in the registry's airlock block before).
	DistinctApprover bool `json:"approval/distinct-approver"`
	// ApproverGroups, when set, are the approver groups (the approvers file's "groups",
	// internal/approvers) whose members may decide this capability's confirmations; a decision
	// by anyone else is refused approver_ineligible. Empty: every approver (issue 21, item 2).
	ApproverGroups []string `json:"approval/groups,omitempty"`
	// Quorum is how many distinct eligible approvals a confirmation needs before the call
	// runs, each bound like a single approval (0 or 1: one; at most MaxQuorum). One denial
	// denies.
	Quorum int `json:"approval/quorum,omitempty"`
	// Passkey requires every decision on this capability's confirmations (approve, deny,
	// edit; each of a quorum) to carry a WebAuthn assertion by one of the deciding approver's
	// registered passkeys whose challenge is the decision's MAC, so the approver's
	// authenticator signs exactly that confirmation, decision and argument digest (issue 21,
	// item 3; internal/passkey). A decision without one is refused passkey_required: the CLI
	// cannot decide such a call, the approver page can.
	Passkey bool `json:"approval/passkey,omitempty"`
}

// MaxQuorum bounds PolicyEntry.Quorum.
const MaxQuorum = 9

// Approvals is how many distinct approvals the entry's confirmations need (1 at least).
func (p PolicyEntry) Approvals() int { return max(p.Quorum, 1) }

// Key is "id@version".
func (p PolicyEntry) Key() string { return fmt.Sprintf("%s@%d", p.ID, p.Version) }

// PrincipalGrants is one principal and the grants it holds.
type PrincipalGrants struct {
	Principal string   `json:"principal"`
	Grants    []string `json:"grants"`
}

// PolicyDocument is a whole capability-authorization-policy.v1 file.
type PolicyDocument struct {
	SchemaV      string            `json:"schema/v"`
	Revision     string            `json:"revision"`
	Grants       []string          `json:"grants"`
	Principals   []PrincipalGrants `json:"principals"`
	Capabilities []PolicyEntry     `json:"capabilities"`
}

// Policy is the merged, validated policy of a loaded registry (every policy document).
type Policy struct {
	byKey      map[string]PolicyEntry
	principals map[string][]string // principal -> grants (union over documents)
	revision   string
}

// Entry returns the policy entry of a capability; ok is false when it has none (denied).
func (p *Policy) Entry(key string) (PolicyEntry, bool) {
	if p == nil {
		return PolicyEntry{}, false
	}
	e, ok := p.byKey[key]
	return e, ok
}

// Principals lists the declared principals (AnyPrincipal included), sorted.
func (p *Policy) Principals() []string {
	out := make([]string, 0, len(p.principals))
	for k := range p.principals {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// GrantsOf returns the grants a principal holds: its own entry, else the AnyPrincipal entry;
// ok is false when neither exists (an unknown principal).
func (p *Policy) GrantsOf(principal string) (grants []string, ok bool) {
	if g, ok := p.principals[principal]; ok && principal != "" {
		return g, true
	}
	g, ok := p.principals[AnyPrincipal]
	return g, ok
}

// Refusal codes of the runtime policy gate (stage 3).
const (
	// PolicyNoEntry: the capability has no policy entry (no entry = deny).
	PolicyNoEntry = "no_policy"
	// PolicyDenied: the policy's autonomy for the capability is deny.
	PolicyDenied = "policy_denied"
	// PolicyUnknownPrincipal: the turn's principal is neither declared nor covered by "*".
	PolicyUnknownPrincipal = "unknown_principal"
	// PolicyUngranted: the principal lacks a grant the capability requires.
	PolicyUngranted = "ungranted"
)

// Authorization is the runtime policy gate's verdict for one capability and principal.
type Authorization struct {
	// Code is "" when permitted, else one of the Policy* refusal codes; Detail says why.
	Code, Detail string
	// Automatic: the call may run without a human (policy automatic and structurally
	// allowed). DistinctApprover: the four-eyes rule applies.
	Automatic        bool
	DistinctApprover bool
	// IfUserProvided: not automatic as such, but the policy lets the call run without a human
	// when every leaving argument value is the principal's own (AutonomyAutomaticWhenUserProvided;
	// the executor checks that on the turn's context).
	IfUserProvided bool
}

// Authorize is the runtime policy gate (executor stage 3) for principal calling c: the
// capability needs a policy entry, autonomy other than deny, and the principal (by name, or
// "*") must hold every grant the entry requires. Registration never implies permission.
func (r *Registry) Authorize(c *Capability, principal string) Authorization {
	pe, ok := r.policy.Entry(c.Key())
	if !ok {
		return Authorization{Code: PolicyNoEntry, Detail: c.Key() + " has no entry in the authorization policy (denied)"}
	}
	if pe.Autonomy == AutonomyDeny {
		return Authorization{Code: PolicyDenied, Detail: "the authorization policy denies " + c.Key()}
	}
	held, ok := r.policy.GrantsOf(principal)
	if !ok {
		return Authorization{Code: PolicyUnknownPrincipal, Detail: fmt.Sprintf("principal %q is not in the authorization policy", principal)}
	}
	var missing []string
	for _, g := range pe.GrantsRequired {
		if !slices.Contains(held, g) {
			missing = append(missing, g)
		}
	}
	if len(missing) > 0 {
		return Authorization{Code: PolicyUngranted, Detail: fmt.Sprintf("principal %q lacks %s required by %s", principal, strings.Join(missing, ", "), c.Key())}
	}
	return Authorization{Automatic: pe.Autonomy == AutonomyAutomatic && c.Automatic(), DistinctApprover: pe.DistinctApprover,
		IfUserProvided: pe.Autonomy == AutonomyAutomaticWhenUserProvided && c.Airlock.SideEffect == SideEffectNone}
}

// Policy returns the loaded authorization policy.
func (r *Registry) Policy() *Policy { return r.policy }

// checkPolicies validates the policy documents against the loaded entries and merges them.
func checkPolicies(docs []namedPolicy, broken int, entries map[string]Entry) (*Policy, []Diagnostic) {
	p := &Policy{byKey: map[string]PolicyEntry{}, principals: map[string][]string{}}
	var ds []Diagnostic
	if len(docs) == 0 && broken == 0 {
		ds = append(ds, Diagnostic{Rule: RulePolicyMissing, Message: "no " + PolicySchemaVersion + " document is loaded: every capability would be denied"})
	}
	for _, nd := range docs {
		d := nd.doc
		bad := func(entry string, rule Rule, format string, a ...any) {
			ds = append(ds, Diagnostic{Source: nd.source, Entry: entry, Rule: rule, Message: fmt.Sprintf(format, a...)})
		}
		declared := map[string]bool{}
		for _, g := range d.Grants {
			declared[g] = true
		}
		seen := map[string]bool{}
		for _, pg := range d.Principals {
			if seen[pg.Principal] {
				bad("principal "+pg.Principal, RulePolicyPrincipalRef, "principal %q is declared twice", pg.Principal)
			}
			seen[pg.Principal] = true
			for _, g := range pg.Grants {
				if !declared[g] {
					bad("principal "+pg.Principal, RulePolicyPrincipalRef, "grant %q is not declared in grants", g)
				}
				if !slices.Contains(p.principals[pg.Principal], g) {
					p.principals[pg.Principal] = append(p.principals[pg.Principal], g)
				}
			}
			if _, ok := p.principals[pg.Principal]; !ok {
				p.principals[pg.Principal] = []string{}
			}
		}
		for _, pe := range d.Capabilities {
			k := pe.Key()
			e, ok := entries[k]
			if !ok {
				bad(k, RulePolicyCapabilityRef, "the policy names %s, which the registry does not register", k)
				continue
			}
			if _, dup := p.byKey[k]; dup {
				bad(k, RulePolicyCapabilityUnique, "%s has more than one policy entry", k)
				continue
			}
			for _, g := range pe.GrantsRequired {
				if !declared[g] {
					bad(k, RulePolicyPrincipalRef, "required grant %q is not declared in grants", g)
				}
			}
			// Reserved and non-dispatchable entries are refused at every gate; the rule is
			// checked again when a reload makes one admissible.
			admissible := e.Status != StatusReserved && e.Flags.Dispatchable
			if admissible && pe.Autonomy == AutonomyAutomaticWhenUserProvided && e.Airlock.SideEffect != SideEffectNone {
				bad(k, RulePolicyUserProvided, "autonomy automatic-when-user-provided, but the registry declares side-effect %q (only capabilities without side effect may run on the user's own values without a human)",
					e.Airlock.SideEffect)
			}
			if admissible && pe.Autonomy == AutonomyAutomatic && !e.Automatic() {
				bad(k, RulePolicyAutonomy, "autonomy automatic, but the registry declares side-effect %q and network %q (only local, read-only capabilities may run without a human)",
					e.Airlock.SideEffect, e.Airlock.Network)
			}
			p.byKey[k] = pe
		}
	}
	return p, ds
}

type namedPolicy struct {
	source string
	doc    PolicyDocument
}

// StructuralPolicy generates a policy document for the entries of sources (registry
// documents; policy documents among them are skipped): every dispatchable entry gets autonomy
// automatic where the registry declares it local and read-only and confirm otherwise, requires
// the grant "<id's first segment>" and every principal ("*") holds every grant. distinct lists
// the capability/ids whose confirmations need an approver other than the requester. It is for
// tests and generated evaluation layers; an operator's policy is written, not generated.
// Documents that do not parse are skipped (Load reports them).
func StructuralPolicy(name, revision string, distinct func(Entry) bool, sources ...Source) Source {
	doc := PolicyDocument{SchemaV: PolicySchemaVersion, Revision: revision, Grants: []string{}, Capabilities: []PolicyEntry{}}
	all := PrincipalGrants{Principal: AnyPrincipal, Grants: []string{}}
	for _, src := range sources {
		d, err := decodeDocument(src.Data)
		if err != nil || d.SchemaV != SchemaVersion {
			continue
		}
		for _, e := range d.Entries {
			if !e.Flags.Dispatchable || e.Status == StatusReserved {
				continue
			}
			grant := grantOf(e.ID)
			if !slices.Contains(doc.Grants, grant) {
				doc.Grants = append(doc.Grants, grant)
				all.Grants = append(all.Grants, grant)
			}
			pe := PolicyEntry{ID: e.ID, Version: e.Version, GrantsRequired: []string{grant}, Autonomy: AutonomyConfirm}
			if e.Automatic() {
				pe.Autonomy = AutonomyAutomatic
			}
			if distinct != nil {
				pe.DistinctApprover = distinct(e)
			}
			doc.Capabilities = append(doc.Capabilities, pe)
		}
	}
	doc.Principals = []PrincipalGrants{all}
	return Source{Name: name, Data: mustJSON(doc)}
}

// grantOf is the default grant of a generated policy entry: the capability id's namespace
// (its segments but the last), or the id itself when it has one segment.
func grantOf(id string) string {
	if i := strings.LastIndexByte(id, '.'); i > 0 && reBareID.MatchString(id) {
		return id[:i]
	}
	if reBareID.MatchString(id) {
		return id
	}
	return "custom"
}

// WithStructuralPolicy returns sources plus StructuralPolicy over them (no four-eyes rule):
// the policy tests and tools use for a registry they built in code.
func WithStructuralPolicy(sources ...Source) []Source {
	return append(slices.Clone(sources), StructuralPolicy("structural policy", "structural", nil, sources...))
}

// mustJSON renders a generated document (plain structs: marshalling cannot fail).
func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return []byte("null")
	}
	return append(b, '\n')
}
