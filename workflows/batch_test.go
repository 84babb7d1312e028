package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// sent returns the recipients test_send ran with, in order.
func (f *fixture) sent() string {
	f.sentMu.Lock()
	defer f.sentMu.Unlock()
	return strings.Join(f.sentTo, " ")
}

// edit signs an edit of confirmation id with the approver's arguments.
func (f *fixture) edit(id, approver, args string) workflows.Decision {
	f.t.Helper()
	row, err := f.store.GetConfirmation(context.Background(), id)
	if err != nil {
		f.t.Fatalf("confirmation %s: %v", id, err)
	}
	d, err := approval.Sign(f.key, row, approval.Request{ConfirmationID: id, Decision: workflows.DecisionEdit, Approver: approver,
		Arguments: json.RawMessage(args), Signer: credentialOf(f.t, approver)}, time.Time{})
	if err != nil {
		f.t.Fatalf("sign an edit of %s: %v", id, err)
	}
	return d
}

// update sends d as a decide update; then gets its result or the validator's rejection once
// the workflow has handled it.
func (f *fixture) update(d workflows.Decision, then func(workflows.DecisionResult, error)) {
	f.env.UpdateWorkflow(workflows.UpdateDecide, d.Nonce, &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { then(workflows.DecisionResult{}, err) },
		OnComplete: func(v any, err error) {
			res, _ := v.(workflows.DecisionResult)
			then(res, err)
		},
	}, d)
}

// toolMessages returns the tool messages of inference request i, in order.
func (f *fixture) toolMessages(i int) []inference.Message {
	var out []inference.Message
	for _, m := range f.provider.Requests()[i].Messages {
		if m.Role == inference.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// Two consequential calls and an automatic one in one model message: both confirmations are
// pending at once (each its own id), decided in reverse order (one by update, one by signal),
// and then the three calls execute in call order, their tool results in call order.
func TestBatchConfirmationsArePendingTogetherAndRunInCallOrder(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"first","amount":1}`), call("c2", "test_echo", `{"text":"hi"}`),
		call("c3", "test_send", `{"to":"second","amount":2}`)), answer("done"))
	var ids []string
	f.at(time.Minute, func() {
		p := f.pending()
		if len(p) != 2 || p[0].Seq != 1 || p[1].Seq != 3 || p[0].ConfirmationID == p[1].ConfirmationID {
			t.Errorf("pending = %+v, want proposals #1 and #3 pending together", p)
			return
		}
		ids = []string{p[0].ConfirmationID, p[1].ConfirmationID}
		if f.sends.Load() != 0 {
			t.Error("nothing may run before every confirmation of the message is decided")
		}
		dup := f.decision(ids[1], workflows.DecisionApprove, "carol", "")
		f.update(f.decision(ids[1], workflows.DecisionApprove, "alice", ""), func(res workflows.DecisionResult, err error) {
			if err != nil || !res.Accepted {
				t.Errorf("approve #3 = %+v, %v", res, err)
			}
			// A second decision on the decided one is refused by the validator: never in history.
			f.update(dup, func(_ workflows.DecisionResult, err error) {
				if err == nil || !strings.Contains(err.Error(), "already decided") {
					t.Errorf("a second decision on #3 = %v, want a validator refusal", err)
				}
			})
		})
	})
	f.at(2*time.Minute, func() {
		if len(ids) != 2 {
			return
		}
		if p := f.pending(); len(p) != 1 || p[0].ConfirmationID != ids[0] {
			t.Errorf("after #3 was approved, pending = %+v; want only #1", p)
		}
		if f.sends.Load() != 0 {
			t.Error("#3 ran before #1 was decided")
		}
		f.signal(f.decision(ids[0], workflows.DecisionApprove, "bob", ""))
	})
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 10 * time.Minute})
	wantOutcomes(t, res, "executed", "executed", "executed")
	if got := f.sent(); got != "first second" {
		t.Fatalf("sends ran as %q, want call order", got)
	}
	var seqs []int
	for _, r := range res.Results {
		seqs = append(seqs, r.Seq)
	}
	if mustJSON(seqs) != "[1,2,3]" || res.Outcomes[0].Approver != "bob" || res.Outcomes[2].Approver != "alice" {
		t.Fatalf("results %v, outcomes %+v", seqs, res.Outcomes)
	}
	var order []string
	for _, m := range f.toolMessages(1) {
		order = append(order, m.ToolCallID)
	}
	if strings.Join(order, " ") != "c1 c2 c3" {
		t.Fatalf("tool messages answer %v, want call order", order)
	}
}

// In a batch, each confirmation ends on its own: one denied, one expiring on its timer, one
// approved after the denial; the denial still applies to an identical call of a later message.
func TestBatchDecisionsEndEachConfirmationOnItsOwn(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"deny","amount":1}`), call("c2", "test_send", `{"to":"late","amount":1}`),
		call("c3", "test_send", `{"to":"ok","amount":1}`)), calls(call("c4", "test_send", `{"amount":1,"to":"deny"}`)), answer("done"))
	f.at(time.Minute, func() {
		p := f.pending()
		if len(p) != 3 {
			t.Errorf("pending = %d, want 3", len(p))
			return
		}
		f.signal(f.decision(p[0].ConfirmationID, workflows.DecisionDeny, "bob", "no"))
		f.at(time.Second, func() {
			f.signal(f.decision(p[2].ConfirmationID, workflows.DecisionApprove, "bob", ""))
		})
	})
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 3 * time.Minute})
	wantOutcomes(t, res, "denied:denied_by_approver", "expired:confirmation_expired", "executed", "denied:denied_earlier_in_turn")
	if got := f.sent(); got != "ok" {
		t.Fatalf("sends = %q", got)
	}
	row, err := f.store.GetConfirmation(context.Background(), res.Outcomes[1].ConfirmationID)
	if err != nil || row.Decision != store.DecisionExpired {
		t.Fatalf("expired row = %+v, %v", row, err)
	}
}

