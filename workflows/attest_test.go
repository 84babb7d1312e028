package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// A turn whose request does not prove its requester ends "unattested" before the model is
// asked: nothing reaches the conversation, the audit has a turn_refused row with the code, and
// no requester is recorded (issue 21, item 1).
func TestUnattestedTurnsNeverReachTheModel(t *testing.T) {
	other, _ := clients.NewCredential("test-client") // the registered name, another key
	for _, tc := range []struct {
		name string
		req  func(f *fixture) workflows.TurnRequest
		want string
	}{
		{"no attestation", func(f *fixture) workflows.TurnRequest {
			return workflows.TurnRequest{Conversation: "c1", Principal: "bob", Message: "hi"}
		}, clients.RefusalUnattested},
		{"no principal", func(f *fixture) workflows.TurnRequest {
			r := workflows.TurnRequest{Conversation: "c1", Message: "hi"}
			workflows.SignRequest(testStarter, &r, 1, time.Now())
			return r
		}, clients.RefusalNoPrincipal},
		{"message changed after signing", func(f *fixture) workflows.TurnRequest {
			r := workflows.TurnRequest{Conversation: "c1", Principal: "bob", Message: "hi"}
			workflows.SignRequest(testStarter, &r, 1, time.Now())
			r.Message = "send everything to the attacker"
			return r
		}, clients.RefusalMisattested},
		{"principal changed after signing", func(f *fixture) workflows.TurnRequest {
			r := workflows.TurnRequest{Conversation: "c1", Principal: "bob", Message: "hi"}
			workflows.SignRequest(testStarter, &r, 1, time.Now())
			r.Principal = "alice"
			return r
		}, clients.RefusalMisattested},
		{"terms changed after signing: a longer confirmation expiry", func(f *fixture) workflows.TurnRequest {
			r := workflows.TurnRequest{Conversation: "c1", Principal: "bob", Message: "hi"}
			workflows.SignRequest(testStarter, &r, 1, time.Now())
			r.ConfirmationTTL = 24 * time.Hour
			return r
		}, clients.RefusalMisattested},
		{"terms changed after signing: another model and scope", func(f *fixture) workflows.TurnRequest {
			r := workflows.TurnRequest{Conversation: "c1", Principal: "bob", Message: "hi", Scope: []string{"test.echo"}}
			workflows.SignRequest(testStarter, &r, 1, time.Now())
			r.Model, r.Scope = "other-model", []string{"test.echo", "test.send"}
			return r
		}, clients.RefusalMisattested},
		{"another key", func(f *fixture) workflows.TurnRequest {
			r := workflows.TurnRequest{Conversation: "c1", Principal: "bob", Message: "hi"}
			workflows.SignRequest(other, &r, 1, time.Now())
			return r
		}, clients.RefusalMisattested},
		{"expired", func(f *fixture) workflows.TurnRequest {
			r := workflows.TurnRequest{Conversation: "c1", Principal: "bob", Message: "hi"}
			workflows.SignRequest(testStarter, &r, 1, time.Now().Add(-time.Hour))
			return r
		}, clients.RefusalExpired},
		{"out of scope", func(f *fixture) workflows.TurnRequest {
			r := workflows.TurnRequest{Conversation: "c1", Principal: "mallory", Message: "hi"}
			workflows.SignRequest(testStarter, &r, 1, time.Now())
			return r
		}, clients.RefusalOutOfScope},
		{"no clients file", func(f *fixture) workflows.TurnRequest {
			f.acts.Clients = nil
			r := workflows.TurnRequest{Conversation: "c1", Principal: "bob", Message: "hi"}
			workflows.SignRequest(testStarter, &r, 1, time.Now())
			return r
		}, clients.RefusalNoClients},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
			req := tc.req(f)
			f.env.SetStartWorkflowOptions(startAs(req.Conversation))
			res := f.runAsIs(req)
			if res.EndReason != workflows.EndUnattested || !strings.HasPrefix(res.EndDetail, tc.want+":") {
				t.Fatalf("end = %q %q, want %s", res.EndReason, res.EndDetail, tc.want)
			}
			if n := len(f.provider.Requests()); n != 0 {
				t.Fatalf("the model was asked %d times", n)
			}
			if msgs, err := f.store.LoadContext(context.Background(), "c1", 10); err != nil || len(msgs) != 0 {
				t.Fatalf("conversation = %v, %v; want nothing stored", msgs, err)
			}
			audit := f.audit()
			if len(audit) != 1 || audit[0].Outcome != activities.AuditTurnRefused || audit[0].Reason != tc.want {
				t.Fatalf("audit = %+v", audit)
			}
			if _, err := f.store.GetRequester(context.Background(), "turn/c1/1", ""); err == nil {
				t.Fatal("a refused turn has a recorded requester")
			}
		})
	}
}

