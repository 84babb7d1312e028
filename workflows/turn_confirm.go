package workflows

// Confirmations (executor stage 4): the turn's wait on pending decisions, the decide update
// (with its validator) and the confirmation signal that deliver them, and present, which judges
// each decision (ConsumeConfirmation) and audits the refused ones.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/passkey"
)

// waitEnd is how a confirmation wait ended.
type waitEnd int

const (
	endOpen     waitEnd = iota // still waiting
	endDecided                 // a valid decision (awaited.decided) decided the proposal
	endExpired                 // the token's time ran out
	endRefusals                // MaxRefusedDecisions decisions were refused
	endVoided                  // the registry changed under the confirmation (turn.resurface)
	endStopped                 // the turn is stopping (turn.stop: cancelled, history limit)
)

// String names the end for audit details.
func (e waitEnd) String() string {
	return [...]string{"open", "decided", "expired", "too many refused decisions", "voided by a registry change", "the turn stopped"}[e]
}

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

// validateDecision admits a decide update only for a decision within its bounds (CheckDecision)
// for a confirmation pending now, that this turn has not seen (turn.seen). It touches no token: a
// decision for anything else never reaches history.
func (t *turn) validateDecision(d Decision) error {
	if err := CheckDecision(d); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBadDecision, err)
	}
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
	case t.seen(d):
		return temporal.NewNonRetryableApplicationError("this decision's nonce was presented to this turn before; a decision counts once", ErrTypeBadDecision, nil)
	}
	return nil
}

// Bounds of a decision's fields (CheckDecision): generous for what approver surfaces send
// (a 128-bit nonce is 22 characters, a MAC 64, an ed25519 signature 88), small enough that
// no decision grows a turn's history by more than MaxDecisionBytes.
const (
	MaxDecisionIDBytes     = 128
	MaxDecisionFieldBytes  = 256 // approver, nonce, MAC, digest, attestation signer and signature
	MaxDecisionReasonBytes = 4 << 10
	// MaxPasskeyAssertionBytes bounds a decision's passkey assertion (passkey.MaxAssertionBytes).
	MaxPasskeyAssertionBytes = passkey.MaxAssertionBytes
	// MaxDecisionBytes bounds a whole decision: its fields, an edit's arguments and a passkey
	// assertion.
	MaxDecisionBytes = MaxEditArgumentBytes + MaxDecisionReasonBytes + MaxPasskeyAssertionBytes + 8*MaxDecisionFieldBytes
)

// ErrMalformedDecision: a decision is not one an approver surface sends (CheckDecision).
var ErrMalformedDecision = errors.New("malformed decision")

