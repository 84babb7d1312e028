package present

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/registry"
)

// Input is the presentation.Input of a stored confirmation alone: what the row holds (the
// requester, the votes and the outcome are read by Present). The tool name is the stored
// display line's first word.
func Input(row store.Confirmation) presentation.Input {
	in := presentation.Input{ID: row.ID, WorkflowID: row.WorkflowID, CallID: row.CallID, Seq: row.Seq,
		CapabilityID: row.CapabilityID, Version: row.Version, ToolName: toolOf(row.Display), Arguments: row.Arguments,
		ArgsDigest: row.ArgsDigest, Provenance: row.Provenance, UserRequest: row.UserRequest, Groups: row.ApproverGroups,
		Quorum: row.Quorum, PasskeyRequired: row.PasskeyRequired, DistinctApprover: row.DistinctApprover, CreatedAt: row.CreatedAt, ExpiresAt: row.ExpiresAt,
		Decision: row.Decision, Reason: row.Reason, DecidedAt: row.DecidedAt, DecidedBy: row.Approver}
	if row.Approver != "" && row.ApproverProof != "" {
		in.DecidedBy = row.Approver + " · " + row.ApproverProof
	}
	if len(row.Disclosure) > 0 {
		var d registry.Disclosure
		if json.Unmarshal(row.Disclosure, &d) == nil {
			in.Disclosure = &d
		}
	}
	return in
}

// Gather completes in (from Input) with what the store knows around row: the attested
// requester, the approvals counted so far and, once decided, the call's audited outcome.
// Errors are the store's; a requester or outcome not recorded is no error.
func Gather(ctx context.Context, st *store.Store, row store.Confirmation, in *presentation.Input) error {
	if rq, err := st.GetRequester(ctx, row.WorkflowID, row.RunID); err == nil {
		in.RequesterPrincipal, in.RequesterClient = rq.Principal, rq.Client
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("present: requester of %s: %w", row.ID, err)
	}
	as, err := st.ListApprovals(ctx, row.ID)
	if err != nil {
		return fmt.Errorf("present: approvals of %s: %w", row.ID, err)
	}
	in.Approvals = nil
	for _, a := range as {
		in.Approvals = append(in.Approvals, a.Approver)
	}
	if row.Decision == store.DecisionApproved {
		evs, err := st.ListAudit(ctx, row.WorkflowID)
		if err != nil {
			return fmt.Errorf("present: outcome of %s: %w", row.ID, err)
		}
		in.Outcome = OutcomeOf(evs, row)
	}
	return nil
}

// OutcomeOf is the audited outcome of row's call among a turn's audit rows: the last row of
// its proposal (same run and seq) that settles a call (executed, failed, outcome_unknown,
// rejected, denied, expired); "" while none does.
func OutcomeOf(evs []store.AuditEvent, row store.Confirmation) string {
	out := ""
	for _, e := range evs {
		if e.Seq != row.Seq || (row.RunID != "" && e.RunID != row.RunID) || e.CapabilityID != row.CapabilityID {
			continue
		}
		switch e.Outcome {
		case "executed", "failed", "outcome_unknown", "rejected", "denied", "expired":
			out = e.Outcome
		}
	}
	return out
}

// Present is the canonical presentation of row for viewer ("" for none) at now: Input,
// Gather, presentation.Build. A store error leaves out what it could not read (the row's own
// facts are always there) and is returned beside it.
func Present(ctx context.Context, st *store.Store, row store.Confirmation, viewer string, now time.Time) (presentation.Confirmation, error) {
	in := Input(row)
	in.Viewer, in.Now = viewer, now
	err := Gather(ctx, st, row, &in)
	return presentation.Build(in), err
}

// toolOf is the model's tool name from a confirmation's display line ("name {args}").
func toolOf(displayLine string) string {
	for i, ch := range displayLine {
		if ch == ' ' {
			return displayLine[:i]
		}
	}
	return displayLine
}
