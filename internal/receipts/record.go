package receipts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/internal/canonical"
)

// Version is the record format's version, the "v" member of every record.
const Version = 1

// Record types (the "type" member).
const (
	// TypeAuthorization: how a call was authorized (automatically by a rule, or by people), or
	// that it was refused before anyone could authorize it.
	TypeAuthorization = "authorization"
	// TypeSettlement: what became of a call (Settlement* outcomes), its result's digest, when.
	TypeSettlement = "settlement"
	// TypeDecision: a person's decision on an agent proposal (accept, edit, reject).
	TypeDecision = "proposal_decision"
	// TypeEvent: any other audited step (a refused or counted approval, a reissued token, an
	// edit, a refused turn request, an MCP pin drift, a notice): the audit row as it is.
	TypeEvent = "event"
)

// Authorization modes (Authorization.Mode).
const (
	// ModeAutomatic: the call ran without a person, by Rule.
	ModeAutomatic = "automatic"
	// ModeHuman: the call was put to people (AskedAt), who decided (Decision, Approvers).
	ModeHuman = "human"
	// ModeRefused: the executor refused the call before any authorization (Rule names the
	// stage and reason: parse, budget, resolve, validate, policy).
	ModeRefused = "refused"
)

// Settlement outcomes (Settlement.Outcome), the six.
const (
	SettlementExecuted       = "executed"
	SettlementFailed         = "failed"
	SettlementOutcomeUnknown = "outcome_unknown"
	SettlementDenied         = "denied"
	SettlementExpired        = "expired"
	SettlementRefused        = "refused"
	// SettlementCaptured: an agent proposal captured as an inert record awaiting a decision.
	SettlementCaptured = "captured"
)

// Proof kinds of an approver (Approver.ProofKind).
const (
	ProofPasskey       = "passkey_assertion"
	ProofPageSession   = "page_session"
	ProofSlackUser     = "slack_user"
	ProofCLICredential = "cli_credential"
	ProofUnattested    = "unattested"
	// ProofNotRecorded: the store holds no proof for the decision (decided before proofs
	// were kept).
	ProofNotRecorded = "not_recorded"
)

// Record is one leaf of the log. Common members identify the audit row it was made with
// (Event, its idempotency key) and the call; exactly one of the type's members is set. The
// leaf bytes are the RFC 8785 canonical JSON of the record (Leaf), so two encoders agree.
type Record struct {
	V    int    `json:"v"`
	Type string `json:"type"`
	// Event is the audit row's key (store.AuditEvent.Key): the record's identity in the log.
	Event      string `json:"event"`
	Turn       string `json:"turn,omitempty"`
	Run        string `json:"run,omitempty"`
	Seq        int    `json:"seq,omitempty"`
	CallID     string `json:"call_id,omitempty"`
	Capability string `json:"capability,omitempty"`
	Version    int    `json:"version,omitempty"`
	// ArgsDigest is the hex SHA-256 of the call's canonical arguments (RFC 8785).
	ArgsDigest string `json:"args_digest,omitempty"`
	// At is when the recorded step happened (UTC, microseconds).
	At time.Time `json:"at"`

	Authorization *Authorization `json:"authorization,omitempty"`
	Settlement    *Settlement    `json:"settlement,omitempty"`
	Decision      *Decision      `json:"decision,omitempty"`
	Audit         *Audit         `json:"audit,omitempty"`
}

