package workflows

// One model message's calls through budgets and the executor's six stages: admit (parse,
// budgets, stages 1-3), confirm (issue and wait: turn_confirm.go), execute (stage 5) and record
// (stage 6), and the approver's edit of a call.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/registry"
)

// MaxResurfaced bounds how often one proposal is surfaced again because the registry changed
// under its confirmation; past it the call is closed without running.
const MaxResurfaced = 4

// proposal is one call on its way through budgets and the executor stages.
type proposal struct {
	call  parse.Call
	round int
	po    ProposalOutcome
	audit *activities.AuditRecord
	env   activities.Envelope
	adm   activities.Admission
	// early is the verdict of a proposal that ended before stage 4 (parse, budget, stages
	// 1-3, denied earlier in the turn); nil when it goes on.
	early *earlyVerdict
	// wait is its confirmation (nil for an automatic call); deniedKey identifies the call for
	// the denied_earlier_in_turn rule.
	wait *awaited
	// granted is the approval a repeat grant gave its confirmation (issue 37, item 4): it
	// runs without a wait (wait is nil).
	granted   *activities.Decision
	deniedKey string
	// surfaced counts how often a registry change voided its confirmation and it was
	// surfaced again (MaxResurfaced).
	surfaced int
	// silent: its verdict adds no context message (an edited proposal, whose call id the
	// approver's proposal answers: one tool message per call id).
	silent bool
	// calls is how many capability calls the turn made before this one (the Cedar policy's
	// context.turn.calls), set when it is admitted.
	calls int
	// egress, set for a catalog read, admits its result into model context (or replaces it
	// with a budget refusal) before it is recorded.
	egress func(out *activities.ExecuteOutput)
}

type earlyVerdict struct {
	outcome        activities.Outcome
	stage          activities.Stage
	reason, detail string
}

// newProposal numbers a call as the turn's next proposal.
func (t *turn) newProposal(round int, call parse.Call) *proposal {
	t.seq++
	return &proposal{call: call, round: round,
		po: ProposalOutcome{Seq: t.seq, Round: round, CallID: call.CallID, CallIDAssigned: call.IDAssigned, Name: call.Name,
			Arguments: call.Arguments, Origin: OriginModel},
		audit: &activities.AuditRecord{WorkflowID: t.workflowID, RunID: t.runID, Seq: t.seq, CallID: call.CallID},
		env:   activities.Envelope{CallID: call.CallID},
	}
}

// verdict records pr's outcome (stage 6): its audit row, the confirmation decision if any, and
// its context message (unless pr is silent).
func (t *turn) verdict(ctx workflow.Context, pr *proposal, o activities.Outcome, stage activities.Stage, reason, detail string, decision *activities.Decision) (ProposalOutcome, error) {
	msgs := t.fillVerdict(pr, o, stage, reason, detail)
	// The summary names the call as the model did (escaped): operators read which call it was.
	summary := fmt.Sprintf("record %s #%d %s", o, pr.po.Seq, pr.call.Name)
	return pr.po, t.recordAs(ctx, summary, pr.audit, decision, t.proposalKey(pr), msgs...)
}

// fillVerdict writes an outcome into pr (activities.FillVerdict) and returns its context
// messages (none when pr is silent).
func (t *turn) fillVerdict(pr *proposal, o activities.Outcome, stage activities.Stage, reason, detail string) []inference.Message {
	po := &pr.po
	po.Outcome, po.Stage, po.Reason, po.Detail = o, stage, reason, detail
	activities.FillVerdict(pr.audit, &pr.env, o, stage, reason, detail, po.CapabilityID, po.Version, po.Approver)
	if pr.silent {
		return nil
	}
	return []inference.Message{activities.ResultMessage(pr.call, pr.env)}
}

// proposalKey is the context key of pr's outcome message.
func (t *turn) proposalKey(pr *proposal) string {
	return fmt.Sprintf("%s/p%d", t.workflowID, pr.po.Seq)
}