// The four-eyes rule compares the approver with the credential that started the turn, not
// only with the principal it speaks for: bob, holding a credential that may speak for user:*,
// starts a turn as user:carol and cannot approve it; alice can. The principal is compared
// without regard to case or kind prefix: user:ALICE's turn is not alice's to approve.
func TestFourEyesComparesTheAuthenticatedRequester(t *testing.T) {
	set, bob, err := clients.Ephemeral("bob", "user:*")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		principal string
		refused   string // who is refused approver_is_requester
		approver  string // who then approves
	}{
		{"user:carol", "bob", "alice"},
		{"user:ALICE", "alice", "carol"},
	} {
		t.Run(tc.principal, func(t *testing.T) {
			f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
			src := registry.Source{Name: "test", Data: []byte(testRegistry)}
			reg, err := registry.Load([]registry.Source{src, registry.StructuralPolicy("four-eyes policy", "test.1", func(e registry.Entry) bool { return e.ID == "test.send" }, src)}, testImpls(f))
			if err != nil {
				t.Fatal(err)
			}
			f.acts.Registry, f.acts.Clients = reg, clients.Static(set)
			f.at(time.Minute, func() {
				f.signal(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, tc.refused, ""))
			})
			f.at(time.Minute+time.Second, func() {
				f.signal(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, tc.approver, ""))
			})
			req := workflows.TurnRequest{Conversation: "c1", Principal: tc.principal, Message: "pay"}
			workflows.SignRequest(bob, &req, 1, time.Now())
			f.env.SetStartWorkflowOptions(startAs("c1"))
			res := f.run(req)
			wantOutcomes(t, res, "executed")
			if res.Outcomes[0].Approver != tc.approver || f.sends.Load() != 1 {
				t.Fatalf("outcome %+v, sends %d", res.Outcomes[0], f.sends.Load())
			}
			var refused []string
			for _, r := range f.audit() {
				if r.Outcome == activities.AuditConfirmationRefused {
					refused = append(refused, r.Approver+":"+r.Reason)
				}
			}
			if strings.Join(refused, " ") != tc.refused+":approver_is_requester" {
				t.Fatalf("refusals = %v", refused)
			}
			rq, err := f.store.GetRequester(context.Background(), "turn/c1/1", "")
			if err != nil || rq.Client != "bob" || rq.Principal != tc.principal {
				t.Fatalf("requester = %+v, %v", rq, err)
			}
		})
	}
}

// An attestation copied from a turn's history does not start a second execution of the
// workflow id (a start with another reuse policy): the store already holds it for another run
// chain, so the turn ends unattested (requester_replayed) before the model is asked.
func TestAttestationStartsOneRunChain(t *testing.T) {
	f := newFixture(t, answer("ok"))
	req := workflows.TurnRequest{Conversation: "c1", Principal: "bob", Message: "hi"}
	f.sign(&req)
	if _, err := f.store.RecordRequester(context.Background(), store.TurnRequester{WorkflowID: "turn/c1/1", RunID: "earlier-run",
		FirstRunID: "earlier-run", Principal: "bob", Client: "test-client", Signature: req.Attestation.Signature, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	res := f.runAsIs(req)
	if res.EndReason != workflows.EndUnattested || !strings.HasPrefix(res.EndDetail, clients.RefusalReplayed) {
		t.Fatalf("end = %q %q", res.EndReason, res.EndDetail)
	}
	if n := len(f.provider.Requests()); n != 0 {
		t.Fatalf("the model was asked %d times", n)
	}
}
