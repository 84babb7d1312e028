package workflows

// Confirmations (executor stage 4): the turn's wait on pending decisions, the decide update
// (with its validator) and the confirmation signal that deliver them, and present, which judges
// each decision (ConsumeConfirmation) and audits the refused ones.

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/inference"
)

// waitEnd is how a confirmation wait ended.
type waitEnd int

const (
	endOpen     waitEnd = iota // still waiting
	endDecided                 // a valid decision (awaited.decided) decided the proposal
	endExpired                 // the token's time ran out
	endRefusals                // MaxRefusedDecisions decisions were refused
	endVoided                  // the registry changed under the confirmation (turn.resurface)
)

// MaxRefusedDecisions bounds the refused decisions one proposal accepts (each consumed its
// token and got it a fresh one). Whoever can signal a turn could otherwise keep an approver's
// decisions failing and grow the turn's history toward Temporal's limit; past the bound the
// call is closed without running (fail closed), the model is told, and it is not retried.
const MaxRefusedDecisions = 16

// ReasonTooManyRefusedDecisions is the outcome reason of a call closed by MaxRefusedDecisions.
const ReasonTooManyRefusedDecisions = "too_many_refused_decisions"

// awaited is one proposal a turn waits on, with what stage 4 needs to judge a decision.
type awaited struct {
	p   PendingConfirmation
	adm activities.Admission
	// refused counts decisions presented to it and refused (MaxRefusedDecisions).
	refused int
	// timer fires at its expiry; fired records that it did.
	timer workflow.Future
	fired bool
	// decided is the decision that decided it (editedDigest: the digest an edit authorized);
	// end says how the wait ended (endOpen while it goes on).
	decided      *Decision
	editedDigest string
	end          waitEnd
	// voided: an approval was refused registry_changed; the wait ends and the proposal is
	// surfaced again under the served registry (turn.resurface).
	voided bool
}

// awaitedFor returns the confirmation id the turn waits on now, or nil.
func (t *turn) awaitedFor(id string) *awaited {
	for _, w := range t.awaits {
		if w.p.ConfirmationID == id {
			return w
		}
	}
	return nil
}

func (t *turn) setup(ctx workflow.Context) error {
	t.sigCh = workflow.GetSignalChannel(ctx, SignalConfirmation)
	if err := workflow.SetQueryHandler(ctx, QueryPending, func() ([]PendingConfirmation, error) {
		out := make([]PendingConfirmation, len(t.pending))
		copy(out, t.pending)
		return out, nil
	}); err != nil {
		return fmt.Errorf("register %s query: %w", QueryPending, err)
	}
	if err := workflow.SetQueryHandler(ctx, QueryTranscript, func() ([]inference.Message, error) {
		return t.messages, nil
	}); err != nil {
		return fmt.Errorf("register %s query: %w", QueryTranscript, err)
	}
	t.wake = workflow.NewBufferedChannel(ctx, 1)
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide, t.present, workflow.UpdateHandlerOptions{
		Validator: t.validateDecision,
	}); err != nil {
		return fmt.Errorf("register %s update: %w", UpdateDecide, err)
	}
	return nil
}

// validateDecision admits a decide update only for a confirmation pending now. It touches no
// token: a decision for anything else never reaches history.
func (t *turn) validateDecision(d Decision) error {
	notPending := func(msg string) error { return temporal.NewNonRetryableApplicationError(msg, ErrTypeNotPending, nil) }
	w := t.awaitedFor(d.ConfirmationID)
	switch {
	case len(t.awaits) == 0:
		return notPending("no confirmation is pending in this turn")
	case w == nil:
		return notPending(fmt.Sprintf("confirmation %q is not pending in this turn", d.ConfirmationID))
	case w.decided != nil:
		return notPending(fmt.Sprintf("confirmation %q was already decided (%s by %s)", d.ConfirmationID, w.decided.Decision, w.decided.Approver))
	case w.end != endOpen:
		return notPending(fmt.Sprintf("confirmation %q is no longer pending", d.ConfirmationID))
	case d.Decision == DecisionEdit && (len(d.Arguments) == 0 || len(d.Arguments) > MaxEditArgumentBytes):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("an edit needs its arguments (at most %d bytes)", MaxEditArgumentBytes), ErrTypeBadDecision, nil)
	}
	return nil
}

// RefusalNotPending is the refusal of a decision for a confirmation that is not pending.
const RefusalNotPending = activities.RefusalNotPending

// RefusalConsumeFailed is the refusal of a decision whose consume failed for good (the store
// was away): the proposal keeps waiting and the approver decides again.
const RefusalConsumeFailed = "consume_failed"

