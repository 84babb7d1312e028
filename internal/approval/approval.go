// Package approval is what every approver surface (the CLI, the evaluation's approver, the
// approver page) uses to decide a pending confirmation: it opens the confirmation's sealed
// token with the approver key, signs the decision with it (token.SignDecision: a MAC over the
// confirmation id, decision, approver, reason, argument digest and a fresh nonce) and
// delivers the decision to the turn, as a decide update (the answer comes back at once) or a
// confirmation signal (durable even while no worker runs; the answer is read back from the
// store by nonce). The token itself never leaves this process: not into Temporal history,
// not into the database (DESIGN "Tokens").
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/workflows"
)

// Request is one approver's decision before it is signed.
type Request struct {
	// ConfirmationID names the pending confirmation ("cf-…").
	ConfirmationID string
	// Decision is workflows.DecisionApprove or workflows.DecisionDeny.
	Decision string
	// Approver is the approver identity the surface authenticated.
	Approver string
	// Reason is the deny reason the model receives.
	Reason string
	// Arguments are, for workflows.DecisionEdit only, the approver's exact arguments (a JSON
	// object): the original proposal is denied (edited_by_approver) and these run as a new
	// proposal that passes the executor stages again. The MAC binds their canonical digest.
	Arguments json.RawMessage
	// ArgsDigest is the digest of the arguments the surface displayed ("" when it displayed
	// none: the bound digest is used). A digest that is not the proposal's is refused
	// here (*StaleError) and by the worker (stale_digest).
	ArgsDigest string
	// Signer attests the decision: the approver's own credential, or the approver page's
	// surface credential vouching for Approver. Required (ErrNoCredential).
	Signer approvers.Credential
	// Nonce, when set, is the nonce Challenge chose for this decision (the approver page's
	// passkey flow: the authenticator signed the MAC over it); "" draws a fresh one.
	Nonce string
	// Passkey is the approver's WebAuthn assertion over the decision's MAC (the challenge
	// Challenge returned), required where the confirmation's capability says
	// "approval/passkey" (ErrPasskeyRequired); the worker verifies it.
	Passkey json.RawMessage
	// RepeatCount and RepeatMinutes, on an approval only, also approve the next RepeatCount
	// identical calls (same capability, same argument digest, same principal, same
	// conversation) within RepeatMinutes minutes: a repeat grant (issue 37, item 4; bounds
	// activities.MaxRepeatCalls and MaxRepeatMinutes; refused for a call that needs a quorum).
	// Both 0: none. The MAC binds them (ErrBadRepeat when out of bounds: nothing was sent).
	RepeatCount   int
	RepeatMinutes int
}

// ErrBadRepeat reports a repeat grant out of its bounds, or on a decision that is not an
// approval: nothing was sent.
var ErrBadRepeat = fmt.Errorf("approval: a repeat grant is given only with an approval, for 1 to %d calls within 1 to %d minutes",
	activities.MaxRepeatCalls, activities.MaxRepeatMinutes)

// ErrPasskeyRequired reports a decision without a passkey assertion on a confirmation whose
// capability requires one: nothing was sent. Only the approver page, with a passkey the
// approver registered there, can decide it.
var ErrPasskeyRequired = errors.New("approval: this call must be decided with a passkey: open the approver page (airlock web), sign in, register a passkey under Passkeys if you have none, and decide it there")

// ErrNoCredential reports a Request without a Signer: a decision must prove its approver.
var ErrNoCredential = errors.New("approval: a decision needs an approver credential (airlock approvers add NAME creates one)")

// StaleError reports a decision made on other arguments than the proposal is bound to (a
// stale page): nothing was sent, the token is untouched.
type StaleError struct {
	ConfirmationID, Shown, Bound string
}

// Error says the page was stale.
func (e *StaleError) Error() string {
	return fmt.Sprintf("confirmation %s is bound to arguments with digest %s, but the decision was made on %s: reload and decide on what it asks now",
		e.ConfirmationID, e.Bound, display.Visible(e.Shown))
}

// ErrNotPending reports a confirmation that cannot be decided any more: unknown, expired, or
// decided by another decision first. The concrete error is a *NotPendingError.
var ErrNotPending = errors.New("approval: confirmation is not pending")

