package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Decisions recorded by DecideConfirmation.
const (
	// DecisionApproved: an approver approved the proposal with a valid token.
	DecisionApproved = "approved"
	// DecisionDenied: an approver denied the proposal.
	DecisionDenied = "denied"
	// DecisionExpired: the token's time ran out before a decision.
	DecisionExpired = "expired"
)

// Confirmation is a pending or decided human decision on one candidate.
//
// Only the hash of the confirmation token is stored (TokenHash, unique), plus
// SealedToken, a copy encrypted for approvers; the plaintext token never
// reaches the database. The binding fields — WorkflowID, RunID, Seq, CallID,
// CapabilityID, Version, ArgsDigest — are exactly what the token authorizes;
// Arguments and Display are what the approver is shown. ConsumedAt is set
// by the presentation that consumes the current token (PresentToken); Decision ("" while pending, then approved,
// denied or expired), Approver, Reason and DecidedAt are set once, by
// DecideConfirmation. All times are UTC, truncated to microseconds.
type Confirmation struct {
	ID           string
	TokenHash    []byte
	SealedToken  []byte
	WorkflowID   string
	RunID        string
	Seq          int
	CallID       string
	CapabilityID string
	Version      int
	ArgsDigest   string
	Arguments    json.RawMessage
	Display      string
	// RegistryRevision is the registry revision the confirmation was issued under.
	RegistryRevision string
	// Disclosure is the registry.Disclosure of the call as JSON (where it sends what), nil
	// for rows issued before it was kept. Approver surfaces show it.
	Disclosure json.RawMessage
	CreatedAt  time.Time
	ExpiresAt  time.Time
	ConsumedAt *time.Time
	Decision   string
	Approver   string
	Reason     string
	DecidedAt  *time.Time
	// Generation counts reissues: 0 for the first token, +1 each time a presentation consumed
	// the token without a valid decision and a fresh one was issued (ReissueToken).
	Generation int
	// ConsumedBy identifies the presentation that consumed the current token ("" while unused).
	ConsumedBy string
	// EditedDigest is set when an approver's edit decided the confirmation (EditConfirmation):
	// the canonical digest of the arguments the edit authorized. "" otherwise.
	EditedDigest string
	// Provenance is the JSON provenance.Report of the arguments (issue 24): where each value
	// came from. Empty for confirmations issued before it was computed.
	Provenance json.RawMessage
	// ApproverGroups are the approver groups that may decide it (its capability's policy
	// "approval/groups" when issued; issue 21); empty: every approver.
	ApproverGroups []string
	// ApproverProof says how the deciding approver proved who they were (SetApproverProof);
	// "" for undecided confirmations and those decided before it was recorded.
	ApproverProof string
	// PasskeyRequired: its capability's policy said "approval/passkey" when it was issued, so
	// a decision counts only with the approver's passkey assertion over its MAC (issue 21,
	// item 3; the approver page asks for one). The worker judges by the policy it serves.
	PasskeyRequired bool
	// Quorum is how many distinct approvals the call needs, from the policy (JSON or Cedar)
	// it was issued under; 0 for rows issued before it was kept (surfaces read 1).
	Quorum int
	// DistinctApprover: its capability's policy required an approver other than the requester
	// ("approval/distinct-approver", four eyes) when it was issued; surfaces say so. The
	// worker judges by the policy it serves.
	DistinctApprover bool
	// UserRequest is the turn's user message that asked for the call, as the conversation's
	// context held it when the confirmation was issued (model-independent, but a client's
	// text: hostile like any other); "" when none was found or for older rows.
	UserRequest string
}