// handleCalls takes the calls of one model message through the executor together and adds
// their outcomes to the result: every call passes budgets and stages 1-3 in call order; every
// call that needs a confirmation gets its own (own token, own id), all pending at once; the
// turn waits until each is decided, expired or closed, in any order; then the calls execute
// and are recorded in call order, so their context messages keep the order of the calls (an
// edited call has two outcomes: the original's and the approver's proposal's).
// diverged reports an outcome other than executed that a replayed session did not record
// (TurnRequest.StopOnDivergence). The outcomes recorded before a failure stay in the result.
func (t *turn) handleCalls(ctx workflow.Context, round int, calls []parse.Call) (diverged bool, err error) {
	prs := make([]*proposal, 0, len(calls))
	for _, call := range calls {
		pr := t.newProposal(round, call)
		if err := t.admit(ctx, pr); err != nil {
			return false, err
		}
		prs = append(prs, pr)
	}
	var ws []*awaited
	for _, pr := range prs {
		if pr.early != nil || pr.adm.Automatic {
			continue
		}
		if err := t.issue(ctx, pr); err != nil {
			return false, err
		}
		if pr.wait != nil {
			ws = append(ws, pr.wait)
		}
	}
	for len(ws) > 0 {
		if err := t.await(ctx, ws); err != nil {
			return false, err
		}
		// Confirmations a registry change voided: those proposals are admitted again and,
		// still needing a human, surfaced again together.
		ws = ws[:0:0]
		for _, pr := range prs {
			if pr.wait == nil || pr.wait.end != endVoided {
				continue
			}
			again, err := t.resurface(ctx, pr)
			if err != nil {
				return false, err
			}
			if again {
				ws = append(ws, pr.wait)
			}
		}
	}
	for _, pr := range prs {
		pos, err := t.finalize(ctx, pr)
		for _, po := range pos {
			t.result.Outcomes = append(t.result.Outcomes, po)
			if po.Outcome != activities.OutcomeExecuted && !t.failureIsRecorded(po) {
				diverged = true
			}
		}
		if err != nil {
			return diverged, err
		}
	}
	return diverged, nil
}

// failureIsRecorded reports whether po is a capability error of a replayed session: the
// recorded run saw the same error, so it is not a divergence.
func (t *turn) failureIsRecorded(po ProposalOutcome) bool {
	return po.ToolReportedError() && t.req.Session != ""
}

