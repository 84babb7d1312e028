package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/store"
)

// Requester authentication (issue 21, item 1): the first inference round of a turn verifies
// the starter's attestation before it stores the user's message or asks the model, inside the
// activity that runs first anyway, so it costs no extra round trip. A refused request is
// audited (AuditTurnRefused) and ends the turn with ErrTypeRequesterRefused, which the
// workflow turns into the end reason "unattested".

// ErrTypeRequesterRefused is the application error type of a turn whose request does not
// prove its requester; the error's details hold the clients refusal code (clients.Refusal*)
// and its detail.
const ErrTypeRequesterRefused = "RequesterRefused"

// AuditTurnRefused is the audit kind of a turn whose request did not prove its requester:
// Reason is the refusal code (clients.Refusal*), Detail says why. A proven requester is kept
// in the store instead (store.TurnRequester), for every surface to show.
const AuditTurnRefused = "turn_refused"

// verifyRequester checks the attestation of the turn's request (on round 1) and records the
// proven requester (store.RecordRequester), which also makes the attestation single-use. It returns nil for a proven requester, a non-retryable
// ErrTypeRequesterRefused error for a refused one (audited), any other error for a store
// failure (retried).
func (a *Activities) verifyRequester(ctx context.Context, in InferInput) error {
	f := in.Fold
	req := clients.Request{Conversation: in.Conversation, Principal: f.Principal, Message: f.UserMessage, SystemPrompt: f.SystemPrompt, Terms: f.Terms}
	// The window is checked against the turn's start as the Temporal server recorded it, not
	// this worker's clock: a turn that waited for a worker is not refused for the wait.
	started := f.StartedAt
	if started.IsZero() {
		started = a.now()
	}
	if f.FirstRunID != "" && f.FirstRunID != f.RunID {
		// A retry or reset of a run chain: the attestation was fresh when the chain started.
		if at, ok, err := a.Store.ChainStart(ctx, in.WorkflowID, f.FirstRunID); err != nil {
			return fmt.Errorf("read the turn's requester: %w", err)
		} else if ok {
			started = at
		}
	}
	var cl clients.Client
	var err error
	switch {
	case a.Clients == nil:
		err = &clients.RefusedError{Code: clients.RefusalNoClients, Detail: "this worker has no clients file, so no requester can be authenticated"}
	default:
		set, lerr := a.Clients()
		if lerr != nil {
			err = &clients.RefusedError{Code: clients.RefusalNoClients, Detail: "the worker cannot read its clients file: " + lerr.Error()}
		} else {
			cl, err = set.Verify(in.WorkflowID, req, f.Attestation, started)
		}
	}
	if err == nil {
		// A conversation is its first proven principal's: another principal's turn would read
		// their context and write "user" messages provenance takes for theirs.
		owner, berr := a.Store.BindConversation(ctx, in.Conversation, f.Principal, in.WorkflowID, started)
		if berr != nil {
			return fmt.Errorf("bind the turn's conversation: %w", berr)
		}
		if owner != f.Principal {
			err = &clients.RefusedError{Code: clients.RefusalOtherConversation, Detail: fmt.Sprintf(
				"conversation %q belongs to principal %q (its first turn); a turn for %q must use a conversation of its own", in.Conversation, owner, f.Principal)}
		}
	}
	if err == nil {
		// The proven requester is recorded for every surface (pending, audit, page) and one
		// attestation starts one run: a second run of the workflow id (a start with another
		// reuse policy by someone who read the first request in history) is refused.
		_, rerr := a.Store.RecordRequester(ctx, store.TurnRequester{WorkflowID: in.WorkflowID, RunID: f.RunID, FirstRunID: f.FirstRunID,
			Principal: f.Principal, Client: cl.Name, Signature: f.Attestation.Signature, At: started})
		switch {
		case errors.Is(rerr, store.ErrAttestationUsed):
			err = &clients.RefusedError{Code: clients.RefusalReplayed, Detail: "this attestation already started another execution of the turn (a request starts one run and its retries)"}
		case rerr != nil:
			return fmt.Errorf("record the turn's requester: %w", rerr)
		default:
			return nil
		}
	}
	var ref *clients.RefusedError
	if !errors.As(err, &ref) {
		return err
	}
	ev := store.AuditEvent{Key: in.WorkflowID + "/" + f.RunID + "/" + AuditTurnRefused, WorkflowID: in.WorkflowID, RunID: f.RunID,
		Stage: "request", Outcome: AuditTurnRefused, Reason: ref.Code, Detail: ref.Detail, At: a.now()}
	if _, aerr := a.Store.AppendAudit(ctx, ev); aerr != nil {
		return fmt.Errorf("audit the turn's refused request: %w", aerr)
	}
	if ref != nil {
		return temporal.NewNonRetryableApplicationError(ref.Error(), ErrTypeRequesterRefused, nil, ref.Code, ref.Detail)
	}
	return nil
}