type confirmationRow struct {
	ID           string `db:"id"`
	TokenHash    []byte `db:"token_hash"`
	SealedToken  []byte `db:"sealed_token"`
	WorkflowID   string `db:"workflow_id"`
	RunID        string `db:"run_id"`
	Seq          int    `db:"seq"`
	CallID       string `db:"call_id"`
	CapabilityID string `db:"capability_id"`
	Version      int    `db:"version"`
	ArgsDigest   string `db:"args_digest"`
	Arguments    []byte `db:"arguments"`
	Display      string `db:"display"`
	RegistryRev  string `db:"registry_revision"`
	ConsumedBy   string `db:"consumed_by"`
	CreatedAt    dbTime `db:"created_at"`
	ExpiresAt    dbTime `db:"expires_at"`
	ConsumedAt   dbTime `db:"consumed_at"`
	Decision     string `db:"decision"`
	Approver     string `db:"approver"`
	Reason       string `db:"reason"`
	DecidedAt    dbTime `db:"decided_at"`
	Generation   int    `db:"generation"`
	EditedDigest string `db:"edited_digest"`
	Provenance   string `db:"provenance"`
	Disclosure   string `db:"disclosure"`
	Groups       string `db:"approver_groups"`
	Proof        string `db:"approver_proof"`
	Passkey      int    `db:"passkey_required"`
	Quorum       int    `db:"quorum"`
	Distinct     int    `db:"distinct_approver"`
	UserRequest  string `db:"user_request"`
}

func (r confirmationRow) confirmation() Confirmation {
	return Confirmation{
		ID: r.ID, TokenHash: r.TokenHash, SealedToken: r.SealedToken,
		WorkflowID: r.WorkflowID, RunID: r.RunID, Seq: r.Seq, CallID: r.CallID,
		CapabilityID: r.CapabilityID, Version: r.Version, ArgsDigest: r.ArgsDigest,
		Arguments: rawJSON(r.Arguments), Display: r.Display, RegistryRevision: r.RegistryRev,
		CreatedAt: r.CreatedAt.Time, ExpiresAt: r.ExpiresAt.Time, ConsumedAt: r.ConsumedAt.ptr(),
		Decision: r.Decision, Approver: r.Approver, Reason: r.Reason, DecidedAt: r.DecidedAt.ptr(),
		Generation: r.Generation, ConsumedBy: r.ConsumedBy, EditedDigest: r.EditedDigest,
		Provenance: optionalJSON(r.Provenance), ApproverGroups: splitGroups(r.Groups), ApproverProof: r.Proof,
		Disclosure: disclosureJSON(r.Disclosure), PasskeyRequired: r.Passkey != 0,
		Quorum: r.Quorum, DistinctApprover: r.Distinct != 0, UserRequest: r.UserRequest,
	}
}

const confirmationCols = `id, token_hash, sealed_token, workflow_id, run_id, seq, call_id,
	capability_id, version, args_digest, arguments, display, created_at, expires_at,
	consumed_at, decision, approver, reason, decided_at, registry_revision, consumed_by, generation,
	edited_digest, provenance, disclosure, approver_groups, approver_proof, passkey_required, quorum, distinct_approver, user_request`