// admit runs the checks before stage 4 on pr: parse, the turn and capability budgets, stages
// 1-3 (Admit) and the denied_earlier_in_turn rule. A proposal they end gets pr.early.
func (t *turn) admit(ctx workflow.Context, pr *proposal) error {
	call := pr.call
	end := func(o activities.Outcome, stage activities.Stage, reason, detail string) error {
		pr.early = &earlyVerdict{outcome: o, stage: stage, reason: reason, detail: detail}
		return nil
	}
	if !call.Candidate() {
		return end(activities.OutcomeParseFailed, activities.StageParse, string(call.Reason), call.Detail)
	}
	// Budgets, each on its own: the per-turn cap (turn config) and the per-capability cap
	// (registry). Exhaustion is surfaced to the model, never dropped.
	ref, known := t.catalog[call.Name]
	if t.calls >= t.req.MaxCalls {
		return end(activities.OutcomeBudgetExhausted, activities.StageBudget, "turn_budget",
			fmt.Sprintf("this turn may make at most %d capability calls", t.req.MaxCalls))
	}
	if known {
		k := fmt.Sprintf("%s@%d", ref.CapabilityID, ref.Version)
		if t.perCap[k] >= ref.PerTurnCap {
			pr.po.CapabilityID, pr.po.Version = ref.CapabilityID, ref.Version
			return end(activities.OutcomeBudgetExhausted, activities.StageBudget, "capability_budget",
				fmt.Sprintf("%s may be called at most %d times a turn", k, ref.PerTurnCap))
		}
		t.perCap[k]++
	}
	t.calls++

	if pre, ok := t.pre[pr.po.Seq]; ok {
		pr.adm = pre // stages 1-3 ran in this round's Infer (activities.FoldedRound)
	} else if err := workflow.ExecuteLocalActivity(localCtx(ctx, "admit "+call.Name), a.Admit,
		t.admitInput(ctx, pr)).Get(ctx, &pr.adm); err != nil {
		return fmt.Errorf("admit #%d: %w", pr.po.Seq, err)
	}
	adm := pr.adm
	pr.po.CapabilityID, pr.po.Version = adm.CapabilityID, adm.Version
	pr.audit.ArgsDigest = adm.ArgsDigest
	if !adm.Admitted {
		return end(activities.OutcomeRejected, adm.Stage, adm.Code, adm.Detail)
	}
	switch {
	case adm.Automatic && adm.Cedar != nil && adm.Cedar.Outcome == cedarpolicy.OutcomePermit:
		pr.po.AllowedBy = "cedar " + strings.Join(adm.Cedar.Policies, ",")
	case adm.Automatic && adm.UserProvided:
		pr.po.AllowedBy = "automatic-when-user-provided"
	}
	if !adm.Automatic {
		pr.deniedKey = adm.Key() + "/" + adm.ArgsDigest
		if t.denied[pr.deniedKey] {
			return end(activities.OutcomeDenied, activities.StageConfirm, "denied_earlier_in_turn",
				"an identical call was denied earlier in this turn; it is not asked again")
		}
	}
	return nil
}

// admitInput is the Admit input of pr: the call, the turn's scope and principal (checked
// against the policy) and the workflow's clock (deprecation deadlines).
func (t *turn) admitInput(ctx workflow.Context, pr *proposal) activities.AdmitInput {
	pr.calls = max(t.calls-1, 0) // t.calls counts this one already
	return activities.AdmitInput{Call: pr.call, Scope: t.req.Scope, Principal: t.req.Principal, Now: workflow.Now(ctx),
		WorkflowID: t.workflowID, RunID: t.runID, Seq: pr.po.Seq, Calls: pr.calls}
}

// resurface handles pr's confirmation voided by a registry change:
// the old confirmation is closed (expired, registry_changed), the call is admitted again under
// the served registry and, when it still needs a human, issued a new confirmation (again is
// true: wait on pr.wait). Past MaxResurfaced, or when it is no longer admitted or now
// automatic, pr gets its verdict without another wait.
func (t *turn) resurface(ctx workflow.Context, pr *proposal) (again bool, err error) {
	old := pr.wait
	if err := t.record(ctx, nil, &activities.Decision{ConfirmationID: old.p.ConfirmationID, Decision: "expired",
		Reason: activities.TokenRegistryChanged}, ""); err != nil {
		return false, err
	}
	pr.wait = nil
	pr.surfaced++
	end := func(o activities.Outcome, stage activities.Stage, reason, detail string) (bool, error) {
		pr.early = &earlyVerdict{outcome: o, stage: stage, reason: reason, detail: detail}
		return false, nil
	}
	if pr.surfaced >= MaxResurfaced {
		return end(activities.OutcomeExpired, activities.StageConfirm, activities.TokenRegistryChanged,
			fmt.Sprintf("the registry changed under this call's confirmation %d times; it was closed without running", MaxResurfaced))
	}
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, summarize("admit again "+pr.adm.Key())), a.Admit, t.admitInput(ctx, pr)).Get(ctx, &pr.adm); err != nil {
		return false, fmt.Errorf("admit #%d again: %w", pr.po.Seq, err)
	}
	adm := pr.adm
	pr.po.CapabilityID, pr.po.Version = adm.CapabilityID, adm.Version
	pr.audit.ArgsDigest = adm.ArgsDigest
	if !adm.Admitted {
		return end(activities.OutcomeRejected, adm.Stage, adm.Code, adm.Detail)
	}
	if adm.Automatic {
		return false, nil
	}
	pr.deniedKey = adm.Key() + "/" + adm.ArgsDigest
	if err := t.issue(ctx, pr); err != nil {
		return false, err
	}
	return pr.wait != nil, nil
}

