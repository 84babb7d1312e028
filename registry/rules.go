package registry

import (
	"fmt"
	"strings"
)

// Rule names one check the registry or its policy sidecar must pass at load (seed P072 plus
// the Airlock block). Every Diagnostic carries exactly one Rule; registry/testdata/invalid
// holds one failing fixture per rule, named after it.
type Rule string

// Rules of the capability-registry.v1 document (P072 §1 and the Airlock block).
const (
	// RuleDocumentParse: the document is not one JSON value (P072 "load-time fail-closed").
	RuleDocumentParse Rule = "document-parse"
	// RuleSchemaVersion: "schema/v" is the capability-registry.v1 discriminator.
	RuleSchemaVersion Rule = "schema-version"
	// RuleStrictShape: no key outside the schema (the shape gate is strict).
	RuleStrictShape Rule = "strict-shape"
	// RuleNonEmpty: a registry with no entries is refused, never an empty allow-set.
	RuleNonEmpty Rule = "non-empty"
	// RuleIDGrammar: capability/id matches one of the four P072 shapes.
	RuleIDGrammar Rule = "id-grammar"
	// RuleIDUnique: (capability/id, version) is registered once.
	RuleIDUnique Rule = "id-unique"
	// RuleVersion: version is an integer >= 1.
	RuleVersion Rule = "version"
	// RuleOwner: every entry names its owner.
	RuleOwner Rule = "owner"
	// RuleSurfacesDeclared: surfaces is a non-empty subset of {federated, host-local}.
	RuleSurfacesDeclared Rule = "surfaces-declared"
	// RuleSurfacesDerived: surfaces equals the set recomputed from the eligibility flags.
	RuleSurfacesDerived Rule = "surfaces-derived"
	// RuleWireNamespace: wire/name starts with a known namespace (app/ host/ role/ plugin/ core/).
	RuleWireNamespace Rule = "wire-namespace"
	// RuleWireUnique: wire/name is unique in the registry.
	RuleWireUnique Rule = "wire-unique"
	// RuleStatus: status is active, deprecated or reserved.
	RuleStatus Rule = "status"
	// RuleDeprecatedDeadline: a deprecated entry declares removal/deadline (RFC 3339); no
	// other entry does.
	RuleDeprecatedDeadline Rule = "deprecated-deadline"
	// RuleFlagsExplicit: all six eligibility flags are present as booleans.
	RuleFlagsExplicit Rule = "flags-explicit"
	// RuleAirlockBlock: a dispatchable entry that is not reserved carries the airlock block
	// (entries registered for other surfaces do not need it).
	RuleAirlockBlock Rule = "airlock-block"
	// RuleModelVisibleDispatchable: a model-visible entry is dispatchable.
	RuleModelVisibleDispatchable Rule = "model-visible-dispatchable"
	// RuleToolName: airlock tool/name matches ^[a-zA-Z0-9_-]{1,64}$.
	RuleToolName Rule = "tool-name"
	// RuleToolNameUnique: tool/name is unique among the loaded entries.
	RuleToolNameUnique Rule = "tool-name-unique"
	// RuleDescription: the airlock block describes the capability to the model.
	RuleDescription Rule = "description"
	// RuleEffectClass: side-effect and network are known classes.
	RuleEffectClass Rule = "effect-class"
	// RulePerTurnCap: per-turn/cap is an integer >= 1.
	RulePerTurnCap Rule = "per-turn-cap"
	// RuleTimeout: timeout is a positive Go duration.
	RuleTimeout Rule = "timeout"
	// RuleImplementationBound: every admitted dispatchable entry has an implementation
	// (build-time and runtime completeness).
	RuleImplementationBound Rule = "implementation-bound"
	// RuleImplementationRegistered: every implementation (Go code or a JSON-Schema defined
	// capability) has a registry entry.
	RuleImplementationRegistered Rule = "implementation-registered"
	// RuleArgumentSchema: the argument schema compiles and every keyword in it is enforced
	// (formats asserted; annotation-only or unknown keywords refused).
	RuleArgumentSchema Rule = "argument-schema"
	// RuleProposalKind: airlock kind is capability or proposal; a proposal entry is local,
	// a local write (it records an inert proposal), capped at one call a turn, not idempotent
	// and dispatchable (captured, never executed).
	RuleProposalKind Rule = "proposal-kind"
	// RuleMCPPin: an MCP tool entry names its server (MCPServerNamePattern) and tool, and its
	// digest is the SHA-256 of the pinned definition's canonical form (issue 19).
	RuleMCPPin Rule = "mcp-pin"
	// RuleMCPToolUnique: two MCP servers never offer one tool name (issue 19).
	RuleMCPToolUnique Rule = "mcp-tool-unique"
	// RuleDestinationDeclared: an external capability (network external or side-effect
	// external-write) declares its destination in the airlock block (issue 19, item 4).
	RuleDestinationDeclared Rule = "destination-declared"
	// RuleDestination: the destination is well formed: a known kind; kind none only for local
	// read-only capabilities and without name or fields; a host in the form the HTTP client
	// resolves (or "*" with the URL fields); a server or system named; no field twice.
	RuleDestination Rule = "destination"
	// RuleDestinationFields: every destination field is a top-level argument of the capability.
	RuleDestinationFields Rule = "destination-fields"
	// RuleHTTP: an HTTP capability's declaration is complete and consistent (registry.HTTP).
	RuleHTTP Rule = "http"
)