// await waits on the confirmations of one model message together: all are pending at
// once (the pending query lists them, AirlockPendingConfirmations counts them), each with its
// own expiry timer; decisions come in any order; it returns when each wait has ended.
func (t *turn) await(ctx workflow.Context, ws []*awaited) error {
	for _, w := range ws {
		t.pending = append(t.pending, w.p)
	}
	t.setStatus(ctx, StatusAwaitingConfirmation)
	t.awaits = ws
	cancels := make([]workflow.CancelFunc, 0, len(ws))
	for _, w := range ws {
		tctx, cancel := workflow.WithCancel(ctx)
		cancels = append(cancels, cancel)
		w.timer = workflow.NewTimerWithOptions(tctx, t.req.ConfirmationTTL, workflow.TimerOptions{Summary: summarize("confirmation " + w.p.ConfirmationID + " expires")})
	}
	err := t.waitAll(ctx, ws)
	for _, cancel := range cancels {
		cancel()
	}
	t.awaits = nil
	t.pending = t.pending[:0]
	t.setStatus(ctx, StatusRunning)
	return err
}

// waitAll runs the wait loop over ws (their timers started) until every wait has ended. A
// decision reaches present from the signal (here) or a decide update (its handler); a
// presentation in flight when a timer fired is judged before that wait ends as expired.
func (t *turn) waitAll(ctx workflow.Context, ws []*awaited) error {
	shown := len(t.pending)
	for {
		var sig Decision
		fired, got := false, false
		sel := workflow.NewSelector(ctx)
		// ReceiveAsync, not Receive: a buffered payload that does not decode is dropped by the
		// SDK, and a blocking Receive would wait for the next signal with the timer unwatched.
		sel.AddReceive(t.sigCh, func(c workflow.ReceiveChannel, _ bool) { got = c.ReceiveAsync(&sig) })
		sel.AddReceive(t.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
		for _, w := range ws {
			if w.end == endOpen && !w.fired {
				sel.AddFuture(w.timer, func(workflow.Future) { w.fired, fired = true, true })
			}
		}
		sel.Select(ctx)
		if got {
			if _, err := t.present(ctx, sig); err != nil {
				return err
			}
		}
		if fired {
			// A presentation in flight when the timer fired is judged first (its consume
			// checks the expiry on the worker's clock); only then does the wait end.
			if err := workflow.Await(ctx, func() bool { return !t.presenting }); err != nil {
				return err
			}
		}
		open := 0
		for _, w := range ws {
			if w.end != endOpen {
				continue
			}
			switch {
			case w.decided != nil:
				w.end = endDecided
			case w.voided:
				w.end = endVoided
			case w.fired:
				w.end = endExpired
			case w.refused >= MaxRefusedDecisions:
				w.end = endRefusals
			default:
				open++
				continue
			}
			t.unpend(w.p.ConfirmationID)
		}
		if open == 0 {
			return nil
		}
		if len(t.pending) != shown {
			// Some of a batch were decided: operators see how many still wait.
			shown = len(t.pending)
			t.setStatus(ctx, StatusAwaitingConfirmation)
		}
	}
}

// unpend drops confirmation id from the pending query's list.
func (t *turn) unpend(id string) {
	for i, p := range t.pending {
		if p.ConfirmationID == id {
			t.pending = append(t.pending[:i], t.pending[i+1:]...)
			return
		}
	}
}

// present judges one decision (from the signal or a decide update) against the pending
// proposal it names: any presentation to it consumes its token, a valid one decides it, a
// refused one is audited and leaves the proposal waiting with a fresh token. Presentations
// run one at a time, in arrival order.
func (t *turn) present(ctx workflow.Context, d Decision) (DecisionResult, error) {
	if err := workflow.Await(ctx, func() bool { return !t.presenting }); err != nil {
		return DecisionResult{}, err
	}
	w := t.awaitedFor(d.ConfirmationID)
	if w == nil || w.decided != nil || w.end != endOpen {
		detail := fmt.Sprintf("confirmation %q is not pending in this turn", d.ConfirmationID)
		if w != nil && w.decided != nil {
			detail = fmt.Sprintf("confirmation %q was already decided (%s by %s)", d.ConfirmationID, w.decided.Decision, w.decided.Approver)
		}
		// Audited against the proposal it names, or the one proposal waiting now, if any.
		if w == nil && len(t.awaits) == 1 {
			w = t.awaits[0]
		}
		seq, waiting := t.seq, (*PendingConfirmation)(nil)
		if w != nil {
			seq, waiting = w.p.Seq, &w.p
		}
		return DecisionResult{Refusal: RefusalNotPending, Detail: detail}, t.refuse(ctx, seq, waiting, d.Approver, RefusalNotPending, detail)
	}
	t.presenting = true
	defer func() { t.presenting = false }()
	p := w.p
	cons, err := t.consume(ctx, p, w.adm, d)
	if err != nil {
		// The consume failed for good (the store was away through every retry). The turn goes
		// on waiting: the next presentation takes the token over (ConsumeConfirmation), so the
		// proposal stays decidable. The refusal is audited if the store lets it.
		detail := "the decision could not be judged: " + err.Error()
		w.refused++
		t.wake.SendAsync(true)
		if aerr := t.refuse(ctx, p.Seq, &p, d.Approver, RefusalConsumeFailed, detail); aerr != nil {
			workflow.GetLogger(ctx).Error("audit a decision that could not be judged", "confirmation", p.ConfirmationID, "error", aerr)
		}
		return DecisionResult{Refusal: RefusalConsumeFailed, Detail: detail}, nil
	}
	if !cons.Valid {
		detail := cons.Detail
		if cons.Reissued {
			detail += "; its token was consumed and a fresh one issued: the proposal is still waiting"
		}
		if cons.Refusal == activities.TokenRegistryChanged {
			w.voided = true
			detail = cons.Detail + "; the confirmation is void and the call is surfaced again under the new registry"
		}
		res := DecisionResult{Refusal: cons.Refusal, Detail: detail, Reissued: cons.Reissued}
		w.refused++
		t.wake.SendAsync(true)
		return res, t.refuse(ctx, p.Seq, &p, d.Approver, cons.Refusal, detail)
	}
	w.decided, w.editedDigest = &d, cons.EditedDigest
	t.unpend(p.ConfirmationID)
	t.wake.SendAsync(true)
	return DecisionResult{Accepted: true}, nil
}

// consume presents d to the pending proposal p (stage 4: ConsumeConfirmation, a local
// activity), as presentation number t.presentations of this run.
func (t *turn) consume(ctx workflow.Context, p PendingConfirmation, adm activities.Admission, d Decision) (activities.ConsumeOutput, error) {
	t.presentations++
	var cons activities.ConsumeOutput
	err := workflow.ExecuteLocalActivity(localCtx(ctx, "consume confirmation "+p.ConfirmationID), a.ConsumeConfirmation, activities.ConsumeInput{
		ConfirmationID: p.ConfirmationID, WorkflowID: t.workflowID, RunID: t.runID, Seq: p.Seq,
		CapabilityID: adm.CapabilityID, Version: adm.Version, ArgsDigest: adm.ArgsDigest,
		Presentation: fmt.Sprintf("%s/%s/%d/%d", t.workflowID, t.runID, p.Seq, t.presentations),
		Decision:     d.Decision, Approver: d.Approver, Reason: d.Reason, Nonce: d.Nonce, MAC: d.MAC, Arguments: d.Arguments,
		DisplayedDigest: d.ArgsDigest, Attestation: d.Attestation,
		Principal: t.req.Principal, Requester: t.requester(), DistinctApprover: adm.DistinctApprover,
	}).Get(ctx, &cons)
	if err != nil {
		return cons, fmt.Errorf("consume confirmation %s: %w", p.ConfirmationID, err)
	}
	return cons, nil
}

// refuse audits a refused decision (confirmation_refused); p is the proposal it was presented
// to, nil when none was pending.
func (t *turn) refuse(ctx workflow.Context, seq int, p *PendingConfirmation, approver, code, detail string) error {
	t.refusals++
	r := &activities.AuditRecord{Kind: activities.AuditConfirmationRefused, WorkflowID: t.workflowID, RunID: t.runID,
		Seq: seq, Attempt: t.refusals, Stage: activities.StageConfirm, Reason: code, Detail: detail, Approver: approver}
	if p != nil {
		r.CallID, r.CapabilityID, r.Version, r.ArgsDigest = p.CallID, p.CapabilityID, p.Version, p.ArgsDigest
	}
	return t.record(ctx, r, nil, "")
}

// drainLateSignals refuses and audits decisions that arrived for confirmations no longer
// pending (expired or already decided), so a late approval leaves a trace instead of
// vanishing with the workflow, and lets decide updates in flight get their answer.
func (t *turn) drainLateSignals(ctx workflow.Context) {
	for {
		var sig Decision
		if !t.sigCh.ReceiveAsync(&sig) {
			break
		}
		t.refusals++
		err := t.record(ctx, &activities.AuditRecord{Kind: activities.AuditConfirmationRefused, WorkflowID: t.workflowID, RunID: t.runID,
			Seq: t.seq, Attempt: t.refusals, Stage: activities.StageConfirm, Reason: RefusalNotPending, Approver: sig.Approver,
			Detail: fmt.Sprintf("decision for %q arrived after it stopped pending", sig.ConfirmationID)}, nil, "")
		if err != nil {
			workflow.GetLogger(ctx).Error("audit a late confirmation signal", "error", err)
		}
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		workflow.GetLogger(ctx).Error("wait for decide updates in flight", "error", err)
	}
}