// issue asks for pr's confirmation (IssueConfirmation: its own token and id) and sets pr.wait.
func (t *turn) issue(ctx workflow.Context, pr *proposal) error {
	call, adm := pr.call, pr.adm
	var iss activities.IssueOutput
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, "issue confirmation "+adm.Key()), a.IssueConfirmation, activities.IssueInput{
		WorkflowID: t.workflowID, Conversation: t.req.Conversation, RunID: t.runID, Seq: pr.po.Seq, CallID: call.CallID, CapabilityID: adm.CapabilityID,
		Version: adm.Version, ArgsDigest: adm.ArgsDigest, Arguments: call.Arguments, Display: adm.Display, TTL: t.req.ConfirmationTTL,
		RegistryRevision: adm.RegistryRevision, Surfaced: pr.surfaced, Cedar: adm.Cedar, Principal: t.req.Principal,
		Requester: t.requester(),
	}).Get(ctx, &iss); err != nil {
		return fmt.Errorf("issue confirmation #%d: %w", pr.po.Seq, err)
	}
	pr.po.ConfirmationID = iss.ConfirmationID
	if iss.Granted {
		// A repeat grant approved it (IssueConfirmation recorded and audited the use).
		pr.wait = nil
		pr.po.Approver = iss.Approver
		pr.po.Grant = &GrantUse{ID: iss.GrantID, Approver: iss.Approver, Remaining: iss.GrantRemaining}
		pr.granted = &activities.Decision{ConfirmationID: iss.ConfirmationID, Decision: "approved", Approver: iss.Approver,
			Reason: activities.GrantReasonPrefix + iss.GrantID}
		return nil
	}
	pr.wait = &awaited{adm: adm, p: PendingConfirmation{ConfirmationID: iss.ConfirmationID, WorkflowID: t.workflowID, Seq: pr.po.Seq,
		CallID: call.CallID, ToolName: call.Name, CapabilityID: adm.CapabilityID, Version: adm.Version, Arguments: call.Arguments,
		Display: adm.Display, ArgsDigest: adm.ArgsDigest, ExpiresAt: iss.ExpiresAt, Provenance: iss.Provenance, Disclosure: iss.Disclosure,
		Requester: t.requesterOf(), ApproverGroups: iss.ApproverGroups, Quorum: iss.Quorum, PasskeyRequired: iss.PasskeyRequired,
		DistinctApprover: iss.DistinctApprover, UserRequest: activities.UserRequestExcerpt(t.req.Message)}}
	return nil
}