// CreateConfirmation stores a new pending, unconsumed confirmation and returns
// it as stored. It is idempotent by c.ID: if a confirmation with this ID
// already exists, nothing is written and the EXISTING row is returned
// unchanged (an activity retry must not mint a second token), even when c
// differs from it.
//
// Required: c.ID, c.TokenHash, c.ExpiresAt. A zero c.CreatedAt is recorded as
// the current time. c.Arguments, when set, must be valid JSON. c.ConsumedAt,
// Decision, Approver, Reason and DecidedAt are ignored: a new confirmation is
// always pending. A TokenHash already used by another confirmation is an
// error (unique constraint).
func (s *Store) CreateConfirmation(ctx context.Context, c Confirmation) (Confirmation, error) {
	args, err := newConfirmationArgs(c)
	if err != nil {
		return Confirmation{}, err
	}
	// RETURNING hands back the row just inserted in the same round trip; a retry (the id
	// already stored) inserts nothing and reads the stored row instead.
	// On PostgreSQL the new row's notification rides the insert too (notifyChanged).
	q := `INSERT INTO confirmations
		(id, token_hash, sealed_token, workflow_id, run_id, seq, call_id, capability_id,
		 version, args_digest, arguments, display, created_at, expires_at, registry_revision, provenance, disclosure, approver_groups, passkey_required, quorum, distinct_approver, user_request)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING
		RETURNING ` + confirmationCols
	if s.driver == DriverPostgres {
		q = notifying(q, `changed.*`)
	}
	var r confirmationRow
	err = s.db.GetContext(ctx, &r, s.q(q),
		c.ID, c.TokenHash, bytesArg(c.SealedToken), c.WorkflowID, c.RunID, c.Seq, c.CallID,
		c.CapabilityID, c.Version, c.ArgsDigest, args, c.Display,
		tsArg(orNow(c.CreatedAt)), tsArg(c.ExpiresAt), c.RegistryRevision, string(c.Provenance), string(c.Disclosure), joinGroups(c.ApproverGroups), boolInt(c.PasskeyRequired), c.Quorum, boolInt(c.DistinctApprover), c.UserRequest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		s.touch(ctx, s.db) // the first attempt may have ended before its notification
		return s.GetConfirmation(ctx, c.ID)
	case err != nil:
		return Confirmation{}, fmt.Errorf("store: create confirmation %q: %w", c.ID, err)
	}
	return r.confirmation(), nil
}

// newConfirmationArgs checks the fields every new confirmation row needs (ID, TokenHash,
// ExpiresAt) and returns its arguments as a JSON column value.
func newConfirmationArgs(c Confirmation) (any, error) {
	switch {
	case c.ID == "":
		return nil, errors.New("store: confirmation needs an ID")
	case len(c.TokenHash) == 0:
		return nil, fmt.Errorf("store: confirmation %q needs a TokenHash", c.ID)
	case c.ExpiresAt.IsZero():
		return nil, fmt.Errorf("store: confirmation %q needs an ExpiresAt", c.ID)
	}
	if len(c.Provenance) > 0 && !json.Valid(c.Provenance) {
		return nil, fmt.Errorf("store: confirmation %q: provenance is not valid JSON", c.ID)
	}
	return jsonArg("confirmation arguments", c.Arguments)
}

// optionalJSON is a TEXT column holding JSON or ” (nil).
func optionalJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// GetConfirmation returns the confirmation with this ID, or an error wrapping
// ErrNotFound.
func (s *Store) GetConfirmation(ctx context.Context, id string) (Confirmation, error) {
	var r confirmationRow
	err := s.db.GetContext(ctx, &r, s.q(`SELECT `+confirmationCols+` FROM confirmations WHERE id = ?`), id)
	if err != nil {
		return Confirmation{}, notFound(err, "confirmation %q", id)
	}
	return r.confirmation(), nil
}

// DecideConfirmation records the final decision on confirmation id: decision
// is DecisionApproved, DecisionDenied or DecisionExpired, with the approver's
// identity, a reason, and the decision time. The first decision is final:
// recording the same decision again is a no-op returning nil (retries), a
// different one returns an error wrapping ErrConflict and changes nothing.
// Unknown id → ErrNotFound; any other decision string is an error.
func (s *Store) DecideConfirmation(ctx context.Context, id, decision, approver, reason string, at time.Time) error {
	return s.DecideProved(ctx, id, decision, approver, reason, "", at)
}

// DecideProved is DecideConfirmation that also records how the approver proved who they were
// (SetApproverProof's proof) in the same statement: the decision and its proof land together,
// in one round trip. A retry that finds the same decision recorded sets the proof unless one
// is recorded.
func (s *Store) DecideProved(ctx context.Context, id, decision, approver, reason, proof string, at time.Time) error {
	switch decision {
	case DecisionApproved, DecisionDenied, DecisionExpired:
	default:
		return fmt.Errorf("store: confirmation %q: decision %q is not approved, denied or expired", id, decision)
	}
	return s.decideConfirmation(ctx, s.db, id, decision, approver, reason, proof, at)
}