// NotPendingError says why a confirmation is not pending; when another decision won, it names
// that decision and its approver.
type NotPendingError struct {
	ConfirmationID string
	// Decision and Approver are the recorded decision (approved, denied, expired) and who made
	// it; empty when the confirmation is unknown or no decision was recorded yet.
	Decision, Approver string
	// Detail is the turn's or the store's explanation.
	Detail string
}

// Error names the confirmation and who decided it.
func (e *NotPendingError) Error() string {
	switch {
	case e.Decision == store.DecisionExpired:
		return fmt.Sprintf("confirmation %s is not pending: it expired", e.ConfirmationID)
	case e.Decision != "":
		return fmt.Sprintf("confirmation %s is not pending: it was already %s by %s", display.Visible(e.ConfirmationID), e.Decision, display.Visible(e.Approver))
	case e.Detail != "":
		return fmt.Sprintf("confirmation %s is not pending: %s", display.Visible(e.ConfirmationID), display.Visible(e.Detail))
	}
	return fmt.Sprintf("confirmation %s is not pending", e.ConfirmationID)
}

// Unwrap returns ErrNotPending.
func (e *NotPendingError) Unwrap() error { return ErrNotPending }

// ErrRefused reports a decision the turn judged and refused (decision_mac_invalid,
// approver_is_requester, …). The concrete error is a *RefusedError.
var ErrRefused = errors.New("approval: decision refused")

// RefusedError is a refused decision: Code is the refusal code, Reissued says the proposal got
// a fresh token and is still waiting for a decision.
type RefusedError struct {
	ConfirmationID, Code, Detail string
	Reissued                     bool
}

// Error names the confirmation, the code and what to do next.
func (e *RefusedError) Error() string {
	s := fmt.Sprintf("the turn refused the decision on %s: %s", e.ConfirmationID, e.Code)
	if e.Detail != "" {
		s += " (" + display.Visible(e.Detail) + ")"
	}
	return s
}

// Unwrap returns ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// ErrNoVerdict reports a decision that was delivered but not judged before the caller's wait
// ended (no worker is running the turn, or it is busy): the signal stays in the turn's
// history and is judged when a worker resumes it.
var ErrNoVerdict = errors.New("approval: the turn has not judged the decision yet")

// Sign builds the signed Decision for r on the stored confirmation row: it opens the sealed
// token of the row's current generation with key and signs with a fresh nonce (an edit's MAC
// also binds the canonical digest of r.Arguments). Errors: ErrNotPending (the row is decided
// or expired at now), token.ErrSealed (wrong approver key), ErrBadEdit, ErrReasonTooLong,
// ErrPasskeyRequired (the row's capability is decided only with a passkey and r carries no
// assertion: nothing can be sent from a surface without one).
func Sign(key token.Key, row store.Confirmation, r Request, now time.Time) (workflows.Decision, error) {
	if err := pendingAt(row, now); err != nil {
		return workflows.Decision{}, err
	}
	if row.PasskeyRequired && len(r.Passkey) == 0 {
		return workflows.Decision{}, fmt.Errorf("%w (%s)", ErrPasskeyRequired, display.Visible(row.ID))
	}
	return sign(key, row, r, now)
}

// Challenge is the first half of a passkey decision on the approver page: it signs r as Sign
// does (a fresh nonce; no assertion yet) and returns the nonce and the MAC, whose bytes
// (passkey.Challenge) are the challenge the approver's authenticator signs. The page then
// sends the decision with Request.Nonce set to nonce and the assertion in Request.Passkey;
// Sign recomputes the same MAC (same token generation, same fields). Errors as Sign's.
func Challenge(key token.Key, row store.Confirmation, r Request, now time.Time) (nonce, mac string, err error) {
	r.Nonce, r.Passkey = "", nil
	d, err := sign(key, row, r, now)
	if err != nil {
		return "", "", err
	}
	return d.Nonce, d.MAC, nil
}

// maxNonceBytes bounds a Request.Nonce chosen by Challenge (token.NewNonce writes 22).
const maxNonceBytes = 64