// finalize records pr's outcome once nothing is left to wait for: its early verdict, the end
// of its confirmation (expired, closed, denied, edited) or its execution.
func (t *turn) finalize(ctx workflow.Context, pr *proposal) ([]ProposalOutcome, error) {
	one := func(po ProposalOutcome, err error) ([]ProposalOutcome, error) { return []ProposalOutcome{po}, err }
	if e := pr.early; e != nil {
		return one(t.verdict(ctx, pr, e.outcome, e.stage, e.reason, e.detail, nil))
	}
	var decision *activities.Decision
	if t.stop != "" {
		// The turn is stopping (cancelled, history limit): nothing more runs; an open
		// confirmation is closed with the call.
		var closed *activities.Decision
		if pr.wait != nil {
			closed = &activities.Decision{ConfirmationID: pr.wait.p.ConfirmationID, Decision: "expired", Reason: t.stop}
		}
		return one(t.verdict(ctx, pr, activities.OutcomeExpired, activities.StageConfirm, t.stop,
			"the turn stopped ("+t.stop+") before this call ran; it was not run and will not be retried", closed))
	}
	if w := pr.wait; w != nil {
		id := w.p.ConfirmationID
		switch {
		case w.end == endExpired:
			return one(t.verdict(ctx, pr, activities.OutcomeExpired, activities.StageConfirm, "confirmation_expired",
				fmt.Sprintf("no decision within %s; the call was not run and will not be retried", t.req.ConfirmationTTL),
				&activities.Decision{ConfirmationID: id, Decision: "expired"}))
		case w.end == endRefusals:
			return one(t.verdict(ctx, pr, activities.OutcomeExpired, activities.StageConfirm, ReasonTooManyRefusedDecisions,
				fmt.Sprintf("%d decisions presented for this call were refused; it was closed without running and will not be retried", MaxRefusedDecisions),
				&activities.Decision{ConfirmationID: id, Decision: "expired", Reason: ReasonTooManyRefusedDecisions}))
		case w.decided == nil:
			return nil, fmt.Errorf("proposal #%d: its wait ended without a decision", pr.po.Seq)
		}
		d := *w.decided
		pr.po.Approver = d.Approver
		switch d.Decision {
		case DecisionDeny:
			t.denied[pr.deniedKey] = true
			return one(t.verdict(ctx, pr, activities.OutcomeDenied, activities.StageConfirm, "denied_by_approver", d.Reason,
				&activities.Decision{ConfirmationID: id, Decision: "denied", Approver: d.Approver, Reason: d.Reason}))
		case DecisionEdit:
			return t.edit(ctx, pr, d, w.editedDigest)
		}
		decision = &activities.Decision{ConfirmationID: id, Decision: "approved", Approver: d.Approver}
	} else if pr.granted != nil {
		decision = pr.granted
	}
	return one(t.execute(ctx, pr, decision))
}

