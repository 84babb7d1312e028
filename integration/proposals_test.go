package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// startTurnSeq starts turn seq of conversation (already made unique by the caller).
func startTurnSeq(t *testing.T, c client.Client, cfg config.Config, conversation string, seq int, msg string) client.WorkflowRun {
	t.Helper()
	req := workflows.TurnRequest{Conversation: conversation, Principal: "alice", Message: msg}
	run, err := c.ExecuteWorkflow(context.Background(), workflows.StartOptions(workflows.TurnWorkflowID(conversation, seq), cfg.TaskQueue, req),
		workers.TurnWorkflowName, req)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func textAndCalls(text string, cs ...string) string {
	b, _ := json.Marshal(text)
	return `{"id":"chatcmpl-it","object":"chat.completion","created":1700000000,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":` +
		string(b) + `,"tool_calls":[` + strings.Join(cs, ",") + `]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
}

const secretReplacement = "CORRECTED-ANSWER-7f3a: the capital of Australia is Canberra."

func correctionArgs(target, replacement string) string {
	b, _ := json.Marshal(map[string]any{"target_output": target, "replacement": replacement, "reason": "I named the wrong city", "evidence_event_ids": []string{}})
	return string(b)
}

const focusArgsJSON = `{"identity":{"id":"budget-review","version":1},"scope":{"conversations":["ops"]},"objective":"Review the travel budget weekly.","budgets":{"max_turns":10,"max_days":30},"requested_permissions":["web.fetch"],"retirement":{"rule":"after-budget"}}`

// Items 1, 2, 4, 5 end to end on the real dev server and PostgreSQL: a tool-only correction of
// the previous answer (target "latest") is captured and ends the turn with one model request,
// the fixed acknowledgement and no arguments in the audit, search attributes or memo; the
// record binds the resolved output id (never "latest"); the proposal workflow waits for a
// decision; an accept projects one judgment (kind correct, agent-self-correction v1,
// quality-eligible, not external-export-eligible); the same decision retried converges and a
// different one conflicts.
func TestProposalCorrectionCapturedDecidedProjected(t *testing.T) {
	model := newFakeModel(t,
		answer("The capital of Australia is Sydney."),
		calls(call("c1", "submit_correction", correctionArgs("latest", secretReplacement))),
	)
	c, cfg, st := liveModelStack(t, model)
	conv := "prop-" + cfg.TaskQueue
	r1 := result(t, startTurnSeq(t, c, cfg, conv, 1, "What is the capital of Australia?"))
	if r1.EndReason != "answered" {
		t.Fatalf("turn 1: %+v", r1)
	}
	before := len(model.requests())
	run := startTurnSeq(t, c, cfg, conv, 2, "That was wrong, correct your last reply.")
	r2 := result(t, run)
	if got := len(model.requests()) - before; got != 1 {
		t.Fatalf("turn 2 made %d model requests, want 1 (a captured proposal ends the turn)", got)
	}
	if r2.EndReason != "proposed" || r2.Prose != "I saved that as a proposed correction." || outcomeList(r2) != "submit_correction:captured:self-correction" {
		t.Fatalf("turn 2: %s %q %s", r2.EndReason, r2.Prose, outcomeList(r2))
	}
	// The offer: submit_correction and propose_focus, with the admitted output id as target.
	req := model.requests()[before]
	out1 := proposals.OutputID(workflows.TurnWorkflowID(conv, 1))
	if !strings.Contains(req, `"submit_correction"`) || !strings.Contains(req, out1) || strings.Contains(req, "request_memory_change") {
		t.Fatalf("offer: %s", req)
	}
	wf2 := workflows.TurnWorkflowID(conv, 2)
	rows, err := st.ListProposals(context.Background(), wf2)
	if err != nil || len(rows) != 1 {
		t.Fatalf("proposals: %v %v", rows, err)
	}
	p, err := proposals.DecodeProposal(rows[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	if p.Target == nil || p.Target.OutputID != out1 || strings.Contains(string(rows[0].Payload), `"latest"`) || p.Replacement != secretReplacement ||
		p.QualityEligible || p.ExternalExportEligible || p.PublicationEligible || p.State != "agent-proposed" {
		t.Fatalf("record: %s", rows[0].Payload)
	}
	// Redaction: no argument text in the audit rows, the search attributes or the memo.
	audit, err := st.ListAudit(context.Background(), wf2)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range audit {
		if strings.Contains(e.Detail+e.Reason, "CORRECTED-ANSWER") {
			t.Fatalf("audit row carries proposal text: %+v", e)
		}
	}
	desc, err := c.DescribeWorkflow(context.Background(), wf2, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := desc.RawResponse.String(); strings.Contains(s, "CORRECTED-ANSWER") {
		t.Fatalf("search attributes or memo carry proposal text")
	}
	// The effective output has not changed: no judgment before a human decided.
	if _, err := st.LatestJudgment(context.Background(), out1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("judgment before a decision: %v", err)
	}
	pwf := workflows.ProposalWorkflowID(p.ID)
	eventually(t, 30*time.Second, "the proposal workflow pending", func() bool {
		v, err := c.QueryWorkflow(context.Background(), pwf, "", workflows.QueryProposal)
		var s workflows.ProposalStatus
		return err == nil && v.Get(&s) == nil && s.State == "pending"
	})
	// Decide: accept, attested by bob's credential.
	d, err := proposals.NewDecision(rows[0], proposals.Accept, "", "sub-1", signer(t, "bob"), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, inserted, err := st.AppendProposalDecision(context.Background(), d); err != nil || !inserted {
		t.Fatalf("append decision: %v %v", inserted, err)
	}
	if err := c.SignalWorkflow(context.Background(), pwf, "", workflows.SignalProposalDecision, workflows.ProposalDecisionSignal{DecisionID: d.ID}); err != nil {
		t.Fatal(err)
	}
	var status workflows.ProposalStatus
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.GetWorkflow(ctx, pwf, "").Get(ctx, &status); err != nil {
		t.Fatal(err)
	}
	if status.State != "applied" || status.Receipt != proposals.ReceiptProjected {
		t.Fatalf("status: %+v", status)
	}
	j, err := st.LatestJudgment(context.Background(), out1)
	if err != nil {
		t.Fatal(err)
	}
	if j.Kind != "correct" || j.Criterion != "agent-self-correction" || j.CriterionVersion != 1 || j.Actor != "bob" || j.FeedbackSource != d.ID ||
		j.Replacement != secretReplacement || !j.QualityEligible || j.ExternalExportEligible || j.TargetWorkflowID != workflows.TurnWorkflowID(conv, 1) {
		t.Fatalf("judgment: %+v", j)
	}
	// Same payload retried (another submission id) converges; a different payload conflicts.
	again, _ := proposals.NewDecision(rows[0], proposals.Accept, "", "sub-2", signer(t, "bob"), "bob")
	if _, inserted, err := st.AppendProposalDecision(context.Background(), again); err != nil || inserted {
		t.Fatalf("retry: inserted=%v err=%v", inserted, err)
	}
	other, _ := proposals.NewDecision(rows[0], proposals.Reject, "", "sub-3", signer(t, "bob"), "bob")
	stored, _, err := st.AppendProposalDecision(context.Background(), other)
	if !errors.Is(err, store.ErrConflict) || stored.Disposition != proposals.Accept {
		t.Fatalf("different payload: %v %+v", err, stored)
	}
	js, _ := st.ListJudgments(context.Background())
	if len(js) != 1 {
		t.Fatalf("judgments: %d", len(js))
	}
}

// Item 2: refusals create no proposal and are audited with a reason; visible text is kept as
// the answer; too many calls; a message mixing a proposal call with a capability call is
// refused as a whole (parse failure mixed_proposal_and_invocation) and the turn goes on.
func TestProposalRefusals(t *testing.T) {
	long := strings.Repeat("x", 2001)
	model := newFakeModel(t,
		// turn 1: duplicate kinds, an oversized replacement... there is no target yet, and an
		// unknown field in a focus declaration.
		textAndCalls("Noted.",
			call("a1", "propose_focus", focusArgsJSON),
			call("a2", "propose_focus", focusArgsJSON)),
		// turn 2: an oversized replacement, a focus declaration with an extra field, text kept
		textAndCalls("",
			call("b1", "propose_focus", strings.Replace(focusArgsJSON, `"Review the travel budget weekly."`, `"`+long+`"`, 1))),
		// turn 3: four calls
		calls(call("c1", "propose_focus", focusArgsJSON), call("c2", "propose_focus", focusArgsJSON),
			call("c3", "submit_correction", correctionArgs("latest", "fine")), call("c4", "nope_tool", `{}`)),
		// turn 4: mixed with a capability call, then an answer
		calls(call("d1", "propose_focus", focusArgsJSON), call("d2", "system_health", `{}`)),
		answer("ok, one thing at a time"),
		// turn 5: text plus a valid focus proposal
		textAndCalls("Here is the focus I suggest.", call("e1", "propose_focus", focusArgsJSON)),
	)
	c, cfg, st := liveModelStack(t, model)
	conv := "refuse-" + cfg.TaskQueue
	ctx := context.Background()
	r := result(t, startTurnSeq(t, c, cfg, conv, 1, "plan"))
	if r.EndReason != "proposals_refused" || r.Prose != "Noted." || outcomeList(r) != "propose_focus:rejected:duplicate_proposal_kind propose_focus:rejected:duplicate_proposal_kind" {
		t.Fatalf("turn 1: %s %q %s", r.EndReason, r.Prose, outcomeList(r))
	}
	r = result(t, startTurnSeq(t, c, cfg, conv, 2, "fix it"))
	if r.EndReason != "proposals_refused" || r.Prose != proposals.NothingSaved ||
		outcomeList(r) != "propose_focus:rejected:invalid_proposal" {
		t.Fatalf("turn 2: %s %q %s", r.EndReason, r.Prose, outcomeList(r))
	}
	r = result(t, startTurnSeq(t, c, cfg, conv, 3, "everything"))
	if !strings.Contains(outcomeList(r), "too_many_proposals") || strings.Contains(outcomeList(r), "captured") {
		t.Fatalf("turn 3: %s", outcomeList(r))
	}
	r = result(t, startTurnSeq(t, c, cfg, conv, 4, "mixed"))
	if r.EndReason != "answered" || outcomeList(r) != "propose_focus:parse_failed:mixed_proposal_and_invocation system_health:parse_failed:mixed_proposal_and_invocation" {
		t.Fatalf("turn 4: %s %s", r.EndReason, outcomeList(r))
	}
	for seq := 1; seq <= 4; seq++ {
		rows, err := st.ListProposals(ctx, workflows.TurnWorkflowID(conv, seq))
		if err != nil || len(rows) != 0 {
			t.Fatalf("turn %d created proposals: %v %v", seq, rows, err)
		}
	}
	audit, _ := st.ListAudit(ctx, workflows.TurnWorkflowID(conv, 3))
	n := 0
	for _, e := range audit {
		if e.Reason == "too_many_proposals" {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("audited too_many_proposals %d times, want 4: %+v", n, audit)
	}
	r = result(t, startTurnSeq(t, c, cfg, conv, 5, "/focus budget review"))
	if r.EndReason != "proposed" || r.Prose != "Here is the focus I suggest." || outcomeList(r) != "propose_focus:captured:focus-declaration" {
		t.Fatalf("turn 5: %s %q %s", r.EndReason, r.Prose, outcomeList(r))
	}
	rows, _ := st.ListProposals(ctx, workflows.TurnWorkflowID(conv, 5))
	p, err := proposals.DecodeProposal(rows[0].Payload)
	if err != nil || p.Authority == nil || *p.Authority != (proposals.FocusAuthority{}) || p.DependencyResolution != "unchecked" ||
		p.Fingerprint != "focus:"+proposals.Digest(p.Declaration) {
		t.Fatalf("focus record: %v %s", err, rows[0].Payload)
	}
}

// A round's proposal snapshot is stored only when its answer names a proposal tool (a round
// that uses none costs no snapshot write), and a snapshot an earlier attempt of the round
// stored binds the round: when it differs from the one rebuilt (the attempt died between its
// store and its answer reaching history), the round is asked again with the stored offer, so
// what the model saw and what capture validates against are one snapshot.
func TestProposalSnapshotStoredOnlyWhenUsed(t *testing.T) {
	model := newModelServer(t, func(n int, _ []byte) (int, string) {
		switch n {
		case 0:
			return http.StatusOK, answer("The capital of Australia is Sydney.")
		case 1: // turn 2, asked with the snapshot it built: a correction of turn 1
			return http.StatusOK, calls(call("c1", "submit_correction", correctionArgs("latest", secretReplacement)))
		}
		return http.StatusOK, answer("Noted.")
	})
	c, cfg, st := liveModelStack(t, model)
	ctx := context.Background()
	conv := "snap-" + cfg.TaskQueue
	wf1, wf2 := workflows.TurnWorkflowID(conv, 1), workflows.TurnWorkflowID(conv, 2)
	if r1 := result(t, startTurnSeq(t, c, cfg, conv, 1, "What is the capital of Australia?")); r1.EndReason != "answered" {
		t.Fatalf("turn 1: %+v", r1)
	}
	if !strings.Contains(model.requests()[0], `"propose_focus"`) {
		t.Fatalf("turn 1 was offered no proposal tool, so the test proves nothing: %s", model.requests()[0])
	}
	if _, err := st.GetSnapshot(ctx, proposals.SnapshotID(wf1, 1)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("turn 1 named no proposal tool, yet its snapshot is stored (err %v)", err)
	}
	// What an earlier attempt of turn 2's round 1 stored: a snapshot admitting no correction
	// target, so it offers propose_focus and not submit_correction.
	earlier := storeFocusOnlySnapshot(ctx, t, st, conv, wf2)
	r2 := result(t, startTurnSeq(t, c, cfg, conv, 2, "That was wrong, correct your last reply."))
	reqs := model.requests()
	if len(reqs) != 3 {
		t.Fatalf("turn 2 made %d model requests, want 2 (asked again with the stored offer)", len(reqs)-1)
	}
	if !strings.Contains(reqs[1], `"submit_correction"`) {
		t.Fatalf("turn 2's first request did not offer the correction its own snapshot admits: %s", reqs[1])
	}
	if strings.Contains(reqs[2], `"submit_correction"`) || !strings.Contains(reqs[2], `"propose_focus"`) {
		t.Fatalf("turn 2's second request is not the stored snapshot's offer: %s", reqs[2])
	}
	if u := r2.Usage; u.InputTokens != 20 || u.OutputTokens != 10 {
		t.Fatalf("turn 2's usage %+v, want both asks' tokens (20 in, 10 out)", u)
	}
	if r2.EndReason != "answered" || r2.Prose != "Noted." || len(r2.Outcomes) != 0 {
		t.Fatalf("turn 2: %s %q %s", r2.EndReason, r2.Prose, outcomeList(r2))
	}
	if got, err := st.GetSnapshot(ctx, earlier.ID); err != nil || string(got) != string(earlier.Encode()) {
		t.Fatalf("the stored snapshot changed: %s %v", got, err)
	}
	if rows, err := st.ListProposals(ctx, wf2); err != nil || len(rows) != 0 {
		t.Fatalf("proposals of turn 2: %v %v", rows, err)
	}
}

// storeFocusOnlySnapshot stores, as an earlier attempt of turn wf2's round 1 would have, a
// snapshot admitting no correction target: it offers propose_focus and not submit_correction.
func storeFocusOnlySnapshot(ctx context.Context, t *testing.T, st *store.Store, conv, wf2 string) proposals.Snapshot {
	t.Helper()
	earlier := proposals.Snapshot{ID: proposals.SnapshotID(wf2, 1), WorkflowID: wf2, Round: 1, Conversation: conv,
		InputID: proposals.InputID(wf2), Targets: []proposals.CorrectionTarget{}, Evidence: []string{proposals.InputID(wf2)},
		Offered: []string{registry.ProposalFocusDeclaration}}
	if _, err := st.PutSnapshot(ctx, earlier.ID, wf2, 1, earlier.Encode()); err != nil {
		t.Fatal(err)
	}
	return earlier
}