// Authorization is how a call was authorized.
type Authorization struct {
	Mode string `json:"mode"`
	// Rule names why: "local_read_only", "internal_read" or "user_provided" (automatic), "confirmation" (put to
	// people), "<stage>:<reason>" (refused).
	Rule string `json:"rule"`
	// RegistryRevision is the whole registry's revision the record was made under.
	RegistryRevision string `json:"registry_revision,omitempty"`
	// Fingerprint is the capability's registry fingerprint the authorization is bound to.
	Fingerprint string `json:"fingerprint,omitempty"`
	// MCPPin is the pinned MCP tool definition's digest, for an MCP tool.
	MCPPin    string     `json:"mcp_pin,omitempty"`
	Requester *Requester `json:"requester,omitempty"`
	// AskedAt, ExpiresAt, DecidedAt and Decision describe the confirmation (ModeHuman).
	AskedAt   *time.Time `json:"asked_at,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	Decision  string     `json:"decision,omitempty"`
	Approvers []Approver `json:"approvers,omitempty"`
	// Quorum is how many approvals the policy asked for (1 when it asks for none more).
	Quorum int `json:"quorum,omitempty"`
	// Provenance summarizes where each argument value came from (issue 24).
	Provenance []ProvenanceValue `json:"provenance,omitempty"`
}

// Requester is the proven person and client who started the turn.
type Requester struct {
	Principal string `json:"principal"`
	Client    string `json:"client"`
	// Attestation is "sha256:" + hex of the client's attestation signature.
	Attestation string    `json:"attestation"`
	At          time.Time `json:"at"`
}

// Approver is one person whose approval (or decision) counted.
type Approver struct {
	Name string `json:"name"`
	// ProofKind is one of the Proof* constants; Proof is Airlock's wording of it.
	ProofKind string     `json:"proof_kind"`
	Proof     string     `json:"proof,omitempty"`
	At        *time.Time `json:"at,omitempty"`
}

// ProvenanceValue is where one argument value (by JSON pointer) was found: Status is
// provenance's ("found", "not_found": the model produced it, "too_short" to attribute) and
// Sources the kinds of text it was found in (user, system, catalog, assistant, result).
type ProvenanceValue struct {
	Path    string   `json:"path"`
	Status  string   `json:"status,omitempty"`
	Sources []string `json:"sources,omitempty"`
}

// Settlement is what became of a call.
type Settlement struct {
	Outcome string `json:"outcome"`
	// AuditOutcome is Airlock's own outcome when it differs (rejected, parse_failed,
	// budget_exhausted settle as refused).
	AuditOutcome string `json:"audit_outcome,omitempty"`
	Stage        string `json:"stage,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// ResultDigest is "sha256:" + hex of the result as recorded for the model.
	ResultDigest string `json:"result_digest,omitempty"`
	Approver     string `json:"approver,omitempty"`
}

// Decision is a person's decision on an agent proposal.
type Decision struct {
	Proposal    string `json:"proposal"`
	ID          string `json:"id"`
	Disposition string `json:"disposition"`
	Actor       string `json:"actor"`
	// Digest binds the decision's payload; Attestation is "sha256:" + hex of its attestation.
	Digest      string `json:"digest"`
	Attestation string `json:"attestation,omitempty"`
}

// Audit is an audit row recorded as it is (TypeEvent).
type Audit struct {
	Outcome  string `json:"outcome"`
	Stage    string `json:"stage,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Approver string `json:"approver,omitempty"`
	// OriginalDigest is the replaced arguments' digest of a proposal_edited row.
	OriginalDigest string `json:"original_digest,omitempty"`
}

// Leaf returns the leaf bytes of r: the RFC 8785 canonical JSON of its encoding, with V set
// to Version when zero and At in UTC truncated to microseconds.
func (r Record) Leaf() ([]byte, error) {
	if r.V == 0 {
		r.V = Version
	}
	r.At = r.At.UTC().Truncate(time.Microsecond)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("receipts: encode record %q: %w", r.Event, err)
	}
	leaf, err := canonical.Canonicalize(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("receipts: canonicalize record %q: %w", r.Event, err)
	}
	return leaf, nil
}

// ParseRecord decodes leaf bytes (unknown members are kept out of the result, not refused: a
// verifier checks the bytes, not the decoding).
func ParseRecord(leaf []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(leaf, &r); err != nil {
		return Record{}, fmt.Errorf("receipts: record is not JSON: %w", err)
	}
	return r, nil
}

// Digest is "sha256:" + the lowercase hex SHA-256 of b: the form of result and attestation
// digests in records.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