// SetApproverProof records how approver, the approver of decided confirmation id, proved who
// they were (issue 21): written once, after DecideConfirmation or EditConfirmation, and only on
// a row approver decided; a second call with another proof leaves the first.
func (s *Store) SetApproverProof(ctx context.Context, id, approver, proof string) error {
	return s.setApproverProof(ctx, s.db, id, approver, proof)
}

// setApproverProof is SetApproverProof through x (the store or a transaction).
func (s *Store) setApproverProof(ctx context.Context, x sqlx.ExecerContext, id, approver, proof string) error {
	if _, err := x.ExecContext(ctx, s.q(`UPDATE confirmations SET approver_proof = ? WHERE id = ? AND decision <> '' AND approver = ? AND approver_proof = ''`), proof, id, approver); err != nil {
		return fmt.Errorf("store: record approver proof of %q: %w", id, err)
	}
	return nil
}

// decideConfirmation is DecideConfirmation through x (the store or a transaction), recording
// proof ("" for none) as the approver's proof with the decision (DecideProved).
func (s *Store) decideConfirmation(ctx context.Context, x sqlx.ExtContext, id, decision, approver, reason, proof string, at time.Time) error {
	n, err := s.execChanging(ctx, x, `UPDATE confirmations
		SET decision = ?, approver = ?, reason = ?, decided_at = ?, approver_proof = ?
		WHERE id = ? AND decision = ''`, decision, approver, reason, tsArg(orNow(at)), proof, id)
	if err != nil {
		return fmt.Errorf("store: decide confirmation %q: %w", id, err)
	}
	if n == 1 {
		return nil
	}
	var existing string
	if err := getContext(ctx, x, &existing, s.q(`SELECT decision FROM confirmations WHERE id = ?`), id); err != nil {
		return notFound(err, "confirmation %q", id)
	}
	if existing == decision {
		if proof != "" {
			// A retry after the decision was recorded: its proof too, unless one is, and only
			// on the decision of this approver (never one approver's proof on another's).
			return s.setApproverProof(ctx, x, id, approver, proof)
		}
		return nil
	}
	return fmt.Errorf("%w: confirmation %q already %s, cannot record %s", ErrConflict, id, existing, decision)
}

// ReasonEditedByApprover is the reason recorded on a confirmation an approver's edit decided
// (EditConfirmation): the proposal was denied and the approver's arguments ran as a new one.
const ReasonEditedByApprover = "edited_by_approver"

// EditConfirmation records an approver's edit as the final decision on confirmation id: the
// proposal is denied with reason ReasonEditedByApprover, and editedDigest (the canonical
// digest of the approver's arguments, as the edit's MAC authorized them) is kept for the
// confirmation of the new proposal (CreateApprovedConfirmation's caller checks it). Like
// DecideConfirmation the first decision is final: the same edit again is a no-op, anything
// else returns an error wrapping ErrConflict. Unknown id → ErrNotFound.
func (s *Store) EditConfirmation(ctx context.Context, id, approver, editedDigest string, at time.Time) error {
	if editedDigest == "" {
		return fmt.Errorf("store: edit confirmation %q: needs the edited arguments' digest", id)
	}
	n, err := s.execChanging(ctx, s.db, `UPDATE confirmations
		SET decision = ?, approver = ?, reason = ?, decided_at = ?, edited_digest = ?
		WHERE id = ? AND decision = ''`, DecisionDenied, approver, ReasonEditedByApprover, tsArg(orNow(at)), editedDigest, id)
	if err != nil {
		return fmt.Errorf("store: edit confirmation %q: %w", id, err)
	}
	if n == 1 {
		return nil
	}
	got, err := s.GetConfirmation(ctx, id)
	if err != nil {
		return err
	}
	if got.Decision == DecisionDenied && got.Reason == ReasonEditedByApprover && got.Approver == approver && got.EditedDigest == editedDigest {
		return nil
	}
	return fmt.Errorf("%w: confirmation %q already %s, cannot record an edit", ErrConflict, id, got.Decision)
}

