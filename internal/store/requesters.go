package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// TurnRequester is the authenticated requester of one turn run (issue 21): the principal its
// request was attested for, the client credential that attested it, the attestation's
// signature (unique: one attestation starts one run) and when the worker verified it.
type TurnRequester struct {
	WorkflowID string    `db:"workflow_id"`
	RunID      string    `db:"run_id"`
	Principal  string    `db:"principal"`
	Client     string    `db:"client"`
	Signature  string    `db:"signature"`
	At         time.Time `db:"-"`
}

type requesterRow struct {
	TurnRequester
	AtCol dbTime `db:"at"`
}

const requesterCols = `workflow_id, run_id, principal, client, signature, at`

// ErrAttestationUsed: RecordRequester for an attestation another run already recorded.
var ErrAttestationUsed = errors.New("store: the attestation already started another turn run")

// RecordRequester records r unless its run has a requester already (a retried first round:
// the stored row is returned unchanged). Errors: ErrAttestationUsed when another run recorded
// the same signature.
func (s *Store) RecordRequester(ctx context.Context, r TurnRequester) (TurnRequester, error) {
	if r.WorkflowID == "" || r.Signature == "" || r.Client == "" {
		return TurnRequester{}, errors.New("store: a turn requester needs a workflow id, a client and a signature")
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO turn_requesters (`+requesterCols+`)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		r.WorkflowID, r.RunID, r.Principal, r.Client, r.Signature, tsArg(orNow(r.At)))
	if err != nil {
		return TurnRequester{}, fmt.Errorf("store: record turn requester: %w", err)
	}
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
