package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlock-dev/airlock/internal/receipts"
)

// ---- agent proposals (seed 2; migration 0006) ----

// PutSnapshot stores the body of context snapshot id (the JSON the turn's proposal offer was
// built from) unless one is stored already, and returns the stored body: the first write
// wins, so an Infer retry that rebuilt a different snapshot still offers and validates
// against the first one (retry-stable).
func (s *Store) PutSnapshot(ctx context.Context, id, workflowID string, round int, body []byte) ([]byte, error) {
	if id == "" || len(body) == 0 {
		return nil, errors.New("store: a snapshot needs an id and a body")
	}
	sum := sha256.Sum256(body)
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO proposal_snapshots (snapshot_id, workflow_id, round, body, sha256, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (snapshot_id) DO NOTHING`),
		id, workflowID, round, bytesArg(body), hex.EncodeToString(sum[:]), tsArg(time.Now())); err != nil {
		return nil, fmt.Errorf("store: put snapshot %s: %w", id, err)
	}
	return s.GetSnapshot(ctx, id)
}

// GetSnapshot returns the stored body of snapshot id, or an error wrapping ErrNotFound.
func (s *Store) GetSnapshot(ctx context.Context, id string) ([]byte, error) {
	var b []byte
	if err := s.db.GetContext(ctx, &b, s.q(`SELECT body FROM proposal_snapshots WHERE snapshot_id = ?`), id); err != nil {
		return nil, notFound(err, "snapshot %q", id)
	}
	return b, nil
}

// ProposalRow is one captured agent proposal as stored: Payload is its strict record
// (internal/proposals.Proposal).
type ProposalRow struct {
	ID           string          `db:"proposal_id"`
	Kind         string          `db:"kind"`
	WorkflowID   string          `db:"workflow_id"`
	Conversation string          `db:"conversation"`
	OutputID     string          `db:"output_id"`
	SnapshotID   string          `db:"snapshot_id"`
	Payload      json.RawMessage `db:"-"`
	CreatedAt    time.Time       `db:"-"`
}

type proposalRow struct {
	ProposalRow
	RawPayload []byte `db:"payload"`
	Created    dbTime `db:"created_at"`
}

func (r proposalRow) out() ProposalRow {
	p := r.ProposalRow
	p.Payload, p.CreatedAt = rawJSON(r.RawPayload), r.Created.Time
	return p
}

const proposalCols = `proposal_id, kind, workflow_id, conversation, output_id, snapshot_id, payload, created_at`

// Settlement is everything a turn that captured proposals writes when it ends, in one
// transaction: its proposals, its context entries (the canonical assistant message and the
// answer), its audit rows and its result (the completion). Every row is keyed, so a retry or
// replay converges.
type Settlement struct {
	WorkflowID   string
	Conversation string
	Proposals    []ProposalRow
	Context      []ContextEntry
	Audit        []AuditEvent
	Result       json.RawMessage
	At           time.Time
}

// Settle writes st in one transaction, in order: proposals, context entries, audit rows, turn
// result. Either all of it is durable or none: a crash never leaves a completed turn without
// its proposals. A proposal already stored under the same id with a different payload is
// ErrConflict (nothing is written).
func (s *Store) Settle(ctx context.Context, st Settlement) error {
	if st.WorkflowID == "" || len(st.Result) == 0 {
		return errors.New("store: a settlement needs a workflow id and a result")
	}
	res, err := jsonArg("turn result", st.Result)
	if err != nil {
		return err
	}
	stAt := orNow(st.At)
	at := tsArg(stAt)
	defer s.kickSequencer()
	return s.inTx(ctx, "settle "+st.WorkflowID, func(tx *sqlx.Tx) error {
		for _, p := range st.Proposals {
			payload, err := jsonArg("proposal payload", p.Payload)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO agent_proposals (`+proposalCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (proposal_id) DO NOTHING`), p.ID, p.Kind, p.WorkflowID, p.Conversation, p.OutputID, p.SnapshotID, payload, at); err != nil {
				return fmt.Errorf("proposal %s: %w", p.ID, err)
			}
			var stored []byte
			if err := tx.GetContext(ctx, &stored, s.q(`SELECT payload FROM agent_proposals WHERE proposal_id = ?`), p.ID); err != nil {
				return fmt.Errorf("proposal %s: %w", p.ID, err)
			}
			if string(stored) != string(p.Payload) {
				return fmt.Errorf("%w: proposal %s is stored with another payload", ErrConflict, p.ID)
			}
		}
		for _, e := range st.Context {
			payload, err := jsonArg("context entry payload", e.Payload)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO context_entries (conversation, entry_key, workflow_id, payload, created_at)
				VALUES (?, ?, ?, ?, ?) ON CONFLICT (conversation, entry_key) DO NOTHING`), e.Conversation, e.Key, e.WorkflowID, payload, at); err != nil {
				return fmt.Errorf("context entry %s: %w", e.Key, err)
			}
		}
		for _, e := range st.Audit {
			res, err := tx.ExecContext(ctx, s.q(`INSERT INTO audit_events
				(event_key, workflow_id, run_id, seq, call_id, capability_id, version,
				 outcome, stage, reason, detail, args_digest, original_digest, approver, at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (event_key) DO NOTHING`),
				e.Key, e.WorkflowID, e.RunID, e.Seq, e.CallID, e.CapabilityID, e.Version,
				e.Outcome, e.Stage, e.Reason, e.Detail, e.ArgsDigest, e.OriginalDigest, e.Approver, at)
			if err != nil {
				return fmt.Errorf("audit %s: %w", e.Key, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("audit %s: %w", e.Key, err)
			} else if n == 1 {
				e.At = stAt
				if err := s.appendReceipts(ctx, tx, e); err != nil {
					return err
				}
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO turn_results (workflow_id, conversation, result, saved_at)
			VALUES (?, ?, ?, ?)
			ON CONFLICT (workflow_id) DO UPDATE SET conversation = excluded.conversation,
				result = excluded.result, saved_at = excluded.saved_at`), st.WorkflowID, st.Conversation, res, at); err != nil {
			return fmt.Errorf("turn result: %w", err)
		}
		return nil
	})
}

// inTx runs fn in one transaction and commits it; any error rolls everything back.
func (s *Store) inTx(ctx context.Context, what string, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %s: begin: %w", what, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: %s: commit: %w", what, err)
	}
	return nil
}

// GetProposal returns proposal id, or an error wrapping ErrNotFound.
func (s *Store) GetProposal(ctx context.Context, id string) (ProposalRow, error) {
	var r proposalRow
	if err := s.db.GetContext(ctx, &r, s.q(`SELECT `+proposalCols+` FROM agent_proposals WHERE proposal_id = ?`), id); err != nil {
		return ProposalRow{}, notFound(err, "proposal %q", id)
	}
	return r.out(), nil
}

// ListProposals returns the proposals of workflowID ("" for all, the latest 500), oldest first.
func (s *Store) ListProposals(ctx context.Context, workflowID string) ([]ProposalRow, error) {
	var rows []proposalRow
	var err error
	if workflowID == "" {
		err = s.db.SelectContext(ctx, &rows, s.q(`SELECT `+proposalCols+` FROM (SELECT `+proposalCols+` FROM agent_proposals
			ORDER BY created_at DESC, proposal_id LIMIT 500) recent ORDER BY created_at, proposal_id`))
	} else {
		err = s.db.SelectContext(ctx, &rows, s.q(`SELECT `+proposalCols+` FROM agent_proposals WHERE workflow_id = ?
			ORDER BY created_at, proposal_id`), workflowID)
	}
	if err != nil {
		return nil, fmt.Errorf("store: list proposals: %w", err)
	}
	out := make([]ProposalRow, len(rows))
	for i, r := range rows {
		out[i] = r.out()
	}
	return out, nil
}

// ProposalDecision is the one human decision on a proposal (append-only). Digest covers
// the proposal id, disposition, replacement and actor: the payload that must match for a
// retry to converge (SubmissionID is provenance, not part of it).
type ProposalDecision struct {
	ID           string          `db:"decision_id"`
	ProposalID   string          `db:"proposal_id"`
	Disposition  string          `db:"disposition"`
	Replacement  string          `db:"replacement"`
	Actor        string          `db:"actor"`
	SubmissionID string          `db:"submission_id"`
	Digest       string          `db:"digest"`
	Attestation  json.RawMessage `db:"-"`
	CreatedAt    time.Time       `db:"-"`
}

type decisionRow struct {
	ProposalDecision
	RawAttestation []byte `db:"attestation"`
	Created        dbTime `db:"created_at"`
}

const decisionCols = `decision_id, proposal_id, disposition, replacement, actor, submission_id, digest, attestation, created_at`

// AppendProposalDecision appends d unless the proposal has a decision already. It returns the
// stored decision and whether this call inserted it. The same payload (equal Digest) retried,
// even racing, converges (inserted false, no error); a different payload is ErrConflict with
// the stored (first) decision returned: it never supersedes it.
func (s *Store) AppendProposalDecision(ctx context.Context, d ProposalDecision) (ProposalDecision, bool, error) {
	if d.ID == "" || d.ProposalID == "" || d.Digest == "" || d.Actor == "" {
		return ProposalDecision{}, false, errors.New("store: a proposal decision needs an id, a proposal, an actor and a digest")
	}
	att, err := jsonArg("attestation", d.Attestation)
	if err != nil {
		return ProposalDecision{}, false, err
	}
	at := orNow(d.CreatedAt)
	var n int64
	// The decision and its receipts record in one transaction (receipts.go).
	err = s.inTx(ctx, "append decision on "+d.ProposalID, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO proposal_decisions (`+decisionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`), d.ID, d.ProposalID, d.Disposition, d.Replacement, d.Actor, d.SubmissionID, d.Digest, att, tsArg(at))
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n != 1 {
			return err
		}
		rec := receipts.Record{V: receipts.Version, Type: receipts.TypeDecision, Event: "proposal_decision/" + d.ID, At: at.UTC().Truncate(time.Microsecond),
			Decision: &receipts.Decision{Proposal: d.ProposalID, ID: d.ID, Disposition: d.Disposition, Actor: d.Actor, Digest: d.Digest}}
		if len(d.Attestation) > 0 {
			rec.Decision.Attestation = receipts.Digest(d.Attestation)
		}
		return s.appendRecords(ctx, tx, rec.Event, []receipts.Record{rec})
	})
	if err != nil {
		return ProposalDecision{}, false, err
	}
	if n == 1 {
		s.kickSequencer()
	}
	stored, err := s.GetProposalDecision(ctx, d.ProposalID)
	if err != nil {
		return ProposalDecision{}, false, err
	}
	if stored.Digest != d.Digest || stored.ID != d.ID {
		return stored, false, fmt.Errorf("%w: proposal %s was already decided (%s by %s)", ErrConflict, d.ProposalID, stored.Disposition, stored.Actor)
	}
	return stored, n == 1, nil
}

// GetProposalDecision returns the decision on proposalID, or an error wrapping ErrNotFound.
func (s *Store) GetProposalDecision(ctx context.Context, proposalID string) (ProposalDecision, error) {
	return s.getDecision(ctx, "proposal_id", proposalID, "decision on proposal %q")
}

// GetProposalDecisionByID returns decision id, or an error wrapping ErrNotFound.
func (s *Store) GetProposalDecisionByID(ctx context.Context, id string) (ProposalDecision, error) {
	return s.getDecision(ctx, "decision_id", id, "decision %q")
}

// getDecision reads the one decision whose column (proposal_id or decision_id, both unique)
// equals value; what names it in a not-found error.
func (s *Store) getDecision(ctx context.Context, column, value, what string) (ProposalDecision, error) {
	var r decisionRow
	if err := s.db.GetContext(ctx, &r, s.q(`SELECT `+decisionCols+` FROM proposal_decisions WHERE `+column+` = ?`), value); err != nil {
		return ProposalDecision{}, notFound(err, what, value)
	}
	d := r.ProposalDecision
	d.Attestation, d.CreatedAt = rawJSON(r.RawAttestation), r.Created.Time
	return d, nil
}

// Judgment is a human-authorized judgment on one delivered output (a projected correction).
type Judgment struct {
	ID                     string `db:"judgment_id"`
	Kind                   string `db:"kind"`
	Criterion              string `db:"criterion"`
	CriterionVersion       int    `db:"criterion_version"`
	Actor                  string `db:"actor"`
	TargetWorkflowID       string `db:"target_workflow_id"`
	TargetOutputID         string `db:"target_output_id"`
	FeedbackSource         string `db:"feedback_source"`
	Replacement            string `db:"replacement"`
	QualityEligible        bool   `db:"-"`
	ExternalExportEligible bool   `db:"-"`
	CreatedAt              time.Time
}

type judgmentRow struct {
	Judgment
	Quality  int    `db:"quality_eligible"`
	External int    `db:"external_export_eligible"`
	Created  dbTime `db:"created_at"`
}

const judgmentCols = `judgment_id, kind, criterion, criterion_version, actor, target_workflow_id, target_output_id,
	feedback_source, replacement, quality_eligible, external_export_eligible, created_at`

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RecordJudgment stores j once: a second call for the same feedback source (the decision) is
// a no-op that returns the stored judgment (the projector is idempotent).
func (s *Store) RecordJudgment(ctx context.Context, j Judgment) (Judgment, error) {
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO judgments (`+judgmentCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`), j.ID, j.Kind, j.Criterion, j.CriterionVersion, j.Actor, j.TargetWorkflowID, j.TargetOutputID,
		j.FeedbackSource, j.Replacement, b2i(j.QualityEligible), b2i(j.ExternalExportEligible), tsArg(orNow(j.CreatedAt))); err != nil {
		return Judgment{}, fmt.Errorf("store: record judgment %s: %w", j.ID, err)
	}
	var r judgmentRow
	if err := s.db.GetContext(ctx, &r, s.q(`SELECT `+judgmentCols+` FROM judgments WHERE feedback_source = ?`), j.FeedbackSource); err != nil {
		return Judgment{}, fmt.Errorf("store: read judgment %s: %w", j.ID, err)
	}
	return r.out(), nil
}

func (r judgmentRow) out() Judgment {
	j := r.Judgment
	j.QualityEligible, j.ExternalExportEligible, j.CreatedAt = r.Quality == 1, r.External == 1, r.Created.Time
	return j
}

// ListJudgments returns every judgment, oldest first.
func (s *Store) ListJudgments(ctx context.Context) ([]Judgment, error) {
	var rows []judgmentRow
	if err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+judgmentCols+` FROM judgments ORDER BY created_at, judgment_id`)); err != nil {
		return nil, fmt.Errorf("store: list judgments: %w", err)
	}
	out := make([]Judgment, len(rows))
	for i, r := range rows {
		out[i] = r.out()
	}
	return out, nil
}

// LatestJudgment returns the latest judgment on outputID, or an error wrapping ErrNotFound.
func (s *Store) LatestJudgment(ctx context.Context, outputID string) (Judgment, error) {
	var r judgmentRow
	if err := s.db.GetContext(ctx, &r, s.q(`SELECT `+judgmentCols+` FROM judgments WHERE target_output_id = ?
		ORDER BY created_at DESC, judgment_id DESC LIMIT 1`), outputID); err != nil {
		return Judgment{}, notFound(err, "judgment on %q", outputID)
	}
	return r.out(), nil
}

// Receipt records what one decision led to: Kind names it (projected, rejected, materialized,
// materialization.failed); Reason is a content-free code; Detail holds ids, sizes and hashes,
// never proposal text.
type Receipt struct {
	ID         string          `db:"receipt_id"`
	DecisionID string          `db:"decision_id"`
	ProposalID string          `db:"proposal_id"`
	Kind       string          `db:"kind"`
	Reason     string          `db:"reason"`
	Detail     json.RawMessage `db:"-"`
	CreatedAt  time.Time       `db:"-"`
}

type receiptRow struct {
	Receipt
	RawDetail []byte `db:"detail"`
	Created   dbTime `db:"created_at"`
}

const receiptCols = `receipt_id, decision_id, proposal_id, kind, reason, detail, created_at`

// AppendReceipt stores r unless the decision has a receipt, and returns the stored one (the
// first receipt of a decision stands).
func (s *Store) AppendReceipt(ctx context.Context, r Receipt) (Receipt, error) {
	if len(r.Detail) == 0 {
		r.Detail = json.RawMessage(`{}`)
	}
	detail, err := jsonArg("receipt detail", r.Detail)
	if err != nil {
		return Receipt{}, err
	}
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO proposal_receipts (`+receiptCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`), r.ID, r.DecisionID, r.ProposalID, r.Kind, r.Reason, detail, tsArg(orNow(r.CreatedAt))); err != nil {
		return Receipt{}, fmt.Errorf("store: append receipt %s: %w", r.ID, err)
	}
	return s.GetReceipt(ctx, r.DecisionID)
}

// GetReceipt returns the receipt of decisionID, or an error wrapping ErrNotFound.
func (s *Store) GetReceipt(ctx context.Context, decisionID string) (Receipt, error) {
	var r receiptRow
	if err := s.db.GetContext(ctx, &r, s.q(`SELECT `+receiptCols+` FROM proposal_receipts WHERE decision_id = ?`), decisionID); err != nil {
		return Receipt{}, notFound(err, "receipt of %q", decisionID)
	}
	out := r.Receipt
	out.Detail, out.CreatedAt = rawJSON(r.RawDetail), r.Created.Time
	return out, nil
}

// MemoryVersion is one immutable version of a memory document.
type MemoryVersion struct {
	VersionID   string `db:"version_id"`
	DocumentID  string `db:"document_id"`
	Source      string `db:"source"`
	Path        string `db:"path"`
	ContentType string `db:"content_type"`
	Size        int64  `db:"size"`
	SHA256      string `db:"sha256"`
	Content     []byte `db:"content"`
}

const memoryCols = `version_id, document_id, source, path, content_type, size, sha256, content`

// PutMemoryVersion stores v (immutable: an existing version id keeps its row) and makes it
// the current version of its source when the current one is expectCurrent ("" for none). It
// returns false, without moving the pointer, when the current version is another one.
func (s *Store) PutMemoryVersion(ctx context.Context, v MemoryVersion, expectCurrent string) (bool, error) {
	moved := false
	err := s.inTx(ctx, "memory version "+v.VersionID, func(tx *sqlx.Tx) error {
		now := tsArg(time.Now())
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO memory_versions (`+memoryCols+`, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (version_id) DO NOTHING`), v.VersionID, v.DocumentID, v.Source, v.Path, v.ContentType, v.Size, v.SHA256, bytesArg(v.Content), now); err != nil {
			return err
		}
		var cur string
		err := tx.GetContext(ctx, &cur, s.q(`SELECT version_id FROM memory_current WHERE source = ?`), v.Source)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if expectCurrent != "" {
				return nil
			}
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO memory_current (source, document_id, version_id, updated_at) VALUES (?, ?, ?, ?)`),
				v.Source, v.DocumentID, v.VersionID, now)
			moved = err == nil
			return err
		case err != nil:
			return err
		case cur == v.VersionID:
			moved = true
			return nil
		case cur != expectCurrent:
			return nil
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE memory_current SET document_id = ?, version_id = ?, updated_at = ? WHERE source = ? AND version_id = ?`),
			v.DocumentID, v.VersionID, now, v.Source, cur)
		moved = err == nil
		return err
	})
	return moved, err
}