// CreateApprovedConfirmation stores the confirmation of a proposal that an approver's edit
// created, already approved by c.Approver (the edit itself, whose MAC covered exactly these
// arguments, is its confirmation): one statement, so the row is never listed as pending. It
// carries a token hash no one holds (c.TokenHash, required, unique) and no sealed copy. It is
// idempotent by c.ID like CreateConfirmation: an existing row is returned unchanged.
// Required: c.ID, c.TokenHash, c.ExpiresAt, c.Approver.
func (s *Store) CreateApprovedConfirmation(ctx context.Context, c Confirmation) (Confirmation, error) {
	args, err := newConfirmationArgs(c)
	if err != nil {
		return Confirmation{}, err
	}
	if c.Approver == "" {
		return Confirmation{}, fmt.Errorf("store: approved confirmation %q needs its approver", c.ID)
	}
	created := orNow(c.CreatedAt)
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO confirmations
		(id, token_hash, sealed_token, workflow_id, run_id, seq, call_id, capability_id,
		 version, args_digest, arguments, display, created_at, expires_at, registry_revision,
		 consumed_at, consumed_by, decision, approver, reason, decided_at, disclosure)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`),
		c.ID, c.TokenHash, bytesArg(nil), c.WorkflowID, c.RunID, c.Seq, c.CallID,
		c.CapabilityID, c.Version, c.ArgsDigest, args, c.Display,
		tsArg(created), tsArg(c.ExpiresAt), c.RegistryRevision,
		tsArg(created), "edit", DecisionApproved, c.Approver, c.Reason, tsArg(created), string(c.Disclosure))
	if err != nil {
		return Confirmation{}, fmt.Errorf("store: create approved confirmation %q: %w", c.ID, err)
	}
	return s.GetConfirmation(ctx, c.ID)
}

// ListPendingConfirmations returns the confirmations that have no decision yet
// and have not expired (expires_at > now), ordered by CreatedAt (then ID).
// It returns stored rows including SealedToken; it never returns a plaintext
// token (none is stored).
func (s *Store) ListPendingConfirmations(ctx context.Context, now time.Time) ([]Confirmation, error) {
	var rows []confirmationRow
	err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+confirmationCols+` FROM confirmations
		WHERE decision = '' AND expires_at > ? ORDER BY created_at, id`), tsArg(now))
	if err != nil {
		return nil, fmt.Errorf("store: list pending confirmations: %w", err)
	}
	out := make([]Confirmation, len(rows))
	for i, r := range rows {
		out[i] = r.confirmation()
	}
	return out, nil
}

// PendingIDs returns the ids of the undecided, unexpired confirmations (at now), oldest first.
// It reads ids only, through the pending index: what a watcher that acts on each confirmation
// once (an automated approver woken by WatchConfirmations, keeping the ids it has seen) needs,
// where ListPendingConfirmations returns every pending row whole for a page to show. (A cursor
// over created_at would miss a row committed after a later-stamped one was read.)
func (s *Store) PendingIDs(ctx context.Context, now time.Time) ([]string, error) {
	var ids []string
	if err := s.db.SelectContext(ctx, &ids, s.q(`SELECT id FROM confirmations
		WHERE decision = '' AND expires_at > ? ORDER BY created_at, id`), tsArg(now)); err != nil {
		return nil, fmt.Errorf("store: pending confirmation ids: %w", err)
	}
	return ids, nil
}

// PresentToken consumes the current token of confirmation id for one identified presentation
// of a decision (DESIGN "Tokens": any presentation to a pending proposal consumes its token,
// whatever else is wrong with the decision). In one statement it marks the row consumed by
// presentation, if it is undecided and its token unused, and returns it.
//
// A retry of the same presentation whose reply was lost gets the row back without an error.
// Errors: unknown id → ErrNotFound; the token was already consumed by another presentation,
// or the confirmation is decided → the row WITH an error wrapping ErrTokenConsumed.
func (s *Store) PresentToken(ctx context.Context, id, presentation string, at time.Time) (Confirmation, error) {
	if presentation == "" {
		return Confirmation{}, fmt.Errorf("store: present token of %q: a presentation needs an identity", id)
	}
	return s.consumeAs(ctx, "present token", id, presentation, `consumed_at IS NULL`, tsArg(orNow(at)), presentation, id)
}

// TakeOverToken moves the consumption of confirmation id's current token from presentation
// from (one that ended without a verdict or a reissue) to presentation to, if the row is still
// undecided and consumed by from, and returns the row. Errors: unknown id → ErrNotFound;
// the row changed meanwhile (decided, reissued, or taken over by another) → the row WITH an
// error wrapping ErrTokenConsumed.
func (s *Store) TakeOverToken(ctx context.Context, id, from, to string, at time.Time) (Confirmation, error) {
	if from == "" || to == "" {
		return Confirmation{}, fmt.Errorf("store: take over token of %q: both presentations need an identity", id)
	}
	return s.consumeAs(ctx, "take over token", id, to, `consumed_by = ?`, tsArg(orNow(at)), to, id, from)
}

// consumeAs marks confirmation id, if undecided and cond holds, consumed by presentation by;
// args are consumed_at, by, id and then cond's own arguments. It
// returns the row; a retry by the same presentation (the row already consumed by it) gets the
// row without an error; any other miss is the row with ErrTokenConsumed, or ErrNotFound.
func (s *Store) consumeAs(ctx context.Context, op, id, by, cond string, args ...any) (Confirmation, error) {
	var r confirmationRow
	err := s.db.GetContext(ctx, &r, s.q(`UPDATE confirmations SET consumed_at = ?, consumed_by = ?
		WHERE id = ? AND decision = '' AND `+cond+`
		RETURNING `+confirmationCols), args...)
	if err == nil {
		return r.confirmation(), nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Confirmation{}, fmt.Errorf("store: %s of %q: %w", op, id, err)
	}
	got, err := s.GetConfirmation(ctx, id)
	if err != nil {
		return Confirmation{}, err
	}
	if got.ConsumedBy == by {
		return got, nil
	}
	return got, fmt.Errorf("%w: confirmation %q", ErrTokenConsumed, id)
}

// ReissueToken gives confirmation id a fresh token after presentation consumed the current
// one without a valid decision: it stores the new hash and sealed copy (sealed for generation
// gen, which must be the row's generation + 1), clears the consumption and returns true. It
// changes nothing and returns false when the row is no longer in that state (decided, or a
// retry of the same reissue already ran), so it is safe to retry.
func (s *Store) ReissueToken(ctx context.Context, id, presentation string, gen int, tokenHash, sealed []byte) (bool, error) {
	if len(tokenHash) == 0 || gen < 1 {
		return false, fmt.Errorf("store: reissue token of %q: needs a token hash and a generation >= 1", id)
	}
	n, err := s.execChanging(ctx, s.db, `UPDATE confirmations
		SET token_hash = ?, sealed_token = ?, generation = ?, consumed_at = NULL, consumed_by = ''
		WHERE id = ? AND consumed_by = ? AND generation = ? AND decision = ''`,
		tokenHash, bytesArg(sealed), gen, id, presentation, gen-1)
	if err != nil {
		return false, fmt.Errorf("store: reissue token of %q: %w", id, err)
	}
	return n == 1, nil
}

// disclosureJSON is a stored disclosure column: nil for rows issued before it was kept.
func disclosureJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// joinGroups is the approver_groups column of groups: "" for none, else ",g1,g2," (so a
// group is found with a LIKE on ",g,", and group names cannot hold a comma).
func joinGroups(groups []string) string {
	if len(groups) == 0 {
		return ""
	}
	return "," + strings.Join(groups, ",") + ","
}

func splitGroups(col string) []string {
	col = strings.Trim(col, ",")
	if col == "" {
		return nil
	}
	return strings.Split(col, ",")
}

// boolInt is a boolean's stored form (INTEGER 0 or 1 on both drivers).
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