// An edit never mutates the bound proposal: the original is denied (edited_by_approver) and
// never runs; the approver's exact arguments run as a new proposal of origin approver; the
// audit carries both digests; the model's call id gets exactly one tool message, saying the
// approver edited it and with the arguments that ran.
func TestEditRunsTheApproverArgumentsAsANewProposal(t *testing.T) {
	orig, edited := `{"to":"attacker","amount":50}`, `{"to":"acct-1","amount":5}`
	f := newFixture(t, calls(call("c1", "test_send", orig)), answer("sent"))
	f.at(time.Minute, func() {
		f.update(f.edit(f.pending()[0].ConfirmationID, "alice", edited), func(res workflows.DecisionResult, err error) {
			if err != nil || !res.Accepted {
				t.Errorf("edit = %+v, %v", res, err)
			}
		})
	})
	res := f.run(workflows.TurnRequest{Principal: "ops"})
	wantOutcomes(t, res, "denied:edited_by_approver", "executed")
	if got := f.sent(); got != "acct-1" {
		t.Fatalf("sends = %q, want only the edited call", got)
	}
	o, e := res.Outcomes[0], res.Outcomes[1]
	if o.Seq != 1 || o.Origin != workflows.OriginModel || o.Approver != "alice" || string(o.Arguments) != orig {
		t.Fatalf("original outcome = %+v", o)
	}
	if e.Seq != 2 || e.Origin != workflows.OriginApprover || e.EditOf != 1 || e.Approver != "alice" || string(e.Arguments) != edited ||
		e.CallID != "c1" || e.ConfirmationID == "" || e.ConfirmationID == o.ConfirmationID {
		t.Fatalf("edited outcome = %+v", e)
	}
	ctx := context.Background()
	if row, err := f.store.GetConfirmation(ctx, o.ConfirmationID); err != nil || row.Decision != store.DecisionDenied ||
		row.Reason != workflows.ReasonEditedByApprover || row.Approver != "alice" {
		t.Fatalf("original confirmation = %+v, %v", row, err)
	}
	if row, err := f.store.GetConfirmation(ctx, e.ConfirmationID); err != nil || row.Decision != store.DecisionApproved ||
		row.Approver != "alice" || row.Seq != 2 || len(row.SealedToken) != 0 {
		t.Fatalf("edited proposal's confirmation = %+v, %v", row, err)
	}
	od, _ := canonical.Digest([]byte(orig))
	ed, _ := canonical.Digest([]byte(edited))
	var kinds []string
	var editRow *store.AuditEvent
	for _, r := range f.audit() {
		kinds = append(kinds, r.Outcome)
		if r.Outcome == activities.AuditProposalEdited {
			editRow = &r
		}
	}
	if strings.Join(kinds, " ") != "confirmation_issued denied proposal_edited executed" || editRow == nil || editRow.Seq != 2 ||
		editRow.ArgsDigest != ed || editRow.OriginalDigest != od || editRow.Approver != "alice" {
		t.Fatalf("audit = %v, edit row %+v", kinds, editRow)
	}
	tools := f.toolMessages(1)
	if len(tools) != 1 || tools[0].ToolCallID != "c1" {
		t.Fatalf("tool messages = %+v, want exactly one for c1", tools)
	}
	var env activities.Envelope
	if err := json.Unmarshal([]byte(tools[0].Content), &env); err != nil {
		t.Fatal(err)
	}
	if env.Outcome != activities.OutcomeExecuted || env.Origin != workflows.OriginApprover || env.EditedBy != "alice" || string(env.Arguments) != edited {
		t.Fatalf("tool message = %s", tools[0].Content)
	}
	for _, m := range f.provider.Requests()[1].Messages {
		if m.Role == inference.RoleSystem && strings.Contains(m.Content, "acct-1") {
			t.Fatalf("approver arguments in a system message: %q", m.Content)
		}
	}
}

