// Package proposals is the trusted side of agent proposals (seed 2): the context snapshot a
// turn's proposal offer is built from, the strict validation of a proposal call against it,
// the inert proposal records, the fixed acknowledgements, human decisions, the correction
// projector, the memory materializer and the private training export.
//
// A proposal tool lets the model ask trusted machinery to preserve a bounded change; nothing
// here lets the model edit, approve, apply or execute anything. Every binding (memory
// document, correction target, evidence) comes from the snapshot, never from the model.
package proposals

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/registry"
)

// Proposal kinds (agent_proposals.kind).
const (
	KindMemory     = "memory-change"
	KindCorrection = "self-correction"
	KindFocus      = "focus-declaration"
)

// KindOf maps a proposal tool's capability id to its kind ("" for anything else).
func KindOf(capabilityID string) string {
	switch capabilityID {
	case registry.ProposalMemoryChange:
		return KindMemory
	case registry.ProposalSelfCorrection:
		return KindCorrection
	case registry.ProposalFocusDeclaration:
		return KindFocus
	}
	return ""
}

// StateAgentProposed is the literal proposalState of every captured proposal.
const StateAgentProposed = "agent-proposed"

// OutputContract is the output contract of a conversation turn's answer: plain text.
const OutputContract = "conversation-text@1"

// MemoryPath is the normalized path of the memory document inside the memory root.
const MemoryPath = "memory.md"

// MemoryContentType is the content type of the memory document.
const MemoryContentType = "text/markdown"

// Refusal codes of proposal calls that create no proposal (audited with the call, content-free).
const (
	RefusedTooMany          = "too_many_proposals"
	RefusedDuplicateKind    = "duplicate_proposal_kind"
	RefusedNotOffered       = "proposal_not_offered"
	RefusedUnknownTool      = "unknown_proposal_tool"
	RefusedEvidence         = "evidence_not_admitted"
	RefusedTarget           = "target_not_admitted"
	RefusedNoMemory         = "memory_not_admitted"
	RefusedInvalid          = "invalid_proposal"
	RefusedPolicy           = "proposal_not_authorized"
	RefusedMixed            = "mixed_proposal_and_invocation"
	MaxProposalCallsPerTurn = 3
)

// id is prefix + "-" + the first 24 hex digits of SHA-256 over the length-prefixed parts:
// deterministic, so a retry or replay names the same record.
func id(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return prefix + "-" + hex.EncodeToString(h.Sum(nil))[:24]
}

// OutputID is the id of the answer of turn workflowID.
func OutputID(workflowID string) string { return id("out", "output", workflowID) }

// InputID is the id of the user message that triggered turn workflowID.
func InputID(workflowID string) string { return id("in", "input", workflowID) }

// SnapshotID is the id of the context snapshot of round round of turn workflowID.
func SnapshotID(workflowID string, round int) string {
	return id("snap", "snapshot", workflowID, fmt.Sprint(round))
}

// ProposalID is the id of the kind proposal of turn workflowID (at most one per kind a turn).
func ProposalID(workflowID, kind string) string { return id("prop", "proposal", workflowID, kind) }

// DecisionID is the one decision identity of a proposal: the concurrency boundary.
func DecisionID(proposalID string) string { return id("pdec", "decision", proposalID) }

// JudgmentID is the id of the judgment a decision projects to.
func JudgmentID(decisionID string) string { return id("jdg", "judgment", decisionID) }

// ReceiptID is the id of the receipt of a decision.
func ReceiptID(decisionID string) string { return id("rcpt", "receipt", decisionID) }

