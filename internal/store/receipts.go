package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlock-dev/airlock/internal/receipts"
)

// The receipts log (issue 36): every audit row hands the log a draft (receipt_drafts: the row
// and the facts its writer knew) in the statement or transaction that writes the row, so a
// draft exists exactly when its row does: a retried activity, a replayed workflow or a crash
// between the two writes neither a second draft nor a gap, and the row's write reads nothing
// more and waits for no lock. SequenceReceipts turns drafts into records in the order they
// were written, in batches: it takes the one receipt_head row's lock (SELECT … FOR UPDATE on
// PostgreSQL; a SQLite transaction holds the database's write lock already), builds each
// row's records (a call's read its confirmation, approvals and requester: facts a recorded
// decision fixes), advances the tree by each record's leaf, signs each new tree's checkpoint
// when the store has a log key (UseReceiptKey), stores the records with their indices,
// proofs and checkpoints and deletes the drafts, all in one transaction. A store with a key
// sequences in the background (within about sequenceGap of an append).

// ReceiptFacts is what the writer of an audit row knows of the call beyond the row itself,
// for its authorization and settlement records. Every member is optional.
type ReceiptFacts struct {
	// Rule is why an automatic call ran without a person (receipts.Authorization.Rule):
	// "local_read_only", "internal_read" or "user_provided".
	Rule string
	// RegistryRevision is the served registry's revision; Fingerprint the capability's
	// registry fingerprint; MCPPin the pinned MCP definition's digest (MCP tools).
	RegistryRevision, Fingerprint, MCPPin string
	// Quorum is how many approvals the capability's policy asks for.
	Quorum int
	// ResultDigest is receipts.Digest of the result as recorded for the model.
	ResultDigest string
}

// callOutcomes are the audit outcomes of a call: each leaves an authorization and a
// settlement record. Any other audit row leaves one event record.
var callOutcomes = map[string]string{
	"executed": receipts.SettlementExecuted, "failed": receipts.SettlementFailed,
	"outcome_unknown": receipts.SettlementOutcomeUnknown, "denied": receipts.SettlementDenied,
	"expired": receipts.SettlementExpired, "rejected": receipts.SettlementRefused,
	"parse_failed": receipts.SettlementRefused, "budget_exhausted": receipts.SettlementRefused,
	"captured": receipts.SettlementCaptured,
}

// ErrNoReceiptKey: signing a checkpoint needs the log key, and the store has none
// (UseReceiptKey).
var ErrNoReceiptKey = errors.New("store: no receipts log key")

// UseReceiptKey makes sequencing sign each tree's checkpoint with sg (nil: sequence unsigned;
// a later signed checkpoint covers those records), and starts the store's background
// sequencer (SequenceReceipts after each append, and every half second), which Close stops.
func (s *Store) UseReceiptKey(sg *receipts.Signer) {
	s.receiptKey.Store(sg)
	s.seqOnce.Do(func() {
		s.seqRunning.Store(true)
		go s.runSequencer()
	})
}

// ReceiptKey is the key UseReceiptKey set (nil: none).
func (s *Store) ReceiptKey() *receipts.Signer { return s.receiptKey.Load() }

// appendAuditTx appends e and, when this call inserted it, its draft: one statement on
// PostgreSQL (a data-modifying WITH, atomic by itself), a transaction on SQLite.
func (s *Store) appendAuditTx(ctx context.Context, e AuditEvent) (bool, error) {
	e.At = orNow(e.At)
	var inserted bool
	if s.driver == DriverPostgres {
		aq, args := auditInsert(e)
		dq, dargs, err := auditDraftInsert(e, `EXISTS (SELECT 1 FROM audit)`)
		if err != nil {
			return false, err
		}
		var n int64
		if err := s.db.GetContext(ctx, &n, s.q(`WITH audit AS (`+aq+` RETURNING 1), drafted AS (`+dq+`) SELECT count(*) FROM audit`),
			append(args, dargs...)...); err != nil {
			return false, fmt.Errorf("store: append audit event %q: %w", e.Key, err)
		}
		inserted = n == 1
	} else if err := s.inTx(ctx, "append audit event "+e.Key, func(tx *sqlx.Tx) error {
		var err error
		if inserted, err = s.appendAudit(ctx, tx, e); err != nil || !inserted {
			return err
		}
		return s.appendReceipts(ctx, tx, e)
	}); err != nil {
		return false, err
	}
	if inserted {
		s.kickSequencer()
	}
	return inserted, nil
}