// Rules of the capability-authorization-policy.v1 sidecar.
const (
	// RulePolicyParse: the policy document is not one JSON value.
	RulePolicyParse Rule = "policy-parse"
	// RulePolicySchemaVersion: "schema/v" is the capability-authorization-policy.v1 discriminator.
	RulePolicySchemaVersion Rule = "policy-schema-version"
	// RulePolicyShape: the policy matches its schema (strict: no unknown key).
	RulePolicyShape Rule = "policy-shape"
	// RulePolicyMissing: at least one policy document is loaded with the registry.
	RulePolicyMissing Rule = "policy-missing"
	// RulePolicyCapabilityRef: every policy entry names a registered capability/id@version.
	RulePolicyCapabilityRef Rule = "policy-capability-ref"
	// RulePolicyCapabilityUnique: a capability has at most one policy entry.
	RulePolicyCapabilityUnique Rule = "policy-capability-unique"
	// RulePolicyPrincipalRef: a principal is declared once per document, and every grant a
	// principal holds or a capability requires is declared in "grants".
	RulePolicyPrincipalRef Rule = "policy-principal-ref"
	// RulePolicyAutonomy: autonomy "automatic" only for capabilities the registry declares
	// local and read-only (DESIGN "Confirmation is structural").
	RulePolicyAutonomy Rule = "policy-autonomy"
	// RulePolicyUserProvided: autonomy "automatic-when-user-provided" only for capabilities the
	// registry declares without side effect (issue 24 item 3).
	RulePolicyUserProvided Rule = "policy-user-provided"
	// RuleCedarPolicy: a Cedar policy (a source named *.cedar, issue 37) parses and validates
	// against the schema generated from the loaded registry: it names only registered
	// capabilities, their arguments and the context Airlock gives, with the right types.
	RuleCedarPolicy Rule = "cedar-policy"
)

// RuleInfo describes a rule for diagnostics and the generated documentation.
type RuleInfo struct {
	Rule Rule
	// Policy is true for rules of the policy sidecar.
	Policy bool
	// Text states what the rule requires.
	Text string
}