// Digest is the hex SHA-256 of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// MemoryBinding is the exact memory document version a snapshot admits.
type MemoryBinding struct {
	Source      string `json:"source"`
	DocumentID  string `json:"document_id"`
	Path        string `json:"path"`
	VersionID   string `json:"version_id"`
	SHA256      string `json:"sha256"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
}

// CorrectionTarget is one prior delivered answer of the conversation a snapshot admits.
type CorrectionTarget struct {
	WorkflowID   string `json:"workflow_id"`
	OutputID     string `json:"output_id"`
	InputID      string `json:"input_id"`
	OutputSHA256 string `json:"output_sha256"`
	Contract     string `json:"contract"`
}

// Snapshot is the trusted context a turn's proposal offer is built from: what it admits is
// all a proposal may bind to. It is stored (store.PutSnapshot, the first write winning) once
// the model's answer names a proposal tool, before that answer leaves the round; an answer
// asked with another offer than the stored one is asked again with the stored one, so capture
// and settlement validate against the bytes the model's offer was built from.
type Snapshot struct {
	ID           string             `json:"id"`
	WorkflowID   string             `json:"workflow_id"`
	Round        int                `json:"round"`
	Conversation string             `json:"conversation"`
	Principal    string             `json:"principal"`
	InputID      string             `json:"input_id"`
	Memory       *MemoryBinding     `json:"memory,omitempty"`
	Targets      []CorrectionTarget `json:"targets"`
	Evidence     []string           `json:"evidence"`
	// Offered are the proposal tools offered with this snapshot (capability ids).
	Offered []string `json:"offered"`
}

// Encode is the snapshot's stored bytes (encoding/json of a struct: deterministic).
func (s Snapshot) Encode() []byte {
	b, _ := json.Marshal(s)
	return b
}

// DecodeSnapshot strictly decodes stored snapshot bytes.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("proposals: snapshot: %w", err)
	}
	return s, nil
}

// Admits reports whether the snapshot offers a proposal tool of capability id.
func (s Snapshot) Admits(capabilityID string) bool {
	switch capabilityID {
	case registry.ProposalMemoryChange:
		return s.Memory != nil
	case registry.ProposalSelfCorrection:
		return len(s.Targets) > 0
	case registry.ProposalFocusDeclaration:
		return true
	}
	return false
}

// Offer tailors a proposal tool's schema to the snapshot: evidence ids and correction targets
// become enums of exactly what the snapshot admits, so the model sees the ids it may cite.
// ok is false when the snapshot admits no target for the tool (it is not offered).
func (s Snapshot) Offer(c registry.CatalogEntry) (registry.CatalogEntry, bool) {
	if !s.Admits(c.CapabilityID) {
		return c, false
	}
	var sch map[string]any
	if err := json.Unmarshal(c.Parameters, &sch); err != nil {
		return c, false
	}
	props, _ := sch["properties"].(map[string]any)
	if ev, ok := props["evidence_event_ids"].(map[string]any); ok {
		items, _ := ev["items"].(map[string]any)
		if len(s.Evidence) > 0 && items != nil {
			items["enum"] = s.Evidence
		} else {
			ev["maxItems"] = 0
		}
	}
	if tg, ok := props["target_output"].(map[string]any); ok {
		enum := []string{"latest"}
		for _, t := range s.Targets {
			enum = append(enum, t.OutputID)
		}
		tg["enum"] = enum
	}
	b, err := json.Marshal(sch)
	if err != nil {
		return c, false
	}
	c.Parameters = b
	return c, true
}

// Provenance is the proposer's exact identity: the turn, its output and trigger, the tool and
// registry entry, the model and the snapshot.
type Provenance struct {
	WorkflowID     string `json:"workflow_id"`
	RunID          string `json:"run_id"`
	OutputID       string `json:"output_id"`
	InputID        string `json:"input_id"`
	Conversation   string `json:"conversation"`
	Principal      string `json:"principal"`
	CapabilityID   string `json:"capability_id"`
	Version        int    `json:"version"`
	Fingerprint    string `json:"fingerprint"`
	Model          string `json:"model"`
	SnapshotID     string `json:"snapshot_id"`
	SnapshotSHA256 string `json:"snapshot_sha256"`
}

// FocusAuthority is a focus proposal's authority: every flag literally false.
type FocusAuthority struct {
	Activation        bool `json:"activation"`
	DataExpansion     bool `json:"data_expansion"`
	ExternalActions   bool `json:"external_actions"`
	Training          bool `json:"training"`
	AdapterPromotion  bool `json:"adapter_promotion"`
	ApprovesItself    bool `json:"approves_itself"`
	ChangesPermission bool `json:"changes_permissions"`
}

// Proposal is the strict record of one captured agent proposal (agent_proposals.payload).
// It is inert: it changes no output, memory or permission.
type Proposal struct {
	ID       string     `json:"id"`
	Kind     string     `json:"kind"`
	State    string     `json:"proposal_state"`
	Proposer Provenance `json:"proposer"`
	Reason   string     `json:"reason"`
	Evidence []string   `json:"evidence_event_ids"`

	Memory       *MemoryBinding `json:"memory_target,omitempty"`
	Operation    string         `json:"operation,omitempty"`
	ProposedText string         `json:"proposed_text,omitempty"`
	TextLength   int            `json:"text_length,omitempty"`
	TextSHA256   string         `json:"text_sha256,omitempty"`

	Target      *CorrectionTarget `json:"target,omitempty"`
	Replacement string            `json:"replacement,omitempty"`

	Declaration          json.RawMessage `json:"declaration,omitempty"`
	Fingerprint          string          `json:"declaration_fingerprint,omitempty"`
	DependencyResolution string          `json:"dependency_resolution,omitempty"`
	Authority            *FocusAuthority `json:"authority,omitempty"`

	PublicationEligible    bool `json:"publication_eligible"`
	QualityEligible        bool `json:"quality_eligible"`
	ExternalExportEligible bool `json:"external_export_eligible"`
}

// Encode is the record's stored bytes.
func (p Proposal) Encode() []byte {
	b, _ := json.Marshal(p)
	return b
}

// DecodeProposal strictly decodes a stored record and checks its literal fields: state
// agent-proposed, every eligibility and authority flag false.
func DecodeProposal(b []byte) (Proposal, error) {
	var p Proposal
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("proposals: record: %w", err)
	}
	if p.State != StateAgentProposed || p.PublicationEligible || p.QualityEligible || p.ExternalExportEligible ||
		(p.Authority != nil && *p.Authority != (FocusAuthority{})) {
		return p, fmt.Errorf("proposals: record %s claims authority it cannot have", p.ID)
	}
	return p, nil
}

// memoryArgs, correctionArgs and focusArgs are the tools' arguments, strictly decoded by the
// trusted recorder (the second validation, independent of the registry's JSON Schema).
type memoryArgs struct {
	Operation    string   `json:"operation"`
	ProposedText string   `json:"proposed_text"`
	Reason       string   `json:"reason"`
	Evidence     []string `json:"evidence_event_ids"`
}

type correctionArgs struct {
	TargetOutput string   `json:"target_output"`
	Replacement  string   `json:"replacement"`
	Reason       string   `json:"reason"`
	Evidence     []string `json:"evidence_event_ids"`
}

type focusArgs struct {
	Identity struct {
		ID      string `json:"id"`
		Version int    `json:"version"`
	} `json:"identity"`
	Scope struct {
		Conversations []string `json:"conversations"`
	} `json:"scope"`
	Objective string `json:"objective"`
	Budgets   struct {
		MaxTurns int `json:"max_turns"`
		MaxDays  int `json:"max_days"`
	} `json:"budgets"`
	RequestedPermissions []string `json:"requested_permissions"`
	Retirement           struct {
		Rule string `json:"rule"`
	} `json:"retirement"`
}

// Refusal is why a proposal call created no proposal: a content-free code and a detail that
// never quotes the arguments.
type Refusal struct {
	Code, Detail string
}

func strictDecode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

func bounded(s string, max int) bool {
	return s != "" && utf8.ValidString(s) && utf8.RuneCountInString(s) <= max
}

// Build validates one proposal call against the registry entry and the snapshot and returns
// its record. It runs both validations: the registry's strict JSON Schema (stage 2 of the
// executor, bounds in characters, no additional properties) and the trusted recorder's
// independent strict decode and bound checks, then binds every target and evidence id from
// the snapshot (latest resolved to the most recent target; the literal never reaches the
// record). Any failure is a Refusal and no record.
func Build(c *registry.Capability, snap Snapshot, snapSHA string, prov Provenance, args json.RawMessage) (Proposal, *Refusal) {
	kind := KindOf(c.ID)
	if kind == "" || !c.IsProposal() {
		return Proposal{}, &Refusal{RefusedUnknownTool, "not a proposal tool"}
	}
	if !snap.Admits(c.ID) || !slices.Contains(snap.Offered, c.ID) {
		code := RefusedNotOffered
		if kind == KindMemory {
			code = RefusedNoMemory
		}
		return Proposal{}, &Refusal{code, c.Airlock.ToolName + " was not offered in this turn's context"}
	}
	if _, err := c.ValidateArguments(args); err != nil {
		code := "invalid_arguments"
		if ae, ok := err.(*registry.ArgumentError); ok {
			code = ae.Code
		}
		return Proposal{}, &Refusal{RefusedInvalid, "arguments refused by the tool's schema (" + code + ")"}
	}
	canon, err := canonical.Canonicalize(args)
	if err != nil {
		return Proposal{}, &Refusal{RefusedInvalid, "arguments are not canonical JSON"}
	}
	prov.CapabilityID, prov.Version, prov.Fingerprint = c.ID, c.Version, c.Fingerprint()
	prov.SnapshotID, prov.SnapshotSHA256 = snap.ID, snapSHA
	p := Proposal{ID: ProposalID(prov.WorkflowID, kind), Kind: kind, State: StateAgentProposed, Proposer: prov}
	evidence := func(ids []string) *Refusal {
		if len(ids) > registry.MaxEvidenceIDs {
			return &Refusal{RefusedInvalid, "too many evidence ids"}
		}
		seen := map[string]bool{}
		for _, e := range ids {
			if seen[e] {
				return &Refusal{RefusedInvalid, "duplicate evidence id"}
			}
			seen[e] = true
			if !slices.Contains(snap.Evidence, e) {
				return &Refusal{RefusedEvidence, "an evidence id is not admitted by this turn's context"}
			}
		}
		p.Evidence = append([]string{}, ids...)
		sort.Strings(p.Evidence)
		return nil
	}
	switch kind {
	case KindMemory:
		var a memoryArgs
		if err := strictDecode(canon, &a); err != nil {
			return Proposal{}, &Refusal{RefusedInvalid, "arguments do not decode strictly"}
		}
		if (a.Operation != "append" && a.Operation != "replace-document") || !bounded(a.ProposedText, registry.MaxProposedText) || !bounded(a.Reason, registry.MaxProposalReason) {
			return Proposal{}, &Refusal{RefusedInvalid, "arguments out of bounds"}
		}
		if r := evidence(a.Evidence); r != nil {
			return Proposal{}, r
		}
		m := *snap.Memory
		p.Memory, p.Operation, p.ProposedText, p.Reason = &m, a.Operation, a.ProposedText, a.Reason
		p.TextLength, p.TextSHA256 = utf8.RuneCountInString(a.ProposedText), Digest([]byte(a.ProposedText))
	case KindCorrection:
		var a correctionArgs
		if err := strictDecode(canon, &a); err != nil {
			return Proposal{}, &Refusal{RefusedInvalid, "arguments do not decode strictly"}
		}
		if !bounded(a.Replacement, registry.MaxReplacement) || !bounded(a.Reason, registry.MaxProposalReason) {
			return Proposal{}, &Refusal{RefusedInvalid, "arguments out of bounds"}
		}
		var t *CorrectionTarget
		if a.TargetOutput == "latest" {
			if n := len(snap.Targets); n > 0 {
				t = &snap.Targets[n-1]
			}
		} else {
			for i := range snap.Targets {
				if snap.Targets[i].OutputID == a.TargetOutput {
					t = &snap.Targets[i]
				}
			}
		}
		if t == nil {
			return Proposal{}, &Refusal{RefusedTarget, "the target output is not an admitted answer of this conversation"}
		}
		if r := evidence(a.Evidence); r != nil {
			return Proposal{}, r
		}
		tc := *t
		p.Target, p.Replacement, p.Reason = &tc, a.Replacement, a.Reason
	case KindFocus:
		var a focusArgs
		if err := strictDecode(canon, &a); err != nil {
			return Proposal{}, &Refusal{RefusedInvalid, "arguments do not decode strictly"}
		}
		if a.Identity.ID == "" || a.Identity.Version < 1 || !bounded(a.Objective, registry.MaxFocusObjective) ||
			len(a.Scope.Conversations) == 0 || len(a.RequestedPermissions) > registry.MaxFocusPermissions {
			return Proposal{}, &Refusal{RefusedInvalid, "declaration out of bounds"}
		}
		p.Declaration = canon
		p.Fingerprint = "focus:" + Digest(canon)
		p.DependencyResolution = "unchecked"
		p.Authority = &FocusAuthority{}
		p.Evidence = []string{}
	}
	return p, nil
}

// Acknowledgement is the fixed answer of a tool-only completion that captured proposals of
// kinds: it describes durable proposals only, claims nothing about application, and names no
// identifier.
func Acknowledgement(kinds []string) string {
	has := func(k string) bool { return slices.Contains(kinds, k) }
	switch {
	case len(kinds) == 0:
		return ""
	case has(KindMemory) && has(KindCorrection) && !has(KindFocus):
		return "I saved those as memory and correction suggestions."
	case len(kinds) > 1:
		return "I saved those as suggestions."
	case has(KindMemory):
		return "I saved that as a memory suggestion."
	case has(KindCorrection):
		return "I saved that as a proposed correction."
	default:
		return "I saved that as a focus proposal."
	}
}

// NothingSaved is the answer of a tool-only completion whose proposal calls were all refused:
// it claims nothing was saved.
const NothingSaved = "I could not save that suggestion."