// CheckDecision reports, wrapping ErrMalformedDecision, what makes d too big to be a decision
// any approver surface sends: a field over its bound (MaxDecisionIDBytes for the confirmation
// id, MaxDecisionFieldBytes for approver, nonce, MAC, digest and attestation,
// MaxDecisionReasonBytes for the reason, MaxPasskeyAssertionBytes of JSON for a passkey
// assertion), an edit without arguments or with more than
// MaxEditArgumentBytes of them. The decide update's validator refuses such a decision before it
// reaches history; one that arrives as a signal is refused and audited without touching the
// token (issue 20, item 4). Everything else about a decision (its kind, its approver, its MAC)
// is judged by ConsumeConfirmation, and any such presentation consumes the token.
func CheckDecision(d Decision) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrMalformedDecision, fmt.Sprintf(format, a...))
	}
	if d.Decision == DecisionEdit && (len(d.Arguments) == 0 || len(d.Arguments) > MaxEditArgumentBytes) {
		return bad("an edit needs its arguments (at most %d bytes)", MaxEditArgumentBytes)
	}
	if d.Decision != DecisionEdit && len(d.Arguments) > MaxEditArgumentBytes {
		return bad("its arguments are %d bytes, at most %d", len(d.Arguments), MaxEditArgumentBytes)
	}
	if len(d.ConfirmationID) > MaxDecisionIDBytes {
		return bad("its confirmation id is %d bytes, at most %d", len(d.ConfirmationID), MaxDecisionIDBytes)
	}
	for _, f := range []struct{ name, v string }{{"decision", d.Decision}, {"approver", d.Approver}, {"nonce", d.Nonce}, {"mac", d.MAC},
		{"args_digest", d.ArgsDigest}, {"attestation signer", d.Attestation.Signer}, {"attestation signature", d.Attestation.Signature}} {
		if len(f.v) > MaxDecisionFieldBytes {
			return bad("its %s is %d bytes, at most %d", f.name, len(f.v), MaxDecisionFieldBytes)
		}
	}
	if d.RepeatCount != 0 || d.RepeatMinutes != 0 {
		switch {
		case d.Decision != DecisionApprove:
			return bad("only an approval may grant repeats")
		case d.RepeatCount < 1 || d.RepeatCount > activities.MaxRepeatCalls:
			return bad("a repeat grant covers 1 to %d calls, not %d", activities.MaxRepeatCalls, d.RepeatCount)
		case d.RepeatMinutes < 1 || d.RepeatMinutes > activities.MaxRepeatMinutes:
			return bad("a repeat grant lasts 1 to %d minutes, not %d", activities.MaxRepeatMinutes, d.RepeatMinutes)
		}
	}
	if len(d.Reason) > MaxDecisionReasonBytes {
		return bad("its reason is %d bytes, at most %d", len(d.Reason), MaxDecisionReasonBytes)
	}
	// No surface sends a NUL or bytes that are not UTF-8, and PostgreSQL's text columns (the
	// nonce, the decision, the audit row) cannot hold them: such a decision is malformed here,
	// before it reaches the store, instead of failing the turn's writes there.
	for _, f := range []struct{ name, v string }{{"confirmation id", d.ConfirmationID}, {"decision", d.Decision}, {"approver", d.Approver},
		{"reason", d.Reason}, {"nonce", d.Nonce}, {"mac", d.MAC}, {"args_digest", d.ArgsDigest},
		{"attestation signer", d.Attestation.Signer}, {"attestation signature", d.Attestation.Signature}} {
		if !utf8.ValidString(f.v) || strings.ContainsRune(f.v, 0) {
			return bad("its %s holds a NUL or bytes that are not UTF-8", f.name)
		}
	}
	if len(d.Passkey) > MaxPasskeyAssertionBytes {
		return bad("its passkey assertion is %d bytes, at most %d", len(d.Passkey), MaxPasskeyAssertionBytes)
	}
	return nil
}

// seen reports whether d is a copy of a decision presented to this turn: the same nonce (the
// MAC binds it, so a copy with another nonce fails the MAC), or, for a decision without a
// nonce, the same MAC.
func (t *turn) seen(d Decision) bool { return t.nonces[seenKey(d)] }

// remember marks d as presented to this turn (seen).
func (t *turn) remember(d Decision) { t.nonces[seenKey(d)] = true }

func seenKey(d Decision) string {
	if d.Nonce != "" {
		return "n:" + d.Nonce
	}
	return "m:" + d.MAC
}

// bounded cuts s to at most n bytes (on a rune boundary), for audit rows and details about a
// decision that may be hostile or huge; a NUL or bytes that are not UTF-8 (which no text column
// of PostgreSQL can hold) become U+FFFD, so the refusal of such a decision is still recorded.
func bounded(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// RefusalMalformed is the refusal of a decision over its bounds (CheckDecision) that arrived as
// a signal: audited, its token untouched.
const RefusalMalformed = "malformed_decision"

// RefusalNonceSeen is the refusal of a decision whose nonce or MAC was presented to this turn
// before (a copy of a decision, re-sent from history): it is never judged twice.
const RefusalNonceSeen = activities.NonceReplayed

// RefusalNotPending is the refusal of a decision for a confirmation that is not pending.
const RefusalNotPending = activities.RefusalNotPending

// RefusalConsumeFailed answers a decision whose consume failed for good (the store was away):
// the turn keeps it and judges it itself once the store answers (deferred), or refuses it when
// its confirmation stops pending first; either verdict is audited.
const RefusalConsumeFailed = "consume_failed"

// deferred is a decision whose consume failed for good: the turn judges it again, as the same
// presentation, once the store answers.
type deferred struct {
	d            Decision
	presentation int
}

// Backoff of judging a deferred decision again.
const (
	deferredFirstRetry = time.Second
	deferredMaxRetry   = 30 * time.Second
)

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
	t.expired = append(t.expired, cancels...) // cancelled when the turn next blocks (settle)
	t.awaits = nil
	t.pending = t.pending[:0]
	t.setStatus(ctx, StatusRunning)
	return err
}