func sign(key token.Key, row store.Confirmation, r Request, now time.Time) (workflows.Decision, error) {
	if err := pendingAt(row, now); err != nil {
		return workflows.Decision{}, err
	}
	if !r.Signer.Valid() {
		return workflows.Decision{}, ErrNoCredential
	}
	if len(r.Reason) > MaxReasonBytes {
		return workflows.Decision{}, ErrReasonTooLong
	}
	if r.ArgsDigest != "" && r.ArgsDigest != row.ArgsDigest {
		return workflows.Decision{}, &StaleError{ConfirmationID: row.ID, Shown: r.ArgsDigest, Bound: row.ArgsDigest}
	}
	plain, err := token.Open(key, row.SealedToken, token.SealAAD(row.ID, row.Generation))
	if err != nil {
		return workflows.Decision{}, fmt.Errorf("approval: open the token of %s with the approver key: %w", row.ID, err)
	}
	edited, err := editedDigest(r)
	if err != nil {
		return workflows.Decision{}, err
	}
	nonce := r.Nonce
	if nonce == "" {
		if nonce, err = token.NewNonce(); err != nil {
			return workflows.Decision{}, err
		}
	} else if len(nonce) > maxNonceBytes {
		return workflows.Decision{}, fmt.Errorf("approval: a nonce has at most %d bytes", maxNonceBytes)
	}
	if len(r.Passkey) > workflows.MaxPasskeyAssertionBytes || (len(r.Passkey) > 0 && !json.Valid(r.Passkey)) {
		return workflows.Decision{}, fmt.Errorf("approval: a passkey assertion is one JSON object of at most %d bytes", workflows.MaxPasskeyAssertionBytes)
	}
	if r.RepeatCount != 0 || r.RepeatMinutes != 0 {
		if r.Decision != workflows.DecisionApprove || r.RepeatCount < 1 || r.RepeatCount > activities.MaxRepeatCalls ||
			r.RepeatMinutes < 1 || r.RepeatMinutes > activities.MaxRepeatMinutes {
			return workflows.Decision{}, ErrBadRepeat
		}
	}
	d := workflows.Decision{ConfirmationID: row.ID, Decision: r.Decision, Approver: r.Approver, Reason: r.Reason,
		ArgsDigest: row.ArgsDigest, Nonce: nonce, Arguments: r.Arguments, Passkey: r.Passkey,
		RepeatCount: r.RepeatCount, RepeatMinutes: r.RepeatMinutes}
	d.MAC = token.SignDecision(plain, token.Decision{ConfirmationID: d.ConfirmationID, Decision: d.Decision,
		Approver: d.Approver, Reason: d.Reason, ArgsDigest: row.ArgsDigest, Nonce: d.Nonce, EditedDigest: edited,
		Repeat: token.RepeatTerms(r.RepeatCount, r.RepeatMinutes)})
	d.Attestation = r.Signer.Attest(d.ConfirmationID, d.MAC)
	return d, nil
}

// MaxReasonBytes bounds a decision's reason: it travels in the decision through Temporal
// history, into the audit and, for a denial, to the model as the refusal detail.
const MaxReasonBytes = 2048

// ErrReasonTooLong reports a reason longer than MaxReasonBytes: nothing was sent.
var ErrReasonTooLong = fmt.Errorf("approval: a reason may have at most %d bytes", MaxReasonBytes)

// ErrBadEdit reports an edit without arguments, with arguments that are not one JSON object
// (canonical form), or arguments on a decision that is not an edit.
var ErrBadEdit = errors.New("approval: bad edit")

// editedDigest is the canonical digest of an edit's arguments ("" for approve and deny).
func editedDigest(r Request) (string, error) {
	if r.Decision != workflows.DecisionEdit {
		if len(r.Arguments) > 0 {
			return "", fmt.Errorf("%w: only an edit carries arguments", ErrBadEdit)
		}
		return "", nil
	}
	if len(r.Arguments) == 0 || len(r.Arguments) > workflows.MaxEditArgumentBytes {
		return "", fmt.Errorf("%w: an edit needs its arguments (a JSON object of at most %d bytes)", ErrBadEdit, workflows.MaxEditArgumentBytes)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(r.Arguments, &obj); err != nil || obj == nil {
		return "", fmt.Errorf("%w: the arguments are not a JSON object", ErrBadEdit)
	}
	digest, err := canonical.Digest(r.Arguments)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadEdit, err)
	}
	return digest, nil
}

func pendingAt(row store.Confirmation, now time.Time) error {
	if row.Decision != "" {
		return &NotPendingError{ConfirmationID: row.ID, Decision: row.Decision, Approver: row.Approver}
	}
	if !now.Before(row.ExpiresAt) {
		return &NotPendingError{ConfirmationID: row.ID, Decision: store.DecisionExpired}
	}
	return nil
}