// CurrentMemory returns the current version of source, or an error wrapping ErrNotFound.
func (s *Store) CurrentMemory(ctx context.Context, source string) (MemoryVersion, error) {
	var v MemoryVersion
	if err := s.db.GetContext(ctx, &v, s.q(`SELECT `+prefixCols("v.", memoryCols)+` FROM memory_current c
		JOIN memory_versions v ON v.version_id = c.version_id WHERE c.source = ?`), source); err != nil {
		return MemoryVersion{}, notFound(err, "current memory of %q", source)
	}
	return v, nil
}

// GetMemoryVersion returns version id, or an error wrapping ErrNotFound.
func (s *Store) GetMemoryVersion(ctx context.Context, id string) (MemoryVersion, error) {
	var v MemoryVersion
	if err := s.db.GetContext(ctx, &v, s.q(`SELECT `+memoryCols+` FROM memory_versions WHERE version_id = ?`), id); err != nil {
		return MemoryVersion{}, notFound(err, "memory version %q", id)
	}
	return v, nil
}

func prefixCols(p, cols string) string {
	out := ""
	for i, c := range splitCols(cols) {
		if i > 0 {
			out += ", "
		}
		out += p + c
	}
	return out
}

func splitCols(cols string) []string {
	var out []string
	cur := ""
	for _, r := range cols {
		switch r {
		case ',':
			out = append(out, cur)
			cur = ""
		case ' ', '\n', '\t':
		default:
			cur += string(r)
		}
	}
	return append(out, cur)
}

