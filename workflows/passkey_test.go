package workflows_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/passkey/passkeytest"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// passkeyFixture is a fixture whose policy requires a passkey for test.send ("approval/passkey")
// and where alice has registered a software passkey (the browser's part is tested in
// integration/passkey_test.go).
func passkeyFixture(t *testing.T, responses ...json.RawMessage) (*fixture, *passkeytest.Authenticator) {
	t.Helper()
	return passkeyFixtureQuorum(t, 0, responses...)
}

// passkeyFixtureQuorum is passkeyFixture with test.send needing quorum approvals.
func passkeyFixtureQuorum(t *testing.T, quorum int, responses ...json.RawMessage) (*fixture, *passkeytest.Authenticator) {
	t.Helper()
	f := newFixture(t, responses...)
	src := registry.Source{Name: "test", Data: []byte(testRegistry)}
	base := registry.StructuralPolicy("test policy", "test.passkey", nil, src)
	var doc registry.PolicyDocument
	if err := json.Unmarshal(base.Data, &doc); err != nil {
		t.Fatal(err)
	}
	for i := range doc.Capabilities {
		if doc.Capabilities[i].ID == "test.send" {
			doc.Capabilities[i].Passkey, doc.Capabilities[i].Quorum = true, quorum
		}
	}
	data, _ := json.Marshal(doc)
	reg, err := registry.Load([]registry.Source{src, {Name: base.Name, Data: data}}, testImpls(f))
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Registry = reg
	auth, err := passkeytest.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.AddPasskey(context.Background(), store.Passkey{CredentialID: auth.ID(), Approver: "alice", PublicKey: auth.PublicKey()}); err != nil {
		t.Fatal(err)
	}
	return f, auth
}

// bareDecision is approver's approval of id without a passkey assertion, signed as a surface
// that ignores the passkey rule would sign it (approval.Sign refuses to).
func (f *fixture) bareDecision(id, approver string) workflows.Decision {
	f.t.Helper()
	row, err := f.store.GetConfirmation(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	row.PasskeyRequired = false
	d, err := approval.Sign(f.key, row, approval.Request{ConfirmationID: id, Decision: workflows.DecisionApprove, Approver: approver,
		Signer: credentialOf(f.t, approver)}, time.Time{})
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// passkeyDecision is alice's approval of id signed by her passkey with counter n: the page's
// two steps (approval.Challenge, then Sign with its nonce and the assertion).
func (f *fixture) passkeyDecision(auth *passkeytest.Authenticator, id string, n uint32) workflows.Decision {
	f.t.Helper()
	return f.passkeyDecisionBy("alice", auth, id, n)
}

// passkeyDecisionBy is approver's approval of id signed by the passkey auth with counter n.
func (f *fixture) passkeyDecisionBy(approver string, auth *passkeytest.Authenticator, id string, n uint32) workflows.Decision {
	f.t.Helper()
	row, err := f.store.GetConfirmation(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	req := approval.Request{ConfirmationID: id, Decision: workflows.DecisionApprove, Approver: approver, Signer: credentialOf(f.t, approver)}
	nonce, mac, err := approval.Challenge(f.key, row, req, time.Time{})
	if err != nil {
		f.t.Fatal(err)
	}
	ch, _ := base64.RawURLEncoding.DecodeString(mac)
	as, err := auth.Assert(passkeytest.Assertion{Origin: "http://localhost:8780", RPID: "localhost", Challenge: ch, Flags: passkeytest.FlagUP | passkeytest.FlagUV, Counter: n})
	if err != nil {
		f.t.Fatal(err)
	}
	req.Nonce, req.Passkey = nonce, as
	d, err := approval.Sign(f.key, row, req, time.Time{})
	if err != nil {
		f.t.Fatal(err)
	}
	if d.MAC != mac {
		f.t.Fatal("the decision's MAC is not the challenge the passkey signed")
	}
	return d
}

// A passkey approval whose consume reply is lost is retried with the same input: the retry
// finds the counter it stored itself (same nonce) and accepts, so the approval is not lost and
// nothing is refused passkey_replayed; the call runs once and the proof says "passkey".
func TestPasskeyApprovalSurvivesALostConsumeReply(t *testing.T) {
	f, auth := passkeyFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("sent"))
	var attempts atomic.Int32
	f.env.OnActivity(f.acts.ConsumeConfirmation, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.ConsumeInput) (activities.ConsumeOutput, error) {
			out, err := f.acts.ConsumeConfirmation(ctx, in)
			if attempts.Add(1) == 1 && err == nil {
				return activities.ConsumeOutput{}, errors.New("connection reset by peer") // the reply is lost
			}
			return out, err
		})
	var id string
	f.at(time.Minute, func() {
		id = f.pending()[0].ConfirmationID
		f.signal(f.passkeyDecision(auth, id, 1))
	})
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 2 * time.Minute})
	if attempts.Load() < 2 {
		t.Fatalf("consume attempts = %d", attempts.Load())
	}
	wantOutcomes(t, res, "executed")
	if f.sends.Load() != 1 {
		t.Fatalf("sends = %d, want 1", f.sends.Load())
	}
	if got := f.refusals(); len(got) != 0 {
		t.Fatalf("refusals = %v", got)
	}
	if pk, _ := f.store.GetPasskey(context.Background(), auth.ID()); pk.SignCount != 1 {
		t.Fatalf("stored counter = %d, want 1", pk.SignCount)
	}
	if row, _ := f.store.GetConfirmation(context.Background(), id); row.ApproverProof != "passkey, attested by CLI credential" {
		t.Fatalf("approver proof = %q", row.ApproverProof)
	}
}

