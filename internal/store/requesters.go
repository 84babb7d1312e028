package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TurnRequester is the authenticated requester of one turn run (issue 21): the principal its
// request was attested for, the client credential that attested it, the attestation's
// signature (one attestation starts one run chain: FirstRunID, the run Temporal started,
// and its retries) and the turn's start time (the server's, against which the attestation's
// age was checked).
type TurnRequester struct {
	WorkflowID string    `db:"workflow_id"`
	RunID      string    `db:"run_id"`
	FirstRunID string    `db:"first_run_id"`
	Principal  string    `db:"principal"`
	Client     string    `db:"client"`
	Signature  string    `db:"signature"`
	At         time.Time `db:"-"`
}

type requesterRow struct {
	TurnRequester
	AtCol dbTime `db:"at"`
}

const requesterCols = `workflow_id, run_id, first_run_id, principal, client, signature, at`

// ErrAttestationUsed: RecordRequester for an attestation another run chain already recorded.
var ErrAttestationUsed = errors.New("store: the attestation already started another turn run")

// RecordRequester records r unless its run has a requester already (a retried first round:
// the stored row is returned unchanged). Errors: ErrAttestationUsed when a run of another
// chain (another FirstRunID: a second start of the workflow id) recorded the same signature,
// or r's run recorded another one. Runs of one workflow id never run at once, so the check
// and the insert need no transaction.
func (s *Store) RecordRequester(ctx context.Context, r TurnRequester) (TurnRequester, error) {
	if r.WorkflowID == "" || r.Signature == "" || r.Client == "" {
		return TurnRequester{}, errors.New("store: a turn requester needs a workflow id, a client and a signature")
	}
	if r.FirstRunID == "" {
		r.FirstRunID = r.RunID
	}
	if s.driver == DriverPostgres {
		return s.recordRequesterPG(ctx, r)
	}
	var chains []string
	if err := s.db.SelectContext(ctx, &chains, s.q(`SELECT first_run_id FROM turn_requesters WHERE signature = ?`), r.Signature); err != nil {
		return TurnRequester{}, fmt.Errorf("store: record turn requester: %w", err)
	}
	for _, c := range chains {
		if c != r.FirstRunID {
			return TurnRequester{}, ErrAttestationUsed
		}
	}
	// RETURNING: the row just inserted comes back in the same round trip; nothing comes back
	// when the run has a requester already (a retry, or another signature), read below.
	var ins requesterRow
	err := s.db.GetContext(ctx, &ins, s.q(`INSERT INTO turn_requesters (`+requesterCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING `+requesterCols),
		r.WorkflowID, r.RunID, r.FirstRunID, r.Principal, r.Client, r.Signature, tsArg(orNow(r.At)))
	if err == nil {
		ins.TurnRequester.At = ins.AtCol.Time
		return ins.TurnRequester, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return TurnRequester{}, fmt.Errorf("store: record turn requester: %w", err)
	}
	return s.recordedRequester(ctx, r)
}

// recordRequesterPG is RecordRequester in one PostgreSQL round trip (a turn's first round pays
// it): the check for another chain's use of the signature, the insert (made only when there is
// none) and the inserted row, in one statement. Its one row says how many other chains used
// the signature and, when the insert was made, the row it inserted; a run that has a requester
// already is read as RecordRequester reads it.
func (s *Store) recordRequesterPG(ctx context.Context, r TurnRequester) (TurnRequester, error) {
	var row struct {
		Other    int  `db:"other"`
		Inserted bool `db:"inserted"`
		requesterRow
	}
	err := s.db.GetContext(ctx, &row, s.q(`WITH other AS (
			SELECT count(*) AS n FROM turn_requesters WHERE signature = ? AND first_run_id <> ?),
		ins AS (
			INSERT INTO turn_requesters (`+requesterCols+`) SELECT ?, ?, ?, ?, ?, ?, ?
			WHERE (SELECT n FROM other) = 0 ON CONFLICT DO NOTHING RETURNING `+requesterCols+`)
		SELECT o.n AS other, i.workflow_id IS NOT NULL AS inserted,
			COALESCE(i.workflow_id, '') AS workflow_id, COALESCE(i.run_id, '') AS run_id,
			COALESCE(i.first_run_id, '') AS first_run_id, COALESCE(i.principal, '') AS principal,
			COALESCE(i.client, '') AS client, COALESCE(i.signature, '') AS signature, COALESCE(i.at, now()) AS at
		FROM other o LEFT JOIN ins i ON true`),
		r.Signature, r.FirstRunID,
		r.WorkflowID, r.RunID, r.FirstRunID, r.Principal, r.Client, r.Signature, tsArg(orNow(r.At)))
	switch {
	case err != nil:
		return TurnRequester{}, fmt.Errorf("store: record turn requester: %w", err)
	case row.Other > 0:
		return TurnRequester{}, ErrAttestationUsed
	case row.Inserted:
		row.TurnRequester.At = row.AtCol.Time
		return row.TurnRequester, nil
	}
	return s.recordedRequester(ctx, r)
}

// recordedRequester is RecordRequester's answer when r's insert was not made because its run
// has a requester already: that one when it carries r's signature (a retry), else
// ErrAttestationUsed.
func (s *Store) recordedRequester(ctx context.Context, r TurnRequester) (TurnRequester, error) {
	got, err := s.GetRequester(ctx, r.WorkflowID, r.RunID)
	if errors.Is(err, ErrNotFound) {
		return TurnRequester{}, ErrAttestationUsed
	}
	if err != nil {
		return TurnRequester{}, err
	}
	if got.Signature != r.Signature {
		return got, ErrAttestationUsed
	}
	return got, nil
}

// GetRequester returns the requester of run runID of workflowID ("" = its latest recorded
// run), or an error wrapping ErrNotFound (a turn from before requesters were recorded, or one
// whose request was refused).
func (s *Store) GetRequester(ctx context.Context, workflowID, runID string) (TurnRequester, error) {
	var r requesterRow
	var err error
	if runID == "" {
		err = s.db.GetContext(ctx, &r, s.q(`SELECT `+requesterCols+` FROM turn_requesters WHERE workflow_id = ? ORDER BY at DESC LIMIT 1`), workflowID)
	} else {
		err = s.db.GetContext(ctx, &r, s.q(`SELECT `+requesterCols+` FROM turn_requesters WHERE workflow_id = ? AND run_id = ?`), workflowID, runID)
	}
	if err != nil {
		return TurnRequester{}, notFound(err, "turn requester")
	}
	r.TurnRequester.At = r.AtCol.Time
	return r.TurnRequester, nil
}

// ChainStart returns when the run chain firstRunID of workflowID started, as its first
// recorded requester says (TurnRequester.At is the turn's start), and whether it has one: a
// workflow retry checks its attestation's age against the chain's start, not its own.
func (s *Store) ChainStart(ctx context.Context, workflowID, firstRunID string) (time.Time, bool, error) {
	var r requesterRow
	err := s.db.GetContext(ctx, &r, s.q(`SELECT `+requesterCols+` FROM turn_requesters WHERE workflow_id = ? AND first_run_id = ? ORDER BY at LIMIT 1`), workflowID, firstRunID)
	if errors.Is(notFound(err, "turn requester"), ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: chain start: %w", err)
	}
	return r.AtCol.Time, true, nil
}

// BindConversation makes principal the owner of conversation unless it has one (the first
// proven turn binds it, workflowID names that turn) and returns the owner, which callers
// compare with the turn's principal exactly (as written, like client scopes). Idempotent.
func (s *Store) BindConversation(ctx context.Context, conversation, principal, workflowID string, at time.Time) (string, error) {
	if conversation == "" || principal == "" {
		return "", errors.New("store: binding a conversation needs a conversation and a principal")
	}
	bind := `INSERT INTO conversation_principals (conversation, principal, workflow_id, at)
		VALUES (?, ?, ?, ?) ON CONFLICT (conversation) DO NOTHING`
	var owner string
	if s.driver == DriverPostgres {
		// One round trip whether the conversation is new or not: the insert's row when it
		// bound it, else the owner stored before the statement (its snapshot).
		err := s.db.GetContext(ctx, &owner, s.q(`WITH bound AS (`+bind+` RETURNING principal)
			SELECT principal FROM bound UNION ALL
			SELECT principal FROM conversation_principals WHERE conversation = ? LIMIT 1`),
			conversation, principal, workflowID, tsArg(orNow(at)), conversation)
		if err == nil {
			return owner, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("store: bind conversation %q: %w", conversation, err)
		}
		// Neither: another statement bound it after this one's snapshot was taken (two first
		// turns at once); the owner it stored is read below.
	} else if _, err := s.db.ExecContext(ctx, s.q(bind), conversation, principal, workflowID, tsArg(orNow(at))); err != nil {
		return "", fmt.Errorf("store: bind conversation %q: %w", conversation, err)
	}
	if err := s.db.GetContext(ctx, &owner, s.q(`SELECT principal FROM conversation_principals WHERE conversation = ?`), conversation); err != nil {
		return "", fmt.Errorf("store: owner of conversation %q: %w", conversation, err)
	}
	return owner, nil
}