// The approver's arguments pass stages 1-3 again: arguments that fail validation are
// rejected (the model is told, with those arguments) and nothing runs.
func TestEditFailingValidationIsRejectedAndNothingRuns(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":5}`)), answer("ok"))
	f.at(time.Minute, func() {
		f.signal(f.edit(f.pending()[0].ConfirmationID, "alice", `{"to":"a","amount":-5}`))
	})
	res := f.run(workflows.TurnRequest{})
	if got := outcomes(res); len(got) != 2 || got[0] != "denied:edited_by_approver" || !strings.HasPrefix(got[1], "rejected:") ||
		res.Outcomes[1].Stage != activities.StageValidate || res.Outcomes[1].Origin != workflows.OriginApprover {
		t.Fatalf("outcomes = %v (%+v)", got, res.Outcomes)
	}
	if f.sends.Load() != 0 {
		t.Fatal("neither the original nor a rejected edit may run")
	}
	if tools := f.toolMessages(1); len(tools) != 1 || !strings.Contains(tools[0].Content, `"outcome":"rejected"`) {
		t.Fatalf("tool messages = %+v", tools)
	}
}

// An edit is an approval of new arguments: on a four-eyes capability the requester's own edit
// is refused (the token reissued) and the proposal stays waiting; an edit whose arguments were
// swapped after signing does not verify. Another approver's edit then decides it.
func TestEditByTheRequesterOnAFourEyesCapabilityIsRefused(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
	src := registry.Source{Name: "test", Data: []byte(testRegistry)}
	reg, err := registry.Load([]registry.Source{src, registry.StructuralPolicy("four-eyes policy", "test.1", func(e registry.Entry) bool { return e.ID == "test.send" }, src)}, testImpls(f))
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Registry = reg
	f.at(time.Minute, func() {
		id := f.pending()[0].ConfirmationID
		f.update(f.edit(id, "alice", `{"to":"b","amount":1}`), func(res workflows.DecisionResult, err error) {
			if err != nil || res.Refusal != activities.ApproverIsRequester || !res.Reissued {
				t.Errorf("the requester's edit = %+v, %v", res, err)
			}
			swapped := f.edit(id, "bob", `{"to":"b","amount":1}`)
			swapped.Arguments = json.RawMessage(`{"to":"mallory","amount":1}`)
			f.update(swapped, func(res workflows.DecisionResult, err error) {
				if err != nil || res.Refusal != activities.DecisionMACInvalid {
					t.Errorf("an edit with swapped arguments = %+v, %v", res, err)
				}
				f.update(f.edit(id, "bob", `{"to":"b","amount":1}`), func(res workflows.DecisionResult, err error) {
					if err != nil || !res.Accepted {
						t.Errorf("bob's edit = %+v, %v", res, err)
					}
				})
			})
		})
	})
	res := f.run(workflows.TurnRequest{Principal: "alice"})
	wantOutcomes(t, res, "denied:edited_by_approver", "executed")
	if got := f.sent(); got != "b" || res.Outcomes[1].Approver != "bob" {
		t.Fatalf("sends = %q, outcome %+v", got, res.Outcomes[1])
	}
	if got := strings.Join(f.refusals(), " "); got != "approver_is_requester decision_mac_invalid" {
		t.Fatalf("refusals = %s", got)
	}
}