// In one turn: a decision without an assertion is refused passkey_required, one whose counter
// does not rise over the last accepted passkey_replayed, and an assertion by an unregistered
// authenticator passkey_unknown; each reissues the token, and the valid one then runs the
// call once.
func TestPasskeyRefusalsInOneTurn(t *testing.T) {
	f, auth := passkeyFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("sent"))
	stranger, err := passkeytest.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.UsePasskey(context.Background(), "alice", auth.ID(), 5, "earlier", time.Now()); err != nil {
		t.Fatal(err)
	}
	f.at(time.Minute, func() { f.signal(f.bareDecision(f.pending()[0].ConfirmationID, "alice")) })
	f.at(time.Minute+time.Second, func() { f.signal(f.passkeyDecision(auth, f.pending()[0].ConfirmationID, 5)) })
	f.at(time.Minute+2*time.Second, func() { f.signal(f.passkeyDecision(stranger, f.pending()[0].ConfirmationID, 9)) })
	f.at(time.Minute+3*time.Second, func() { f.signal(f.passkeyDecision(auth, f.pending()[0].ConfirmationID, 6)) })
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 2 * time.Minute})
	wantOutcomes(t, res, "executed")
	if f.sends.Load() != 1 {
		t.Fatalf("sends = %d, want 1", f.sends.Load())
	}
	want := strings.Join([]string{activities.PasskeyRequired, activities.PasskeyReplayed, activities.PasskeyUnknown}, " ")
	if got := strings.Join(f.refusals(), " "); got != want {
		t.Fatalf("refusals = %q, want %q", got, want)
	}
}

// A consume attempt that stored the passkey's new counter and then died before it recorded
// the decision's nonce (a crash between the two writes) leaves the counter raised by this very
// decision: the retried presentation finds the counter set by its own nonce and is accepted,
// not refused passkey_replayed.
func TestPasskeyApprovalSurvivesACrashAfterTheCounterWrite(t *testing.T) {
	f, auth := passkeyFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("sent"))
	f.at(time.Minute, func() {
		d := f.passkeyDecision(auth, f.pending()[0].ConfirmationID, 3)
		// What the dead attempt wrote before it died.
		if err := f.store.UsePasskey(context.Background(), "alice", auth.ID(), 3, d.Nonce, time.Now()); err != nil {
			t.Fatal(err)
		}
		f.signal(d)
	})
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 2 * time.Minute})
	wantOutcomes(t, res, "executed")
	if got := f.refusals(); len(got) != 0 || f.sends.Load() != 1 {
		t.Fatalf("refusals = %v, sends = %d", got, f.sends.Load())
	}
}