// waitAll runs the wait loop over ws (their timers started) until every wait has ended. A
// decision reaches present from the signal (here) or a decide update (its handler); a
// presentation in flight when a timer fired is judged before that wait ends as expired. A
// deferred decision is judged again here, with backoff, while its confirmation waits. A turn
// that is stopping (t.stop: cancelled, or its history near Temporal's limit) ends every wait.
func (t *turn) waitAll(ctx workflow.Context, ws []*awaited) error {
	shown := len(t.pending)
	rctx, cancelRetry := workflow.WithCancel(ctx)
	defer cancelRetry()
	var retry workflow.Future
	for {
		var sig Decision
		var malformed error
		fired, got, retried := false, false, false
		sel := workflow.NewSelector(ctx)
		// ReceiveAsync, not Receive: a blocking Receive would wait for the next signal with the
		// timer unwatched. A payload that is not a decision is audited (receiveDecision).
		sel.AddReceive(t.sigCh, func(c workflow.ReceiveChannel, _ bool) { sig, got, malformed = receiveDecision(c) })
		sel.AddReceive(t.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
		for _, w := range ws {
			if w.end == endOpen && !w.fired {
				sel.AddFuture(w.timer, func(workflow.Future) { w.fired, fired = true, true })
			}
		}
		if len(t.deferred) > 0 && retry == nil {
			retry = workflow.NewTimerWithOptions(rctx, t.retryIn, workflow.TimerOptions{Summary: "judge a deferred decision again"})
		}
		if retry != nil {
			sel.AddFuture(retry, func(workflow.Future) { retried = true })
		}
		if t.stop == "" {
			t.settle(ctx)
			sel.Select(ctx)
		}
		if got && malformed != nil {
			if _, err := t.refuseMalformed(ctx, sig, malformed); err != nil {
				return err
			}
		} else if got {
			if _, err := t.present(ctx, sig); err != nil {
				return err
			}
		}
		if retried {
			retry = nil
			if err := t.judgeDeferred(ctx); err != nil {
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
		if t.stop == "" && t.historyFull(ctx) {
			t.stop = StopHistoryLimit
		}
		open := 0
		for _, w := range ws {
			if w.end != endOpen {
				continue
			}
			switch {
			case w.decided != nil:
				w.end = endDecided
			case t.stop != "":
				w.end = endStopped
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
			if err := t.dropDeferred(ctx, w); err != nil {
				return err
			}
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

// judgeDeferred judges the oldest deferred decision again (the store may answer now): judged,
// it leaves the queue and the next waits a second; not yet, it stays first and the wait before
// the next try doubles (at most deferredMaxRetry).
func (t *turn) judgeDeferred(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return !t.presenting }); err != nil {
		return err
	}
	if len(t.deferred) == 0 {
		return nil
	}
	u := t.deferred[0]
	w := t.awaitedFor(u.d.ConfirmationID)
	if w == nil || w.decided != nil || w.end != endOpen {
		t.deferred = t.deferred[1:]
		return t.refuse(ctx, t.seq, nil, bounded(u.d.Approver, MaxDecisionFieldBytes), RefusalConsumeFailed,
			"the decision could not be judged while the store was away, and its confirmation stopped pending first: it was not judged")
	}
	_, again, err := t.judge(ctx, w, u.d, u.presentation)
	if err != nil {
		return err
	}
	if again {
		t.retryIn = min(2*t.retryIn, deferredMaxRetry)
		return nil
	}
	t.deferred = t.deferred[1:]
	t.retryIn = deferredFirstRetry
	return nil
}

// dropDeferred refuses and audits the deferred decisions of w once its wait ended (expired,
// decided by another decision, voided, closed): a decision that could not be judged in time
// is refused, never judged later.
func (t *turn) dropDeferred(ctx workflow.Context, w *awaited) error {
	kept := t.deferred[:0:0]
	for _, u := range t.deferred {
		if u.d.ConfirmationID != w.p.ConfirmationID {
			kept = append(kept, u)
			continue
		}
		detail := "the decision could not be judged while the store was away, and its confirmation stopped pending first (" + w.end.String() + "): it was not judged"
		if err := t.refuse(ctx, w.p.Seq, &w.p, u.d.Approver, RefusalConsumeFailed, detail); err != nil {
			return err
		}
	}
	t.deferred = kept
	return nil
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
// refused one is audited and leaves the proposal waiting with a fresh token. A malformed
// decision (CheckDecision) and a decision whose nonce this turn has seen are refused and
// audited without a presentation. Presentations run one at a time, in arrival order.
// refuseMalformed audits the refusal of a malformed decision (err wraps ErrMalformedDecision)
// against the proposal it names, or the one waiting, and counts it towards that proposal's
// MaxRefusedDecisions; its token is untouched.
func (t *turn) refuseMalformed(ctx workflow.Context, d Decision, err error) (DecisionResult, error) {
	w := t.awaitedFor(d.ConfirmationID)
	open := w != nil && w.decided == nil && w.end == endOpen
	target := w
	if target == nil && len(t.awaits) == 1 {
		target = t.awaits[0]
	}
	seq, waiting := t.seq, (*PendingConfirmation)(nil)
	if target != nil {
		seq, waiting = target.p.Seq, &target.p
	}
	if open {
		w.refused++ // counts toward MaxRefusedDecisions like any refused decision
		t.wake.SendAsync(true)
	}
	detail := bounded(err.Error(), 512)
	return DecisionResult{Refusal: RefusalMalformed, Detail: detail}, t.refuse(ctx, seq, waiting, bounded(d.Approver, MaxDecisionFieldBytes), RefusalMalformed, detail)
}

// receiveDecision takes one confirmation signal off c without blocking. Its payload is read
// as raw JSON and then decoded strictly, so a payload that is not a decision object (a
// number, a string, an array, unknown members) is returned as an error to audit, never
// dropped by the SDK with only a log line. ok is false when no signal is buffered.
func receiveDecision(c workflow.ReceiveChannel) (d Decision, ok bool, err error) {
	var raw json.RawMessage
	if ok = c.ReceiveAsync(&raw); !ok {
		return d, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	derr := dec.Decode(&d) //workflowcheck:ignore decoding the signal's bytes: a pure function
	// The whole payload must be the one object: no trailing bytes, not even stray brackets.
	trailing := derr == nil && len(bytes.TrimSpace(raw[dec.InputOffset():])) > 0
	if trimmed := bytes.TrimSpace(raw); derr != nil || trailing || len(trimmed) == 0 || trimmed[0] != '{' {
		why := "it is not a JSON object"
		if derr != nil {
			why = derr.Error()
		}
		return Decision{}, true, fmt.Errorf("%w: the signal's payload is not a decision (%s): %s", ErrMalformedDecision, why, bounded(string(raw), 160))
	}
	return d, true, nil
}

func (t *turn) present(ctx workflow.Context, d Decision) (DecisionResult, error) {
	if err := workflow.Await(ctx, func() bool { return !t.presenting }); err != nil {
		return DecisionResult{}, err
	}
	w := t.awaitedFor(d.ConfirmationID)
	open := w != nil && w.decided == nil && w.end == endOpen
	// Audited against the proposal it names, or the one proposal waiting now, if any.
	target := w
	if target == nil && len(t.awaits) == 1 {
		target = t.awaits[0]
	}
	seq, waiting := t.seq, (*PendingConfirmation)(nil)
	if target != nil {
		seq, waiting = target.p.Seq, &target.p
	}
	approver := bounded(d.Approver, MaxDecisionFieldBytes)
	if err := CheckDecision(d); err != nil {
		return t.refuseMalformed(ctx, d, err)
	}
	if !open {
		t.remember(d)
		detail := fmt.Sprintf("confirmation %q is not pending in this turn", bounded(d.ConfirmationID, MaxDecisionIDBytes))
		if w != nil && w.decided != nil {
			detail = fmt.Sprintf("confirmation %q was already decided (%s by %s)", d.ConfirmationID, w.decided.Decision, w.decided.Approver)
		}
		return DecisionResult{Refusal: RefusalNotPending, Detail: detail}, t.refuse(ctx, seq, waiting, approver, RefusalNotPending, detail)
	}
	if t.seen(d) {
		detail := "this decision's nonce was presented to this turn before; a decision counts once"
		return DecisionResult{Refusal: RefusalNonceSeen, Detail: detail}, t.refuse(ctx, seq, waiting, approver, RefusalNonceSeen, detail)
	}
	t.remember(d)
	t.presentations++
	res, _, err := t.judge(ctx, w, d, t.presentations)
	return res, err
}

// judge presents d to w's proposal as presentation number n (ConsumeConfirmation) and applies
// the verdict. When the consume fails for good (the store was away through every retry), d is
// deferred (again reports it): the turn judges it again as the same presentation once the
// store answers, and it is never judged from a copy (its nonce is spent in this turn).
func (t *turn) judge(ctx workflow.Context, w *awaited, d Decision, n int) (res DecisionResult, again bool, err error) {
	t.presenting = true
	defer func() { t.presenting = false }()
	p := w.p
	cons, err := t.consume(ctx, p, w.adm, d, n)
	if err != nil {
		if !t.isDeferred(n) {
			t.deferred = append(t.deferred, deferred{d: d, presentation: n})
		}
		t.wake.SendAsync(true)
		workflow.GetLogger(ctx).Warn("a decision could not be judged yet; the turn judges it again once the store answers",
			"confirmation", p.ConfirmationID, "error", err)
		return DecisionResult{Refusal: RefusalConsumeFailed, Detail: "the decision could not be judged yet (the store did not answer): " +
			"the turn judges it itself once the store answers, or refuses it if the confirmation stops pending first; its verdict is audited"}, true, nil
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
		t.wake.SendAsync(true)
		if cons.Refusal == activities.QuorumPending {
			// Counted, not refused: audited as such, and never towards MaxRefusedDecisions.
			return res, false, t.auditDecision(ctx, activities.AuditApprovalCounted, p.Seq, &p, d.Approver, cons.Refusal, detail)
		}
		w.refused++
		return res, false, t.refuse(ctx, p.Seq, &p, d.Approver, cons.Refusal, detail)
	}
	w.decided, w.editedDigest = &d, cons.EditedDigest
	t.unpend(p.ConfirmationID)
	t.wake.SendAsync(true)
	return DecisionResult{Accepted: true}, false, nil
}

// isDeferred reports whether presentation n is deferred already.
func (t *turn) isDeferred(n int) bool {
	for _, u := range t.deferred {
		if u.presentation == n {
			return true
		}
	}
	return false
}

// consume presents d to the pending proposal p (stage 4: ConsumeConfirmation, a local
// activity), as presentation number n of this run.
func (t *turn) consume(ctx workflow.Context, p PendingConfirmation, adm activities.Admission, d Decision, n int) (activities.ConsumeOutput, error) {
	var cons activities.ConsumeOutput
	err := workflow.ExecuteLocalActivity(localCtx(ctx, "consume confirmation "+p.ConfirmationID), a.ConsumeConfirmation, activities.ConsumeInput{
		ConfirmationID: p.ConfirmationID, WorkflowID: t.workflowID, RunID: t.runID, Seq: p.Seq, Cedar: adm.Cedar,
		CapabilityID: adm.CapabilityID, Version: adm.Version, ArgsDigest: adm.ArgsDigest,
		Presentation: fmt.Sprintf("%s/%s/%d/%d", t.workflowID, t.runID, p.Seq, n),
		Decision:     d.Decision, Approver: d.Approver, Reason: d.Reason, Nonce: d.Nonce, MAC: d.MAC, Arguments: d.Arguments,
		DisplayedDigest: d.ArgsDigest, Attestation: d.Attestation, Passkey: d.Passkey, RepeatCount: d.RepeatCount, RepeatMinutes: d.RepeatMinutes,
		Conversation: t.req.Conversation,
		Principal:    t.req.Principal, Requester: t.requester(), DistinctApprover: adm.DistinctApprover,
	}).Get(ctx, &cons)
	if err != nil {
		return cons, fmt.Errorf("consume confirmation %s: %w", p.ConfirmationID, err)
	}
	return cons, nil
}

// refuse audits a refused decision (confirmation_refused); p is the proposal it was presented
// to, nil when none was pending.
func (t *turn) refuse(ctx workflow.Context, seq int, p *PendingConfirmation, approver, code, detail string) error {
	return t.auditDecision(ctx, activities.AuditConfirmationRefused, seq, p, approver, code, detail)
}

// auditDecision audits a presented decision that did not decide the confirmation, as kind
// (AuditConfirmationRefused or AuditApprovalCounted) with reason code. Each such row is
// numbered (t.refusals, the row's Attempt) so that several on one proposal are distinct.
func (t *turn) auditDecision(ctx workflow.Context, kind string, seq int, p *PendingConfirmation, approver, code, detail string) error {
	t.refusals++
	r := &activities.AuditRecord{Kind: kind, WorkflowID: t.workflowID, RunID: t.runID,
		Seq: seq, Attempt: t.refusals, Stage: activities.StageConfirm, Reason: code, Detail: detail, Approver: approver}
	if p != nil {
		r.CallID, r.CapabilityID, r.Version, r.ArgsDigest = p.CallID, p.CapabilityID, p.Version, p.ArgsDigest
	}
	return t.record(ctx, r, nil, "")
}

// MaxLateSignalAudits bounds the late decisions a turn audits one by one as it ends; the rest
// are counted in one audit row, so a flood of signals cannot make the end of a turn unbounded.
const MaxLateSignalAudits = 32

// drainLateSignals refuses and audits decisions that arrived for confirmations no longer
// pending (expired or already decided), so a late approval leaves a trace instead of
// vanishing with the workflow, and lets decide updates in flight get their answer.
func (t *turn) drainLateSignals(ctx workflow.Context) {
	audit := func(approver, code, detail string) {
		t.refusals++
		err := t.record(ctx, &activities.AuditRecord{Kind: activities.AuditConfirmationRefused, WorkflowID: t.workflowID, RunID: t.runID,
			Seq: t.seq, Attempt: t.refusals, Stage: activities.StageConfirm, Reason: code, Approver: approver, Detail: detail}, nil, "")
		if err != nil {
			workflow.GetLogger(ctx).Error("audit a late confirmation signal", "error", err)
		}
	}
	late, more := 0, 0
	for {
		sig, ok, malformed := receiveDecision(t.sigCh)
		if !ok {
			break
		}
		if late++; late > MaxLateSignalAudits {
			more++
			continue
		}
		if malformed != nil {
			audit("", RefusalMalformed, bounded(malformed.Error(), 512))
			continue
		}
		if t.seen(sig) {
			audit(bounded(sig.Approver, MaxDecisionFieldBytes), RefusalNonceSeen, "a copy of a decision presented to this turn before; a decision counts once")
			continue
		}
		audit(bounded(sig.Approver, MaxDecisionFieldBytes), RefusalNotPending, fmt.Sprintf("decision for %q arrived after it stopped pending", bounded(sig.ConfirmationID, MaxDecisionIDBytes)))
	}
	if more > 0 {
		audit("", RefusalNotPending, fmt.Sprintf("%d more decisions arrived after their confirmations stopped pending; they were refused without an audit row each", more))
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		workflow.GetLogger(ctx).Error("wait for decide updates in flight", "error", err)
	}
}