// edit applies an approver's edit of pr: pr is recorded denied (edited_by_approver, no context
// message of its own) and the approver's arguments become a new proposal (the next seq) of the
// same tool, recorded as approver-originated (proposal_edited, with both digests). It counts
// toward the turn's call budget (the capability's cap was taken by pr), passes stages 1-3
// again, and the edit is its confirmation: the approver signed exactly these arguments. Its
// result answers the model's call id, with the arguments that ran.
func (t *turn) edit(ctx workflow.Context, pr *proposal, d Decision, editedDigest string) ([]ProposalOutcome, error) {
	call := pr.call
	call.Arguments = d.Arguments
	ed := t.newProposal(pr.round, call)
	ed.po.Origin, ed.po.EditOf, ed.po.Approver = OriginApprover, pr.po.Seq, d.Approver
	ed.env.Origin, ed.env.EditedBy, ed.env.Arguments = OriginApprover, d.Approver, d.Arguments

	t.denied[pr.deniedKey] = true
	pr.silent = true
	orig, err := t.verdict(ctx, pr, activities.OutcomeDenied, activities.StageConfirm, ReasonEditedByApprover,
		fmt.Sprintf("the approver replaced the arguments; the edited call is proposal #%d", ed.po.Seq),
		&activities.Decision{ConfirmationID: pr.wait.p.ConfirmationID, Decision: "denied", Approver: d.Approver, Reason: ReasonEditedByApprover})
	if err != nil {
		return nil, err
	}
	out := []ProposalOutcome{orig}
	adm := pr.adm
	if err := t.record(ctx, &activities.AuditRecord{Kind: activities.AuditProposalEdited, WorkflowID: t.workflowID, RunID: t.runID,
		Seq: ed.po.Seq, CallID: call.CallID, CapabilityID: adm.CapabilityID, Version: adm.Version, Stage: activities.StageConfirm,
		Reason: ReasonEditedByApprover, Detail: fmt.Sprintf("proposal #%d (%s) edited by the approver into proposal #%d", pr.po.Seq, pr.wait.p.ConfirmationID, ed.po.Seq),
		ArgsDigest: editedDigest, OriginalDigest: adm.ArgsDigest, Approver: d.Approver}, nil, ""); err != nil {
		return out, err
	}
	last := func(po ProposalOutcome, err error) ([]ProposalOutcome, error) { return append(out, po), err }
	if t.calls >= t.req.MaxCalls {
		ed.po.CapabilityID, ed.po.Version = adm.CapabilityID, adm.Version
		return last(t.verdict(ctx, ed, activities.OutcomeBudgetExhausted, activities.StageBudget, "turn_budget",
			fmt.Sprintf("this turn may make at most %d capability calls", t.req.MaxCalls), nil))
	}
	t.calls++
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, fmt.Sprintf("admit #%d, edit of #%d (%s)", ed.po.Seq, pr.po.Seq, adm.Key())), a.Admit,
		t.admitInput(ctx, ed)).Get(ctx, &ed.adm); err != nil {
		return out, fmt.Errorf("admit #%d: %w", ed.po.Seq, err)
	}
	ed.po.CapabilityID, ed.po.Version = ed.adm.CapabilityID, ed.adm.Version
	ed.audit.ArgsDigest = ed.adm.ArgsDigest
	if !ed.adm.Admitted {
		return last(t.verdict(ctx, ed, activities.OutcomeRejected, ed.adm.Stage, ed.adm.Code, ed.adm.Detail, nil))
	}
	var decision *activities.Decision
	if !ed.adm.Automatic {
		var conf activities.ConfirmEditOutput
		if err := workflow.ExecuteLocalActivity(localCtx(ctx, "confirm edit "+ed.adm.Key()), a.ConfirmEdit, activities.ConfirmEditInput{
			WorkflowID: t.workflowID, RunID: t.runID, Seq: ed.po.Seq, EditOf: pr.po.Seq, Original: pr.wait.p.ConfirmationID,
			CallID: call.CallID, CapabilityID: ed.adm.CapabilityID, Version: ed.adm.Version, ArgsDigest: ed.adm.ArgsDigest,
			Arguments: call.Arguments, Display: ed.adm.Display, Approver: d.Approver, RegistryRevision: ed.adm.RegistryRevision,
		}).Get(ctx, &conf); err != nil {
			return out, fmt.Errorf("confirm edit #%d: %w", ed.po.Seq, err)
		}
		if !conf.Confirmed {
			return last(t.verdict(ctx, ed, activities.OutcomeRejected, activities.StageConfirm, activities.ReasonNotApproved, conf.Detail, nil))
		}
		ed.po.ConfirmationID = conf.ConfirmationID
		decision = &activities.Decision{ConfirmationID: conf.ConfirmationID, Decision: "approved", Approver: d.Approver}
	}
	return last(t.execute(ctx, ed, decision))
}