// appendReceipts writes the draft of audit row e, which this transaction inserted.
func (s *Store) appendReceipts(ctx context.Context, tx *sqlx.Tx, e AuditEvent) error {
	q, args, err := auditDraftInsert(e, "")
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q(q), args...); err != nil {
		return fmt.Errorf("receipts of %q: %w", e.Key, err)
	}
	return nil
}

// editProof gives the confirmation of an approver's edit the edit decision's proof: the edit
// is its own confirmation.
func (s *Store) editProof(ctx context.Context, x sqlx.QueryerContext, in *receiptInput) error {
	if in.conf == nil || in.conf.Proof != "" {
		return nil
	}
	orig, ok := strings.CutPrefix(in.conf.Reason, "edit of ")
	if !ok {
		return nil
	}
	if err := sqlx.GetContext(ctx, x, &in.conf.Proof, s.q(`SELECT approver_proof FROM confirmations WHERE id = ?`), orig); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("proof of the edit %s: %w", orig, err)
	}
	return nil
}

// appendRecords writes recs (records of the event key, built already, in order) through x as
// one draft, to be sequenced.
func (s *Store) appendRecords(ctx context.Context, x sqlx.ExecerContext, key string, recs []receipts.Record) error {
	at := time.Now()
	if len(recs) > 0 {
		at = recs[0].At
	}
	q, args, err := draftInsert(key, receiptDraft{Records: recs}, at, "")
	if err != nil {
		return err
	}
	if _, err := x.ExecContext(ctx, s.q(q), args...); err != nil {
		return fmt.Errorf("receipts of %q: %w", key, err)
	}
	return nil
}

// receiptDraft is what a write hands the receipts log (receipt_drafts.draft): an audit row,
// whose records SequenceReceipts builds, or records built already (an agent proposal's
// decision).
type receiptDraft struct {
	Audit   *AuditEvent       `json:"audit,omitempty"`
	Records []receipts.Record `json:"records,omitempty"`
}

// auditDraftInsert is draftInsert of audit row e's draft.
func auditDraftInsert(e AuditEvent, cond string) (string, []any, error) {
	e.ID = 0
	if len(e.Provenance) > 0 && !json.Valid(e.Provenance) {
		e.Provenance = nil // it only feeds the provenance summary, which reads valid JSON only
	}
	return draftInsert(e.Key, receiptDraft{Audit: &e}, orNow(e.At), cond)
}

// draftInsert is the statement and arguments that write draft d of key; with cond (a SQL
// condition, PostgreSQL's data-modifying WITH) only when it holds. A draft already pending
// under key is kept as it is.
func draftInsert(key string, d receiptDraft, at time.Time, cond string) (string, []any, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return "", nil, fmt.Errorf("receipts of %q: draft: %w", key, err)
	}
	args := []any{key, bytesArg(b), tsArg(at)}
	if cond != "" {
		return `INSERT INTO receipt_drafts (event_key, draft, at) SELECT ?::text, ?::bytea, ?::timestamptz WHERE ` + cond +
			` ON CONFLICT (event_key) DO NOTHING`, args, nil
	}
	return `INSERT INTO receipt_drafts (event_key, draft, at) VALUES (?, ?, ?) ON CONFLICT (event_key) DO NOTHING`, args, nil
}

