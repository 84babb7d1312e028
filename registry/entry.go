package registry

import (
	"fmt"
	"regexp"
	"time"
)

// SchemaVersion is the discriminator every registry document carries in "schema/v".
const SchemaVersion = "capability-registry.v1"

// Status is an entry's admission status (P072 "status semantics at the gate").
type Status string

// Entry statuses: active is admitted; reserved is registered but refused; deprecated is
// admitted with an operator-visible warning.
const (
	StatusActive     Status = "active"
	StatusReserved   Status = "reserved"
	StatusDeprecated Status = "deprecated"
)

// SideEffect is the registry-declared effect class of a capability (never taken from the model).
type SideEffect string

// Side-effect classes.
const (
	SideEffectNone          SideEffect = "none"
	SideEffectLocalWrite    SideEffect = "local-write"
	SideEffectExternalWrite SideEffect = "external-write"
)

// Network is the registry-declared reach of a capability.
type Network string

// Network classes.
const (
	NetworkLocal    Network = "local"
	NetworkExternal Network = "external"
)

// Surface is one of the P072 surfaces an entry is registered for.
type Surface string

// Surfaces (P072: a non-empty subset, derived from the eligibility flags).
const (
	SurfaceFederated Surface = "federated"
	SurfaceHostLocal Surface = "host-local"
)

// Flags are P072's explicit eligibility flags; an unflagged use is denied.
type Flags struct {
	Dispatchable       bool `json:"dispatchable"`
	Advertisable       bool `json:"advertisable"`
	PassportEligible   bool `json:"passport/eligible"`
	SigningDomain      bool `json:"signing-domain"`
	HostRoute          bool `json:"host-route"`
	FederatedDiscovery bool `json:"federated-discovery"`
}

// Airlock is the Airlock-specific block of an entry: how the capability is shown to the model
// and how the executor must treat it.
type Airlock struct {
	// ToolName is the tool name the model sees (^[a-zA-Z0-9_-]{1,64}$), unique in the registry.
	ToolName    string     `json:"tool/name"`
	Description string     `json:"description"`
	SideEffect  SideEffect `json:"side-effect"`
	Network     Network    `json:"network"`
	// PerTurnCap is the most calls of this capability one turn may make (>= 1).
	PerTurnCap int `json:"per-turn/cap"`
	// Timeout is the execute deadline as a Go duration string ("15s").
	Timeout      string `json:"timeout"`
	ModelVisible bool   `json:"model-visible"`
	// Idempotent, when true, declares that running the capability twice with the same
	// arguments has the effect of running it once. Only then may an execution interrupted by a
	// crash be started again (the outcome counts the attempts); every other confirmed or
	// effectful capability runs at most once per proposal and an interrupted one is
	// outcome_unknown (DESIGN "At most once for effects").
	Idempotent bool `json:"idempotent,omitempty"`
	// SchemaRef, when set, names an external JSON Schema source for capabilities defined by
	// schema rather than Go code (for example "agentdojo:banking/send_money"); the bound
	// Implementation supplies the schema itself.
	SchemaRef string `json:"schema/ref,omitempty"`
	// Kind is KindCapability (absent: executed by the executor) or KindProposal (an agent
	// proposal tool: captured as an inert record awaiting a human decision, never executed;
	// offered only through ProposalCatalog).
	Kind Kind `json:"kind,omitempty"`
	// MCP, when set, makes the entry a tool of an MCP server with its definition pinned by
	// digest (registry/mcp.go; bridged by internal/mcp).
	MCP *MCP `json:"mcp,omitempty"`
	// Destination declares where a call sends what (see Destination); required for external
	// capabilities (RuleDestinationDeclared).
	Destination *Destination `json:"destination,omitempty"`
	// HTTP, when set, makes the entry an HTTP capability served from its declaration alone
	// (see HTTP); internal/capabilities binds it.
	HTTP *HTTP `json:"http,omitempty"`
}