// execute runs stage 5 for an admitted (and, when it needs one, approved) proposal and
// records its outcome.
func (t *turn) execute(ctx workflow.Context, pr *proposal, decision *activities.Decision) (ProposalOutcome, error) {
	call, adm, po, env := pr.call, pr.adm, &pr.po, &pr.env
	// Stage 5. Local read-only capabilities run as local activities (no server round trip);
	// external or effectful ones as regular activities with a durable result.
	in := activities.ExecuteInput{WorkflowID: t.workflowID, Seq: po.Seq, Round: pr.round, CallID: call.CallID, CapabilityID: adm.CapabilityID,
		Version: adm.Version, Arguments: call.Arguments, Session: t.req.Session, RegistryRevision: adm.RegistryRevision,
		ConfirmationID: po.ConfirmationID, Principal: t.req.Principal, Scope: t.req.Scope, Calls: pr.calls}
	summary := summarize("execute " + adm.Key())
	// A retry after a dead worker (heartbeat timeout) starts after 0.1 s (the ledger answers a
	// confirmed or effectful call's retry: outcome_unknown, never a second run). Twelve attempts
	// (StoreOutageAttempts: 0.1, 0.4, 1.6, 6.4 s, then every 10 s: about 78 s in all) ride out
	// a store outage of a minute (issue 38): an attempt that failed before it claimed the ledger
	// slot ran nothing, and with only three (0.5 s in all) a half-second database blip turned
	// an approved call into outcome_unknown.
	retry := &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 4, MaximumInterval: 10 * time.Second,
		MaximumAttempts: StoreOutageAttempts, NonRetryableErrorTypes: []string{activities.ErrTypeBadInput}}
	var out activities.ExecuteOutput
	var err error
	recorded := false
	// Every local read-only call runs as a local activity, confirmed or not (DESIGN: local
	// read-only capabilities need no server round trip; a confirmed one is still at most once
	// through the execution ledger, which answers a re-run after a crash), and records its
	// outcome in the same activity (ExecuteRecorded).
	localRead := adm.SideEffect == registry.SideEffectNone && adm.Network == registry.NetworkLocal
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: adm.Timeout + 5*time.Second, ScheduleToCloseTimeout: adm.Timeout + 5*time.Second + StoreOutageWindow,
		RetryPolicy: retry, Summary: summary})
	if localRead && pr.egress == nil && !pr.silent {
		err = workflow.ExecuteLocalActivity(lctx, a.ExecuteRecorded,
			activities.ExecuteRecordedInput{Execute: in, Audit: *pr.audit, Envelope: pr.env, Call: call, Approver: po.Approver,
				Decision: decision, Conversation: t.req.Conversation, ContextKey: t.proposalKey(pr)}).Get(ctx, &out)
		recorded = err == nil
	} else if adm.Automatic || localRead {
		err = workflow.ExecuteLocalActivity(lctx, a.Execute, in).Get(ctx, &out)
	} else {
		t.settle(ctx)
		err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: adm.Timeout + 5*time.Second, HeartbeatTimeout: HeartbeatTimeout, RetryPolicy: retry, Summary: summary}),
			a.Execute, in).Get(ctx, &out)
	}
	if err != nil {
		out = activities.ExecuteOutput{Outcome: activities.OutcomeFailed}
		out.Output.Error = err.Error()
		out.Reason = activities.ReasonExecuteError
		var appErr *temporal.ApplicationError
		// A confirmed call runs at most once, whatever its side effect: a human approved one run.
		atMostOnce := adm.SideEffect != registry.SideEffectNone || !adm.Automatic
		if atMostOnce && !(errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeBadInput) {
			// Execute refuses bad input before the effect starts; any other failure may come
			// after it (the effect ran, then the ledger or every retry failed): unknown, not failed.
			out.Outcome = activities.OutcomeUnknown
			out.Output.Error = "the effect may have started before execution failed; it was not run again: " + err.Error()
		}
	}
	if pr.egress != nil {
		pr.egress(&out)
	}
	activities.ApplyExecuted(env, out)
	if out.Outcome == activities.OutcomeExecuted || out.Outcome == activities.OutcomeFailed {
		t.result.Results = append(t.result.Results, CapabilityResult{Seq: po.Seq, CapabilityID: adm.CapabilityID, Version: adm.Version,
			Data: out.Output.Data, SourceURL: out.Output.SourceURL, Error: out.Output.Error, RetrievedAt: out.RetrievedAt})
	}
	po.Attempts = out.Attempts
	if out.Output.Citation != nil {
		t.result.Citations = append(t.result.Citations, *out.Output.Citation)
	}
	detail := out.Output.Error
	if recorded {
		// ExecuteRecorded stored exactly these messages and this audit row.
		t.messages = append(t.messages, t.fillVerdict(pr, out.Outcome, activities.StageExecute, out.Reason, detail)...)
		return pr.po, nil
	}
	return t.verdict(ctx, pr, out.Outcome, activities.StageExecute, out.Reason, detail, decision)
}