// AllRules lists every load-time rule, registry rules first, in a stable order.
func AllRules() []RuleInfo {
	return []RuleInfo{
		{RuleDocumentParse, false, "the registry document is one JSON value (a missing or unparseable file stops the worker)"},
		{RuleSchemaVersion, false, `"schema/v" is "capability-registry.v1"`},
		{RuleStrictShape, false, "no key outside capability-registry.v1.schema.json"},
		{RuleNonEmpty, false, "at least one entry (never an empty allow-set)"},
		{RuleIDGrammar, false, "capability/id is bare dotted, core/…, sovereign (name@participant:did:key:z…) or custom (~name@…)"},
		{RuleIDUnique, false, "capability/id and version are registered once"},
		{RuleVersion, false, "version is an integer >= 1"},
		{RuleOwner, false, "owner is named"},
		{RuleSurfacesDeclared, false, "surfaces is a non-empty subset of {federated, host-local}"},
		{RuleSurfacesDerived, false, "surfaces equals the set derived from the flags (federated: advertisable, passport/eligible, federated-discovery; host-local: dispatchable, host-route)"},
		{RuleWireNamespace, false, "wire/name starts with app/, host/, role/, plugin/ or core/"},
		{RuleWireUnique, false, "wire/name is unique"},
		{RuleStatus, false, "status is active, deprecated or reserved"},
		{RuleDeprecatedDeadline, false, "a deprecated entry has removal/deadline (RFC 3339); other entries have none"},
		{RuleFlagsExplicit, false, "all six eligibility flags are present as booleans"},
		{RuleAirlockBlock, false, "a dispatchable entry that is not reserved has the airlock block"},
		{RuleModelVisibleDispatchable, false, "a model-visible entry is dispatchable"},
		{RuleToolName, false, "airlock tool/name matches ^[a-zA-Z0-9_-]{1,64}$"},
		{RuleToolNameUnique, false, "airlock tool/name is unique"},
		{RuleDescription, false, "airlock description is not empty"},
		{RuleEffectClass, false, "side-effect is none, local-write or external-write; network is local or external"},
		{RulePerTurnCap, false, "per-turn/cap is an integer >= 1"},
		{RuleTimeout, false, "timeout is a positive duration (\"10s\")"},
		{RuleImplementationBound, false, "every admitted dispatchable entry has an implementation (Go code or a JSON Schema)"},
		{RuleImplementationRegistered, false, "every implementation has an entry"},
		{RuleArgumentSchema, false, "the argument schema compiles and uses only enforced keywords (format asserted)"},
		{RuleProposalKind, false, "kind is capability or proposal; a proposal tool is dispatchable, local, local-write, capped at 1 a turn and not idempotent"},
		{RuleMCPPin, false, "an MCP tool names its server and tool, and mcp digest is sha256 of the pinned definition's canonical JSON"},
		{RuleMCPToolUnique, false, "no two MCP servers offer one tool/name"},
		{RuleDestinationDeclared, false, "an external capability (network external or side-effect external-write) declares its destination (kind, name, fields that leave)"},
		{RuleDestination, false, "destination kind is host, server, system or none; none only for local read-only capabilities; a host is written as the HTTP client resolves it (lower-case ASCII, xn-- labels) or is \"*\" with the URL fields; servers and systems are named"},
		{RuleDestinationFields, false, "every destination field is a top-level argument of the capability"},
		{RuleHTTP, false, "an http block has a known method, an absolute http(s) base URL without user info, query or fragment, its host written as contacted; path slots, query and body name declared arguments, each sent once, slots required and scalar; headers only from secrets; destination kind host on the URL's host with exactly the arguments sent"},
		{RulePolicyParse, true, "the policy document is one JSON value"},
		{RulePolicySchemaVersion, true, `"schema/v" is "capability-authorization-policy.v1"`},
		{RulePolicyShape, true, "no key outside capability-authorization-policy.v1.schema.json"},
		{RulePolicyMissing, true, "a policy document is loaded with the registry"},
		{RulePolicyCapabilityRef, true, "every policy entry names a registered capability/id and version"},
		{RulePolicyCapabilityUnique, true, "a capability has at most one policy entry"},
		{RulePolicyPrincipalRef, true, "principals are declared once; every grant held or required is declared"},
		{RulePolicyAutonomy, true, "autonomy automatic only for local, read-only capabilities"},
		{RulePolicyUserProvided, true, "autonomy automatic-when-user-provided only for capabilities without side effect"},
		{RuleCedarPolicy, true, "a Cedar policy validates against the schema generated from the registry"},
	}
}

// Diagnostic is one load problem: the document, the entry (capability/id@version, or "" for a
// document-level problem), the rule broken and what is wrong.
type Diagnostic struct {
	Source  string `json:"source"`
	Entry   string `json:"entry,omitempty"`
	Rule    Rule   `json:"rule"`
	Message string `json:"message"`
}

// String renders "source: entry: [rule] message".
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Source != "" {
		b.WriteString(d.Source + ": ")
	}
	if d.Entry != "" {
		b.WriteString(d.Entry + ": ")
	}
	fmt.Fprintf(&b, "[%s] %s", d.Rule, d.Message)
	return b.String()
}