func load(ctx context.Context, st *store.Store, id string) (store.Confirmation, error) {
	row, err := st.GetConfirmation(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return row, &NotPendingError{ConfirmationID: id, Detail: "no such confirmation"}
	}
	return row, err
}

// Decide signs r and sends it as the turn's decide update, waiting until the turn has judged
// it. It returns nil when the decision decided the proposal. Errors: *NotPendingError (unknown,
// expired, or another decision came first: the loser is told who won), *RefusedError, or the
// Temporal client's error (no worker polling: the context's deadline).
func Decide(ctx context.Context, c client.Client, st *store.Store, key token.Key, r Request) error {
	row, err := load(ctx, st, r.ConfirmationID)
	if err != nil {
		return err
	}
	d, err := Sign(key, row, r, time.Now())
	if err != nil {
		return err
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: row.WorkflowID, RunID: row.RunID,
		UpdateName: workflows.UpdateDecide, Args: []any{d}, WaitForStage: client.WorkflowUpdateStageCompleted})
	var res workflows.DecisionResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == workflows.ErrTypeNotPending {
			return lost(ctx, st, row.ID, appErr.Message())
		}
		return fmt.Errorf("approval: decide %s on turn %s: %w", row.ID, row.WorkflowID, err)
	}
	return verdict(ctx, st, row.ID, res)
}

func verdict(ctx context.Context, st *store.Store, id string, res workflows.DecisionResult) error {
	switch {
	case res.Accepted:
		return nil
	case res.Refusal == workflows.RefusalNotPending:
		return lost(ctx, st, id, res.Detail)
	}
	return &RefusedError{ConfirmationID: id, Code: res.Refusal, Detail: res.Detail, Reissued: res.Reissued}
}

// lost explains a decision that found its confirmation no longer pending, naming the
// decision that won when the store has recorded it (waiting briefly: the winner's record is
// written just after its consume).
func lost(ctx context.Context, st *store.Store, id, detail string) error {
	e := &NotPendingError{ConfirmationID: id, Detail: detail}
	for range 20 {
		row, err := st.GetConfirmation(ctx, id)
		if err == nil && row.Decision != "" {
			e.Decision, e.Approver = row.Decision, row.Approver
			return e
		}
		select {
		case <-ctx.Done():
			return e
		case <-time.After(50 * time.Millisecond):
		}
	}
	return e
}

// Send signs r and delivers it as the turn's confirmation signal, durable at once even while
// no worker runs. It returns the signed decision; Wait reads its verdict back.
func Send(ctx context.Context, c client.Client, st *store.Store, key token.Key, r Request) (workflows.Decision, error) {
	row, err := load(ctx, st, r.ConfirmationID)
	if err != nil {
		return workflows.Decision{}, err
	}
	d, err := Sign(key, row, r, time.Now())
	if err != nil {
		return d, err
	}
	if err := c.SignalWorkflow(ctx, row.WorkflowID, row.RunID, workflows.SignalConfirmation, d); err != nil {
		return d, fmt.Errorf("approval: signal turn %s: %w", row.WorkflowID, err)
	}
	return d, nil
}

// Wait polls the store until the turn has judged the sent decision d or timeout passes: nil
// when d decided the proposal; *NotPendingError when another decision or the expiry came
// first; *RefusedError when the turn refused d; ErrNoVerdict when nothing was judged in time.
func Wait(ctx context.Context, st *store.Store, d workflows.Decision, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := st.GetNonce(ctx, d.Nonce)
		switch {
		case err == nil && n.Verdict == store.VerdictAccepted:
			return nil
		case err == nil:
			row, _ := st.GetConfirmation(ctx, d.ConfirmationID)
			return &RefusedError{ConfirmationID: d.ConfirmationID, Code: n.Verdict, Detail: n.Detail,
				Reissued: row.Decision == "" && row.Generation > 0}
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		// Not judged by nonce: it may have lost before any consume (decided or expired).
		row, err := st.GetConfirmation(ctx, d.ConfirmationID)
		if err != nil {
			return err
		}
		if row.Decision != "" {
			// The winner's nonce record precedes its decision row: ours is not it.
			if _, err := st.GetNonce(ctx, d.Nonce); err == nil {
				continue
			}
			return &NotPendingError{ConfirmationID: row.ID, Decision: row.Decision, Approver: row.Approver}
		}
		if !time.Now().Before(deadline) {
			return ErrNoVerdict
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