// SequenceReceipts turns every draft written so far into its records and gives them their
// places in the tree, in the order the drafts were written, in batches of at most
// receiptBatch drafts: one transaction each that locks the head, builds the records, appends
// the leaves, signs each new tree's checkpoint (with the store's key, when it has one),
// stores the records with their indices, proofs and checkpoints and deletes the drafts. It
// returns how many records it sequenced. Safe to run from several processes at once: the
// head's lock orders them.
func (s *Store) SequenceReceipts(ctx context.Context) (int, error) {
	total := 0
	for {
		n, drafts, err := s.sequenceBatch(ctx)
		total += n
		if err != nil || drafts < receiptBatch {
			return total, err
		}
	}
}

// receiptBatch bounds the drafts of one sequencing transaction.
const receiptBatch = 250

// sequenceBatch sequences up to receiptBatch drafts; it returns the records sequenced and the
// drafts it took.
func (s *Store) sequenceBatch(ctx context.Context) (records, drafts int, err error) {
	err = s.inTx(ctx, "sequence receipts", func(tx *sqlx.Tx) error {
		lock := `SELECT size, frontier FROM receipt_head WHERE id = 1`
		if s.driver == DriverPostgres {
			lock += ` FOR UPDATE`
		}
		var head receiptHead
		if err := tx.GetContext(ctx, &head, lock); err != nil {
			return fmt.Errorf("lock the log: %w", err)
		}
		var pending []struct {
			SeqID int64  `db:"seq_id"`
			Key   string `db:"event_key"`
			Draft []byte `db:"draft"`
		}
		if err := tx.SelectContext(ctx, &pending, s.q(`SELECT seq_id, event_key, draft FROM receipt_drafts ORDER BY seq_id LIMIT ?`), receiptBatch); err != nil {
			return fmt.Errorf("read the drafts: %w", err)
		}
		if len(pending) == 0 {
			return nil
		}
		drafts = len(pending)
		// A key whose records the log holds already (a row retention removed, written again
		// by a very late retry) keeps the records it has.
		keys := make([]any, len(pending))
		for i, p := range pending {
			keys[i] = p.Key
		}
		var done []string
		if err := tx.SelectContext(ctx, &done, s.q(`SELECT DISTINCT event_key FROM receipts WHERE event_key IN (?`+strings.Repeat(", ?", len(keys)-1)+`)`), keys...); err != nil {
			return fmt.Errorf("read the records of the drafts: %w", err)
		}
		frontier, err := receipts.SplitHashes(head.Frontier)
		if err != nil {
			return err
		}
		h := receipts.Head{Size: uint64(head.Size), Frontier: frontier}
		sg := s.receiptKey.Load()
		var q strings.Builder
		args := make([]any, 0, 14*len(pending))
		for _, p := range pending {
			if slices.Contains(done, p.Key) {
				continue
			}
			recs, err := s.draftRecords(ctx, tx, p.Key, p.Draft)
			if err != nil {
				return err
			}
			for _, r := range recs {
				leaf, err := r.Leaf()
				if err != nil {
					return fmt.Errorf("receipts of %q: %w", p.Key, err)
				}
				var ap receipts.Appended
				if h, ap, err = h.Append(receipts.LeafHash(leaf)); err != nil {
					return err
				}
				cp := ""
				if sg != nil {
					b, err := sg.Sign(ap.Index+1, ap.Root)
					if err != nil {
						return err
					}
					cp = string(b)
				}
				if records > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(?, ?, ?, ?, ?, ?, ?)")
				args = append(args, int64(ap.Index), p.Key, r.Type, bytesArg(leaf), bytesArg(receipts.JoinHashes(ap.Proof)), cp, tsArg(r.At))
				records++
			}
		}
		if records > 0 {
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO receipts (idx, event_key, part, record, proof, checkpoint, at) VALUES `+q.String()), args...); err != nil {
				return fmt.Errorf("store the records: %w", err)
			}
		}
		ids := make([]any, len(pending))
		for i, p := range pending {
			ids[i] = p.SeqID
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM receipt_drafts WHERE seq_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`), ids...); err != nil {
			return fmt.Errorf("delete the drafts: %w", err)
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE receipt_head SET size = ?, frontier = ? WHERE id = 1 AND size = ?`),
			int64(h.Size), bytesArg(receipts.JoinHashes(h.Frontier)), head.Size)
		if err != nil {
			return fmt.Errorf("advance the head: %w", err)
		}
		if k, err := res.RowsAffected(); err != nil || k != 1 {
			return fmt.Errorf("the head moved under its lock (%d rows, %v)", k, err)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return records, drafts, nil
}

// draftRecords builds the records of one draft (key's) through tx.
func (s *Store) draftRecords(ctx context.Context, tx *sqlx.Tx, key string, raw []byte) ([]receipts.Record, error) {
	var d receiptDraft
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("receipts of %q: draft: %w", key, err)
	}
	if d.Audit == nil {
		return d.Records, nil
	}
	e := *d.Audit
	in, err := s.receiptInputs(ctx, tx, e)
	if err != nil {
		return nil, fmt.Errorf("receipts of %q: %w", key, err)
	}
	if err := s.editProof(ctx, tx, &in); err != nil {
		return nil, fmt.Errorf("receipts of %q: %w", key, err)
	}
	return receiptRecords(e, in), nil
}

// kickSequencer wakes the background sequencer (UseReceiptKey), if any; it never blocks.
func (s *Store) kickSequencer() {
	select {
	case s.seqKick <- struct{}{}:
	default:
	}
}

// sequenceEvery is how often the background sequencer looks for drafts when nothing woke it
// (drafts another process wrote).
const sequenceEvery = 500 * time.Millisecond

// sequenceGap is the least time between two background sequencing runs: the appends of a
// busy worker are sequenced together, one transaction for many rows, instead of one each.
const sequenceGap = 50 * time.Millisecond

// runSequencer sequences drafts whenever an append of this store wakes it (at most once a
// sequenceGap), and every sequenceEvery, until the store closes. Errors are retried at the
// next wake.
func (s *Store) runSequencer() {
	defer close(s.seqDone)
	t := time.NewTicker(sequenceEvery)
	defer t.Stop()
	for {
		select {
		case <-s.seqStop:
			return
		case <-s.seqKick:
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, _ = s.SequenceReceipts(ctx)
		cancel()
		select {
		case <-s.seqStop:
			return
		case <-time.After(sequenceGap):
		}
	}
}

// receiptHead is the receipt_head row as read under its lock.
type receiptHead struct {
	Size     int64  `db:"size" json:"size"`
	Frontier []byte `db:"frontier" json:"frontier"`
}

// receiptConfirmation is what the records of a call held for people read of its confirmation.
type receiptConfirmation struct {
	ID               string `db:"id" json:"id"`
	Created          dbTime `db:"created_at" json:"created_at"`
	Expires          dbTime `db:"expires_at" json:"expires_at"`
	Decided          dbTime `db:"decided_at" json:"decided_at"`
	Decision         string `db:"decision" json:"decision"`
	Approver         string `db:"approver" json:"approver"`
	Reason           string `db:"reason" json:"reason"`
	Proof            string `db:"approver_proof" json:"approver_proof"`
	RegistryRevision string `db:"registry_revision" json:"registry_revision"`
	Provenance       string `db:"provenance" json:"provenance"`
}

// receiptRequester is the proven requester of the row's run.
type receiptRequester struct {
	Principal string `db:"principal" json:"principal"`
	Client    string `db:"client" json:"client"`
	Signature string `db:"signature" json:"signature"`
	At        dbTime `db:"at" json:"at"`
}

// receiptApproval is one approval of the row's confirmation.
type receiptApproval struct {
	Approver string `db:"approver" json:"approver"`
	Proof    string `db:"proof" json:"proof"`
	At       dbTime `db:"at" json:"at"`
}

// receiptInput is what the records of an audit row read: the run's requester, the proposal's
// confirmation and its approvals (nil and empty when none).
type receiptInput struct {
	requester *receiptRequester
	conf      *receiptConfirmation
	approvals []receiptApproval
}

// receiptConfirmationCols are the columns of a confirmation a call's records read.
const receiptConfirmationCols = `id, created_at, expires_at, decided_at, decision, approver, reason, approver_proof, registry_revision, provenance`

// receiptConfirmationOrder chooses, among the confirmations of one proposal, the one whose
// decision settled it: a proposal can have several (a registry change voids one and surfaces
// the call again under a new one; a stale approver page's), so the decided ones come first,
// the latest decision first, then the newest asked; the id breaks a tie, so the choice never
// depends on the order the database returns rows in.
const receiptConfirmationOrder = ` ORDER BY decision <> '' DESC, decided_at DESC NULLS LAST, created_at DESC, id DESC LIMIT 1`

// receiptInputsPG is receiptInputs' one PostgreSQL round trip: JSON functions carry the
// requester, the one confirmation chosen (in the CTE c, by where) and its approvals in one
// row. $1, $2 are the row's workflow and run; where reads $3.
func receiptInputsPG(where string) string {
	return `WITH c AS (SELECT ` + receiptConfirmationCols + ` FROM confirmations WHERE ` + where + receiptConfirmationOrder + `)
	SELECT (SELECT row_to_json(r) FROM (SELECT principal, client, signature, at FROM turn_requesters
		WHERE workflow_id = $1 AND run_id = $2) r) AS requester,
	(SELECT row_to_json(c) FROM c) AS confirmation,
	(SELECT json_agg(a ORDER BY a.at, a.approver) FROM (SELECT ca.approver, ca.proof, ca.at FROM confirmation_approvals ca
		JOIN c ON c.id = ca.confirmation_id) a) AS approvals`
}

var (
	// receiptInputsBySeqPG reads the proposal's confirmation by ($1, $2, $3 = seq).
	receiptInputsBySeqPG = receiptInputsPG(`workflow_id = $1 AND run_id = $2 AND seq = $3`)
	// receiptInputsByIDPG reads the confirmation $3 (an id).
	receiptInputsByIDPG = receiptInputsPG(`id = $3`)
)

// receiptNeedsInputs reports whether the records of audit row e read anything beyond the
// row: a call's outcome does (its authorization names the requester, the confirmation and
// its approvals); any other row's one event record is the row itself.
func receiptNeedsInputs(e AuditEvent) bool {
	_, isCall := callOutcomes[e.Outcome]
	return isCall
}

// receiptInputs reads what the records of audit row e need through x (the store or a
// transaction): one statement on PostgreSQL, a few in-process reads on SQLite; nothing for a
// row that needs nothing (receiptNeedsInputs). The confirmation is e.ConfirmationID when set,
// else the one receiptConfirmationOrder chooses among the proposal's; its approvals only.
func (s *Store) receiptInputs(ctx context.Context, x sqlx.QueryerContext, e AuditEvent) (receiptInput, error) {
	var in receiptInput
	if !receiptNeedsInputs(e) {
		return in, nil
	}
	if s.driver == DriverPostgres {
		q, third := receiptInputsBySeqPG, any(e.Seq)
		if e.ConfirmationID != "" {
			q, third = receiptInputsByIDPG, e.ConfirmationID
		}
		var requester, confirmation, approvals []byte
		if err := x.QueryRowxContext(ctx, q, e.WorkflowID, e.RunID, third).Scan(&requester, &confirmation, &approvals); err != nil {
			return in, fmt.Errorf("read the call's confirmation and requester: %w", err)
		}
		if requester != nil {
			in.requester = &receiptRequester{}
			if err := json.Unmarshal(requester, in.requester); err != nil {
				return in, fmt.Errorf("requester: %w", err)
			}
		}
		if confirmation != nil {
			in.conf = &receiptConfirmation{}
			if err := json.Unmarshal(confirmation, in.conf); err != nil {
				return in, fmt.Errorf("confirmation: %w", err)
			}
		}
		if approvals != nil {
			if err := json.Unmarshal(approvals, &in.approvals); err != nil {
				return in, fmt.Errorf("approvals: %w", err)
			}
		}
		return in, nil
	}
	var rq receiptRequester
	switch err := sqlx.GetContext(ctx, x, &rq, `SELECT principal, client, signature, at FROM turn_requesters WHERE workflow_id = ? AND run_id = ?`, e.WorkflowID, e.RunID); {
	case err == nil:
		in.requester = &rq
	case !errors.Is(err, sql.ErrNoRows):
		return in, fmt.Errorf("requester: %w", err)
	}
	cq, cargs := `SELECT `+receiptConfirmationCols+` FROM confirmations WHERE workflow_id = ? AND run_id = ? AND seq = ?`+receiptConfirmationOrder,
		[]any{e.WorkflowID, e.RunID, e.Seq}
	if e.ConfirmationID != "" {
		cq, cargs = `SELECT `+receiptConfirmationCols+` FROM confirmations WHERE id = ?`, []any{e.ConfirmationID}
	}
	var c receiptConfirmation
	switch err := sqlx.GetContext(ctx, x, &c, cq, cargs...); {
	case err == nil:
		in.conf = &c
	case !errors.Is(err, sql.ErrNoRows):
		return in, fmt.Errorf("confirmation: %w", err)
	}
	if in.conf != nil {
		if err := sqlx.SelectContext(ctx, x, &in.approvals, `SELECT approver, proof, at FROM confirmation_approvals WHERE confirmation_id = ? ORDER BY at, approver`, c.ID); err != nil {
			return in, fmt.Errorf("approvals: %w", err)
		}
	}
	return in, nil
}

// receiptRecords builds the records of audit row e from the row, its facts and in.
func receiptRecords(e AuditEvent, in receiptInput) []receipts.Record {
	at := orNow(e.At).UTC().Truncate(time.Microsecond)
	base := receipts.Record{V: receipts.Version, Event: e.Key, Turn: e.WorkflowID, Run: e.RunID, Seq: e.Seq, CallID: e.CallID,
		Capability: e.CapabilityID, Version: e.Version, ArgsDigest: e.ArgsDigest, At: at}
	settled, isCall := callOutcomes[e.Outcome]
	if !isCall {
		ev := base
		ev.Type = receipts.TypeEvent
		ev.Audit = &receipts.Audit{Outcome: e.Outcome, Stage: e.Stage, Reason: e.Reason, Detail: e.Detail, Approver: e.Approver, OriginalDigest: e.OriginalDigest}
		return []receipts.Record{ev}
	}
	var f ReceiptFacts
	if e.Facts != nil {
		f = *e.Facts
	}
	auth := &receipts.Authorization{RegistryRevision: f.RegistryRevision, Fingerprint: f.Fingerprint, MCPPin: f.MCPPin, Quorum: f.Quorum}
	if rq := in.requester; rq != nil {
		auth.Requester = &receipts.Requester{Principal: rq.Principal, Client: rq.Client, Attestation: receipts.Digest([]byte(rq.Signature)), At: rq.At.Time}
	}
	provenance := e.Provenance
	switch {
	case e.Outcome == "rejected" || e.Outcome == "parse_failed" || e.Outcome == "budget_exhausted":
		auth.Mode, auth.Rule = receipts.ModeRefused, e.Stage+":"+e.Reason
	case e.Outcome == "captured":
		auth.Mode, auth.Rule = receipts.ModeAutomatic, "agent_proposal"
	case in.conf == nil:
		auth.Mode, auth.Rule = receipts.ModeAutomatic, f.Rule
		if auth.Rule == "" {
			auth.Rule = "local_read_only"
		}
	default:
		humanAuthorization(auth, *in.conf, in.approvals)
		if len(provenance) == 0 && in.conf.Provenance != "" {
			provenance = json.RawMessage(in.conf.Provenance)
		}
	}
	auth.Provenance = provenanceSummary(provenance)
	if auth.Mode != receipts.ModeHuman {
		auth.Quorum = 0 // no one was asked
	}
	a := base
	a.Type, a.Authorization = receipts.TypeAuthorization, auth
	if auth.DecidedAt != nil {
		a.At = *auth.DecidedAt
	}
	st := base
	st.Type = receipts.TypeSettlement
	st.Settlement = &receipts.Settlement{Outcome: settled, Stage: e.Stage, Reason: e.Reason, ResultDigest: f.ResultDigest, Approver: e.Approver}
	if settled != e.Outcome {
		st.Settlement.AuditOutcome = e.Outcome
	}
	return []receipts.Record{a, st}
}

// humanAuthorization fills auth from the confirmation c of a call put to people and its
// approvals (a quorum's).
func humanAuthorization(auth *receipts.Authorization, c receiptConfirmation, approvals []receiptApproval) {
	auth.Mode, auth.Rule = receipts.ModeHuman, "confirmation"
	auth.AskedAt, auth.ExpiresAt, auth.DecidedAt, auth.Decision = c.Created.ptr(), c.Expires.ptr(), c.Decided.ptr(), c.Decision
	if c.Reason == ReasonEditedByApprover {
		auth.Decision = "edited"
	}
	if auth.Fingerprint == "" {
		auth.Fingerprint = c.RegistryRevision
	}
	proof, _, _ := strings.Cut(c.Proof, "; quorum of ")
	for _, ap := range approvals {
		if ap.Approver == c.Approver {
			continue // the deciding approver comes last, with the decision's proof
		}
		auth.Approvers = append(auth.Approvers, receipts.Approver{Name: ap.Approver, ProofKind: ProofKind(ap.Proof), Proof: ap.Proof, At: ap.At.ptr()})
	}
	if c.Approver != "" && c.Decision != DecisionExpired {
		auth.Approvers = append(auth.Approvers, receipts.Approver{Name: c.Approver, ProofKind: ProofKind(proof), Proof: proof, At: c.Decided.ptr()})
	}
	if auth.Quorum == 0 && len(approvals) > 1 {
		auth.Quorum = len(approvals)
	}
}

// ProofKind maps Airlock's wording of an approver's proof (activities.ProofOf) to its
// receipts.Proof* kind.
func ProofKind(proof string) string {
	p := strings.ToLower(proof)
	switch {
	case strings.HasPrefix(p, "passkey"):
		return receipts.ProofPasskey
	case strings.Contains(p, "slack"):
		return receipts.ProofSlackUser
	case strings.Contains(p, "session on approver page"):
		return receipts.ProofPageSession
	case strings.Contains(p, "cli credential"):
		return receipts.ProofCLICredential
	case p == "":
		return receipts.ProofNotRecorded
	}
	return receipts.ProofUnattested
}

// provenanceSummary reads a provenance.Report's values as (path, source kinds): where each
// argument value was found, without the value.
func provenanceSummary(raw json.RawMessage) []receipts.ProvenanceValue {
	if len(raw) == 0 {
		return nil
	}
	var rep struct {
		Values []struct {
			Path    string `json:"path"`
			Status  string `json:"status"`
			Sources []struct {
				Kind string `json:"kind"`
			} `json:"sources"`
		} `json:"values"`
	}
	if json.Unmarshal(raw, &rep) != nil {
		return nil
	}
	var out []receipts.ProvenanceValue
	for _, v := range rep.Values {
		var kinds []string
		for _, s := range v.Sources {
			if !slices.Contains(kinds, s.Kind) {
				kinds = append(kinds, s.Kind)
			}
		}
		slices.Sort(kinds)
		out = append(out, receipts.ProvenanceValue{Path: v.Path, Status: v.Status, Sources: kinds})
	}
	return out
}

// ReceiptTypes are the types of the records an audit row of outcome leaves in the log: an
// authorization and a settlement for a call's outcome, one event for any other row.
func ReceiptTypes(outcome string) []string {
	if _, ok := callOutcomes[outcome]; ok {
		return []string{receipts.TypeAuthorization, receipts.TypeSettlement}
	}
	return []string{receipts.TypeEvent}
}