// A quorum of two on a passkey capability: each approval needs its own approver's passkey.
// alice's counts (quorum_pending); bob's without an assertion is passkey_required, bob's with
// alice's passkey passkey_unknown, and bob's with his own completes the quorum: the call runs
// once, and the proof names the quorum.
func TestPasskeyQuorumNeedsEachApproversPasskey(t *testing.T) {
	f, alice := passkeyFixtureQuorum(t, 2, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("sent"))
	bob, err := passkeytest.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.AddPasskey(context.Background(), store.Passkey{CredentialID: bob.ID(), Approver: "bob", PublicKey: bob.PublicKey()}); err != nil {
		t.Fatal(err)
	}
	var id string
	f.at(time.Minute, func() {
		id = f.pending()[0].ConfirmationID
		f.signal(f.passkeyDecision(alice, id, 1))
	})
	f.at(time.Minute+time.Second, func() { f.signal(f.bareDecision(id, "bob")) })
	f.at(time.Minute+2*time.Second, func() { f.signal(f.passkeyDecisionBy("bob", alice, id, 2)) })
	f.at(time.Minute+3*time.Second, func() { f.signal(f.passkeyDecisionBy("bob", bob, id, 1)) })
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 2 * time.Minute})
	wantOutcomes(t, res, "executed")
	if f.sends.Load() != 1 {
		t.Fatalf("sends = %d, want 1", f.sends.Load())
	}
	want := strings.Join([]string{activities.PasskeyRequired, activities.PasskeyUnknown}, " ")
	if got := strings.Join(f.refusals(), " "); got != want {
		t.Fatalf("refusals = %q, want %q", got, want)
	}
	if got := f.countedApprovals(); got != "alice:"+activities.QuorumPending {
		t.Fatalf("counted approvals = %q, want alice's", got)
	}
	if row, _ := f.store.GetConfirmation(context.Background(), id); row.ApproverProof != "passkey, attested by CLI credential; quorum of alice, bob" {
		t.Fatalf("approver proof = %q", row.ApproverProof)
	}
}

// A confirmation issued while the policy required a passkey keeps needing one on a worker
// whose policy lost the rule (a rollback, a worker of the previous deploy): a denial without
// an assertion is refused passkey_required (an approval would also be registry_changed), and
// the denial made with alice's passkey decides it, with "passkey" as its proof.
func TestPasskeyRequiredAsIssuedOnAWorkerWithoutTheRule(t *testing.T) {
	f, auth := passkeyFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("denied"))
	without, err := registry.Load(registry.WithStructuralPolicy(registry.Source{Name: "test", Data: []byte(testRegistry)}), testImpls(f))
	if err != nil {
		t.Fatal(err)
	}
	if pe, _ := without.Policy().Entry("test.send@1"); pe.Passkey {
		t.Fatal("the second policy must not require a passkey")
	}
	deny := func(id string, withPasskey bool) workflows.Decision {
		row, err := f.store.GetConfirmation(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		req := approval.Request{ConfirmationID: id, Decision: workflows.DecisionDeny, Reason: "no", Approver: "alice", Signer: credentialOf(t, "alice")}
		if !withPasskey {
			row.PasskeyRequired = false // a surface that ignores the rule
			d, err := approval.Sign(f.key, row, req, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		nonce, mac, err := approval.Challenge(f.key, row, req, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := base64.RawURLEncoding.DecodeString(mac)
		as, err := auth.Assert(passkeytest.Assertion{Origin: "http://localhost:8780", RPID: "localhost", Challenge: ch, Flags: passkeytest.FlagUP | passkeytest.FlagUV, Counter: 1})
		if err != nil {
			t.Fatal(err)
		}
		req.Nonce, req.Passkey = nonce, as
		d, err := approval.Sign(f.key, row, req, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var id string
	f.at(time.Minute, func() {
		id = f.pending()[0].ConfirmationID
		if row, _ := f.store.GetConfirmation(context.Background(), id); !row.PasskeyRequired {
			t.Error("the confirmation was not issued as passkey-required")
		}
		f.acts.Registry = without // the worker now serves a policy without the rule
		f.signal(deny(id, false))
	})
	f.at(time.Minute+time.Second, func() { f.signal(deny(id, true)) })
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 2 * time.Minute})
	wantOutcomes(t, res, "denied:denied_by_approver")
	if got := strings.Join(f.refusals(), " "); got != activities.PasskeyRequired {
		t.Fatalf("refusals = %q, want %q", got, activities.PasskeyRequired)
	}
	if row, _ := f.store.GetConfirmation(context.Background(), id); row.ApproverProof != "passkey, attested by CLI credential" {
		t.Fatalf("approver proof = %q", row.ApproverProof)
	}
}