// Two edits in one message each become a new proposal, numbered after the message's calls in
// call order, and each answers its own call id.
func TestBatchEditsAreNumberedAfterTheMessage(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"x","amount":1}`), call("c2", "test_send", `{"to":"y","amount":1}`)), answer("ok"))
	f.at(time.Minute, func() {
		p := f.pending()
		if len(p) != 2 {
			t.Errorf("pending = %+v", p)
			return
		}
		f.signal(f.edit(p[1].ConfirmationID, "bob", `{"to":"y2","amount":1}`))
		f.signal(f.edit(p[0].ConfirmationID, "bob", `{"to":"x2","amount":1}`))
	})
	res := f.run(workflows.TurnRequest{})
	wantOutcomes(t, res, "denied:edited_by_approver", "executed", "denied:edited_by_approver", "executed")
	var got []string
	for _, o := range res.Outcomes {
		got = append(got, mustJSON([]any{o.Seq, o.EditOf, o.CallID}))
	}
	if strings.Join(got, " ") != `[1,0,"c1"] [3,1,"c1"] [2,0,"c2"] [4,2,"c2"]` || f.sent() != "x2 y2" {
		t.Fatalf("outcomes %v, sends %q", got, f.sent())
	}
	var ids []string
	for _, m := range f.toolMessages(1) {
		ids = append(ids, m.ToolCallID)
	}
	if strings.Join(ids, " ") != "c1 c2" {
		t.Fatalf("tool messages answer %v", ids)
	}
}

// ConfirmEdit records the edited proposal's approval only when the store shows the original
// decided by this approver's edit of exactly these arguments (defense in depth: workflow
// history alone is not proof of a human decision).
func TestConfirmEditNeedsTheEditOnRecord(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	args := json.RawMessage(`{"to":"b","amount":1}`)
	digest, _ := canonical.Digest(args)
	orig := activities.ConfirmationID("wf", "run", 1)
	_, hash, _ := token.Mint()
	if _, err := f.store.CreateConfirmation(ctx, store.Confirmation{ID: orig, TokenHash: hash, WorkflowID: "wf", RunID: "run", Seq: 1,
		CapabilityID: "test.send", Version: 1, ArgsDigest: "x", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	in := activities.ConfirmEditInput{WorkflowID: "wf", RunID: "run", Seq: 2, EditOf: 1, Original: orig, CapabilityID: "test.send",
		Version: 1, ArgsDigest: digest, Arguments: args, Approver: "alice"}
	try := func(what string, want bool) {
		t.Helper()
		out, err := f.acts.ConfirmEdit(ctx, in)
		if err != nil || out.Confirmed != want {
			t.Fatalf("%s: ConfirmEdit = %+v, %v; want confirmed %v", what, out, err, want)
		}
	}
	try("the original is still pending", false)
	if err := f.store.EditConfirmation(ctx, orig, "alice", "another-digest", time.Now()); err != nil {
		t.Fatal(err)
	}
	try("the edit authorized other arguments", false)
	in.Approver = "mallory"
	try("another approver", false)
	in.Approver, in.EditOf = "alice", 3
	try("another proposal", false)
	in.EditOf = 1
	other := activities.ConfirmationID("wf", "run", 5)
	_, hash, _ = token.Mint()
	if _, err := f.store.CreateConfirmation(ctx, store.Confirmation{ID: other, TokenHash: hash, WorkflowID: "wf", RunID: "run", Seq: 1,
		CapabilityID: "test.send", Version: 1, ArgsDigest: "x", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.EditConfirmation(ctx, other, "alice", digest, time.Now()); err != nil {
		t.Fatal(err)
	}
	in.Original = other
	try("the edit of exactly these arguments by this approver", true)
	row, err := f.store.GetConfirmation(ctx, activities.ConfirmationID("wf", "run", 2))
	if err != nil || row.Decision != store.DecisionApproved || row.Approver != "alice" || row.ArgsDigest != digest {
		t.Fatalf("edited proposal's confirmation = %+v, %v", row, err)
	}
}