// StoredTurn is one stored turn result of a conversation.
type StoredTurn struct {
	WorkflowID string          `db:"workflow_id"`
	Result     json.RawMessage `db:"-"`
	SavedAt    time.Time       `db:"-"`
}

// ConversationTurns returns the stored turn results of conversation, oldest first (at most
// the last limit).
func (s *Store) ConversationTurns(ctx context.Context, conversation string, limit int) ([]StoredTurn, error) {
	var rows []struct {
		WorkflowID string `db:"workflow_id"`
		Result     []byte `db:"result"`
		SavedAt    dbTime `db:"saved_at"`
	}
	if err := s.db.SelectContext(ctx, &rows, s.q(`SELECT workflow_id, result, saved_at FROM (SELECT workflow_id, result, saved_at
		FROM turn_results WHERE conversation = ? ORDER BY saved_at DESC, workflow_id DESC LIMIT ?) recent ORDER BY saved_at, workflow_id`),
		conversation, limit); err != nil {
		return nil, fmt.Errorf("store: turns of %q: %w", conversation, err)
	}
	out := make([]StoredTurn, len(rows))
	for i, r := range rows {
		out[i] = StoredTurn{WorkflowID: r.WorkflowID, Result: rawJSON(r.Result), SavedAt: r.SavedAt.Time}
	}
	return out, nil
}
