package workflows_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/workflows"
)

// callReq is a call of tool with args by testStarter for principal, attested by testStarter's
// own credential (as `airlock mcp serve --stdio` does) under the idempotency key "k1".
func callReq(t *testing.T, principal, tool, args string) workflows.CallRequest {
	t.Helper()
	req := workflows.CallRequest{Client: testStarter.Name, Principal: principal, Tool: tool,
		Arguments: json.RawMessage(args), CallID: "mcp-1", ConfirmationTTL: 5 * time.Minute}
	if _, err := workflows.SignCall(testStarter, &req, "k1", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// runCall runs req as a call workflow to its end, under the workflow id its attestation names.
func (f *fixture) runCall(req workflows.CallRequest) workflows.CallResult {
	f.t.Helper()
	id := workflows.CallWorkflowID(req.Client, req.Principal, clients.KeyDigest("k1"), req.Tool, req.Arguments)
	f.runCallAs(id, req)
	var res workflows.CallResult
	if err := f.env.GetWorkflowResult(&res); err != nil {
		f.t.Fatal(err)
	}
	if res.WorkflowID != id {
		f.t.Fatalf("result workflow id %q, want %q", res.WorkflowID, id)
	}
	return res
}

// runCallAs runs req as the call workflow id to its end.
func (f *fixture) runCallAs(id string, req workflows.CallRequest) {
	f.t.Helper()
	f.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	f.env.ExecuteWorkflow(workflows.CallWorkflow, req)
	if !f.env.IsWorkflowCompleted() {
		f.t.Fatal("call workflow did not complete")
	}
	if err := f.env.GetWorkflowError(); err != nil {
		f.t.Fatalf("call workflow failed: %v", err)
	}
}

// envelopeOf decodes a call's result envelope.
func envelopeOf(t *testing.T, res workflows.CallResult) activities.Envelope {
	t.Helper()
	var env activities.Envelope
	if err := json.Unmarshal([]byte(res.Envelope), &env); err != nil {
		t.Fatalf("envelope %q: %v", res.Envelope, err)
	}
	return env
}

// An automatic call runs at once through the executor: executed, its data labelled untrusted,
// its requester recorded as the bearer token's client and principal.
func TestCallAutomaticRunsAtOnce(t *testing.T) {
	f := newFixture(t)
	res := f.runCall(callReq(t, "alice", "test_echo", `{"text":"hi"}`))
	if res.Outcome.Outcome != activities.OutcomeExecuted || res.Result == nil || string(res.Result.Data) != `{"echo":"hi"}` {
		t.Fatalf("result = %+v", res)
	}
	env := envelopeOf(t, res)
	if env.Trust != "untrusted" || env.Note != activities.UntrustedNote || string(env.Data) != `{"echo":"hi"}` || env.Capability != "test.echo" {
		t.Fatalf("envelope = %+v", env)
	}
	rq, err := f.store.GetRequester(t.Context(), res.WorkflowID, "")
	if err != nil || rq.Client != testStarter.Name || rq.Principal != "alice" {
		t.Fatalf("requester = %+v, %v", rq, err)
	}
}

// A call that needs a human waits on a confirmation the approver surfaces read (the pending
// query, the confirmation row, with the requester), runs once when approved, and is refused
// in words when denied or left to expire.
func TestCallConfirmed(t *testing.T) {
	for _, tc := range []struct {
		name, decision string
		want           activities.Outcome
		reason         string
		sends          int32
	}{
		{"approved", workflows.DecisionApprove, activities.OutcomeExecuted, "", 1},
		{"denied", workflows.DecisionDeny, activities.OutcomeDenied, "denied_by_approver", 0},
		{"expired", "", activities.OutcomeExpired, "confirmation_expired", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var seen []workflows.PendingConfirmation
			f.at(time.Minute, func() {
				seen = f.pending()
				if len(seen) == 1 && tc.decision != "" {
					f.signal(f.decision(seen[0].ConfirmationID, tc.decision, "bob", "not today"))
				}
			})
			res := f.runCall(callReq(t, "alice", "test_send", `{"to":"carol","amount":5}`))
			if len(seen) != 1 || seen[0].ToolName != "test_send" || seen[0].Requester == nil ||
				seen[0].Requester.Client != testStarter.Name || seen[0].Requester.Principal != "alice" {
				t.Fatalf("pending while waiting = %+v", seen)
			}
			if _, err := f.store.GetConfirmation(t.Context(), seen[0].ConfirmationID); err != nil {
				t.Fatalf("the confirmation row approver surfaces read: %v", err)
			}
			if res.Outcome.Outcome != tc.want || res.Outcome.Reason != tc.reason || f.sends.Load() != tc.sends {
				t.Fatalf("outcome = %+v, sends = %d", res.Outcome, f.sends.Load())
			}
			env := envelopeOf(t, res)
			if env.Outcome != tc.want || (tc.want != activities.OutcomeExecuted && (env.Trust != "airlock" || env.Detail == "")) {
				t.Fatalf("envelope = %+v", env)
			}
			if tc.want == activities.OutcomeExecuted && res.Outcome.Approver != "bob" {
				t.Fatalf("approver = %q", res.Outcome.Approver)
			}
		})
	}
}

// A caller the worker cannot authenticate gets a refusal and nothing is resolved or run; an
// unknown tool name is rejected at resolve, never corrected.
func TestCallRefusals(t *testing.T) {
	f := newFixture(t)
	req := callReq(t, "alice", "test_send", `{"to":"carol","amount":5}`)
	req.Principal = "bob" // the attestation is alice's
	res := f.runCall(req)
	if res.Refusal != clients.RefusalMisattested || f.sends.Load() != 0 || len(res.Outcomes) != 0 {
		t.Fatalf("claimed principal: %+v", res)
	}
	f = newFixture(t)
	req = callReq(t, "alice", "test_send", `{"to":"carol","amount":5}`)
	req.Attestation.Signature = req.Attestation.Signature[:len(req.Attestation.Signature)-4] + "AAAA"
	if res := f.runCall(req); res.Refusal != clients.RefusalMisattested || !strings.Contains(res.Envelope, clients.RefusalMisattested) {
		t.Fatalf("forged attestation: %+v", res)
	}
	f = newFixture(t)
	res = f.runCall(callReq(t, "alice", "test_sned", `{"to":"carol","amount":5}`))
	if res.Outcome.Outcome != activities.OutcomeRejected || res.Outcome.Stage != activities.StageResolve || f.sends.Load() != 0 {
		t.Fatalf("near-miss name: %+v", res.Outcome)
	}
	f = newFixture(t)
	res = f.runCall(callReq(t, "alice", "test_send", `{"to":"carol","amount":5,"memo":"x"}`))
	if res.Outcome.Outcome != activities.OutcomeRejected || res.Outcome.Stage != activities.StageValidate {
		t.Fatalf("unknown field: %+v", res.Outcome)
	}
}

// A call cancelled while it waits for an approver closes its confirmation, never runs, and
// records why; the workflow reports the cancellation.
func TestCallCancelledWhileWaiting(t *testing.T) {
	f := newFixture(t)
	var id string
	f.at(time.Minute, func() {
		if ps := f.pending(); len(ps) == 1 {
			id = ps[0].ConfirmationID
		}
		f.env.CancelWorkflow()
	})
	req := callReq(t, "alice", "test_send", `{"to":"carol","amount":5}`)
	f.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: req.Attestation.WorkflowID})
	f.env.ExecuteWorkflow(workflows.CallWorkflow, req)
	if !f.env.IsWorkflowCompleted() || f.env.GetWorkflowError() == nil {
		t.Fatalf("a cancelled call ended with %v", f.env.GetWorkflowError())
	}
	if id == "" || f.sends.Load() != 0 {
		t.Fatalf("confirmation %q, sends %d", id, f.sends.Load())
	}
	row, err := f.store.GetConfirmation(t.Context(), id)
	if err != nil || row.Decision == "" {
		t.Fatalf("the cancelled call's confirmation is still open: %+v, %v", row, err)
	}
	found := false
	for _, r := range f.audit() {
		if r.Outcome == string(activities.OutcomeExpired) && r.Reason == workflows.StopCancelled {
			found = true
		}
	}
	if !found {
		t.Fatalf("no expired/cancelled audit row: %+v", f.audit())
	}
}