// Entry is one capability-registry.v1 entry.
type Entry struct {
	ID       string    `json:"capability/id"`
	Version  int       `json:"version"`
	Owner    string    `json:"owner"`
	Surfaces []Surface `json:"surfaces"`
	WireName string    `json:"wire/name"`
	Status   Status    `json:"status"`
	// RemovalDeadline is the RFC 3339 instant after which a deprecated entry is refused
	// (required for deprecated entries, absent otherwise).
	RemovalDeadline string `json:"removal/deadline,omitempty"`
	Flags           Flags  `json:"flags"`
	// Airlock is required for dispatchable entries that are not reserved; entries P072
	// registers for other surfaces (federated-only, reserved) may leave it out.
	Airlock Airlock `json:"airlock,omitzero"`
}

// Deadline is the parsed removal/deadline of a deprecated entry; ok is false when the entry
// has none (validated at load).
func (e Entry) Deadline() (t time.Time, ok bool) {
	if e.RemovalDeadline == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, e.RemovalDeadline)
	return t, err == nil
}

// Key is "id@version", the identity used in summaries, budgets and audit rows.
func (e Entry) Key() string { return fmt.Sprintf("%s@%d", e.ID, e.Version) }

// ReadOnly reports whether the capability declares no side effect.
func (e Entry) ReadOnly() bool { return e.Airlock.SideEffect == SideEffectNone }

// Automatic reports whether the capability may run without a human confirmation: only
// capabilities that are read-only and either local (RFC-0004; DESIGN "Confirmation is
// structural") or a read of a named internal service (InternalRead, issue 34 item 5: the
// destination is declared internal and the worker dials it only at non-public addresses).
func (e Entry) Automatic() bool {
	return e.ReadOnly() && (e.Airlock.Network == NetworkLocal || e.InternalRead())
}

// AtMostOnce reports whether executions go through the execution ledger: every capability that
// needs a confirmation (a human approved one execution) and every one with a side effect.
// Only automatic calls (local and read-only) skip it and may be retried (at least once).
func (e Entry) AtMostOnce() bool { return !e.Automatic() || !e.ReadOnly() }

// TimeoutDuration is the parsed execute timeout (validated at load).
func (e Entry) TimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(e.Airlock.Timeout)
	return d
}

// Document is a whole capability-registry.v1 file.
type Document struct {
	SchemaV  string  `json:"schema/v"`
	Revision string  `json:"revision"`
	Entries  []Entry `json:"entries"`
}

var (
	// P072 identifier grammar: bare dotted, core/ slash, sovereign and operator/custom shapes.
	reBareID      = regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z0-9-]+)*$`)
	reCoreID      = regexp.MustCompile(`^core/[a-z][a-z0-9-]*$`)
	reSovereignID = regexp.MustCompile(`^[a-z][a-z0-9.-]*@(participant|org):did:key:z[1-9A-HJ-NP-Za-km-z]+$`)
	reCustomID    = regexp.MustCompile(`^~[a-z][a-z0-9.-]*@(participant|org):did:key:z[1-9A-HJ-NP-Za-km-z]+$`)
	// ToolNamePattern is the grammar of model-facing tool names.
	ToolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// ValidID reports whether id matches one of P072's four capability/id shapes.
func ValidID(id string) bool {
	return reBareID.MatchString(id) || reCoreID.MatchString(id) || reSovereignID.MatchString(id) || reCustomID.MatchString(id)
}

// derivedSurfaces recomputes the surfaces set from the flags (P072: surfaces is a checked
// summary, not a second authority).
func derivedSurfaces(f Flags) map[Surface]bool {
	s := map[Surface]bool{}
	if f.Advertisable || f.PassportEligible || f.FederatedDiscovery {
		s[SurfaceFederated] = true
	}
	if f.HostRoute || f.Dispatchable {
		s[SurfaceHostLocal] = true
	}
	return s
}