// gatewaySet is a clients file with testStarter, a gateway that may vouch for "user:*" and
// alice, and a plain client "other" that is not a gateway.
func gatewaySet(t *testing.T, withStarter bool) (*clients.Set, clients.Credential, clients.Credential) {
	t.Helper()
	gw, err := clients.NewCredential("mcp-gateway")
	if err != nil {
		t.Fatal(err)
	}
	other, err := clients.NewCredential("other")
	if err != nil {
		t.Fatal(err)
	}
	return setOf(t, gw, other, withStarter), gw, other
}

// setOf is the clients file of gatewaySet for the given credentials.
func setOf(t *testing.T, gw, other clients.Credential, withStarter bool) *clients.Set {
	t.Helper()
	f := clients.File{Clients: []clients.Client{
		{Name: gw.Name, PublicKey: gw.Public(), Principals: []string{"user:*", "alice"}, Gateway: true},
		{Name: other.Name, PublicKey: other.Public(), Principals: []string{"user:*", "alice"}},
	}}
	if withStarter {
		f.Clients = append(f.Clients, clients.Client{Name: testStarter.Name, PublicKey: testStarter.Public(), Principals: []string{"alice", "bob"}})
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	set, err := clients.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// What the MCP server over HTTP starts: a call attested by the gateway for a bearer token it
// verified. The workflow's input carries no bearer token; an attestation lifted from one call's
// history starts nothing under another workflow id or with other arguments; a client that is
// no gateway cannot vouch for another; removing the token's client revokes its calls at once.
func TestCallAttestationIsBoundToOneCall(t *testing.T) {
	set, gw, other := gatewaySet(t, true)
	tok, err := testStarter.MintBearer("alice", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bearer, err := set.VerifyBearer(tok, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	gatewayReq := func(args string, signer clients.Credential) (string, workflows.CallRequest) {
		req := workflows.CallRequest{Client: testStarter.Name, Principal: "alice", Tool: "test_echo", Arguments: json.RawMessage(args), CallID: "mcp-1"}
		id, err := workflows.SignCall(signer, &req, "session-7:progress-1", &bearer, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return id, req
	}

	id, req := gatewayReq(`{"text":"hi"}`, gw)
	if in, _ := json.Marshal(req); strings.Contains(string(in), tok) || strings.Contains(string(in), bearer.Signature) || strings.Contains(string(in), "session-7") {
		t.Fatalf("the call's input carries the bearer token or the idempotency key: %s", in)
	}
	f := newFixture(t)
	f.acts.Clients = clients.Static(set)
	f.runCallAs(id, req)
	var res workflows.CallResult
	if err := f.env.GetWorkflowResult(&res); err != nil || res.Refusal != "" || res.Outcome.Outcome != activities.OutcomeExecuted {
		t.Fatalf("gateway-attested call: %+v, %v", res, err)
	}

	refusedAs := func(name, id string, req workflows.CallRequest, set *clients.Set, code string) {
		t.Helper()
		f := newFixture(t)
		f.acts.Clients = clients.Static(set)
		f.runCallAs(id, req)
		var res workflows.CallResult
		if err := f.env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", name, res.Detail)
		if res.Refusal != code || len(res.Outcomes) != 0 {
			t.Fatalf("%s: refusal %q (%s), outcomes %+v; want %s and nothing run", name, res.Refusal, res.Detail, res.Outcomes, code)
		}
	}
	// Lifted from history: the same input under another workflow id.
	refusedAs("another workflow id", workflows.CallWorkflowID(req.Client, req.Principal, clients.KeyDigest("mine"), req.Tool, req.Arguments), req, set, clients.RefusalMisattested)
	// Lifted from history with the arguments changed, at the id the new arguments would have.
	edited := req
	edited.Arguments = json.RawMessage(`{"text":"other"}`)
	refusedAs("other arguments", workflows.CallWorkflowID(req.Client, req.Principal, req.Attestation.KeyDigest, req.Tool, edited.Arguments), edited, set, clients.RefusalMisattested)
	// A registered client that is not a gateway vouching for testStarter's caller.
	id, req = gatewayReq(`{"text":"hi"}`, other)
	refusedAs("not a gateway", id, req, set, clients.RefusalMisattested)
	// The bearer token's client removed from the clients file.
	id, req = gatewayReq(`{"text":"hi"}`, gw)
	refusedAs("client removed", id, req, setOf(t, gw, other, false), clients.RefusalMisattested)
}
