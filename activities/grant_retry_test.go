package activities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
)

// A worker killed between taking a grant's use and recording the approval, whose retry runs
// under another registry revision (and, here, no approvers file: the grant's approver no longer
// stands), takes no grant: the use is spent and the call is put to people under the new
// revision (found by an attack helper: the retry approved it unchecked).
func TestGrantUseRetriedUnderANewRevisionAsksAgain(t *testing.T) {
	a := issuingStore(t)
	a.Approvers = nil // no approvers file: a fresh use would be refused (approver_gone)
	ctx := context.Background()
	in, id, _ := grantUsedOnce(t, a, "turn/n/2") // the first attempt's UseGrant, under cap:R1
	// Control: a fresh call under R2 finds no usable grant (closed policy_changed).
	// (not run here, it would close the grant)

	// Retry on a worker whose registry changed: Admit now says cap:R2.
	in.RegistryRevision = "cap:R2"
	out, err := a.IssueConfirmation(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	row, err := a.Store.GetConfirmation(ctx, id)
	if err != nil || out.Granted || row.Decision != "" || row.RegistryRevision != "cap:R2" {
		t.Fatalf("retry: granted %v, row %+v (%v): want the call put to people under cap:R2, no grant", out.Granted, row, err)
	}
}

// A worker killed after a grant approved the confirmation, whose retry runs under a policy
// that now asks two approvals: the row holds the grant's decision, so the call is refused
// (GrantVoided, the turn fails closed), never audited as put to people nor left waiting on a
// confirmation no decision can reach (found by an attack helper).
func TestGrantApprovalVoidedOnRetryIsNeverPutToPeople(t *testing.T) {
	a := issuingStore(t)
	a.Registry = cedarRegistry(t, `@id("p") permit (principal, action == Action::"system.health", resource);`, "")
	ctx := context.Background()
	in, id, at := grantUsedOnce(t, a, "turn/n/3") // the first attempt's UseGrant, under cap:R1
	_, hash, _ := token.Mint()
	if _, err := a.Store.CreateApprovedConfirmation(ctx, store.Confirmation{ID: id, TokenHash: hash, WorkflowID: in.WorkflowID, RunID: in.RunID,
		Seq: 1, CallID: "c1", CapabilityID: "x.send", Version: 1, ArgsDigest: "d", Arguments: in.Arguments, CreatedAt: at,
		ExpiresAt: at.Add(time.Minute), RegistryRevision: "cap:R1", Approver: "bob", Reason: GrantReasonPrefix + "rg-cf-0"}); err != nil {
		t.Fatal(err)
	}
	// Retry: the (Cedar) policy now asks two approvals.
	in.RegistryRevision = "cap:R2"
	in.Cedar = &CedarVerdict{Outcome: cedarpolicy.OutcomeAsk, Quorum: 2}
	_, err := a.IssueConfirmation(ctx, in)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrTypeGrantVoided || !appErr.NonRetryable() {
		t.Fatalf("retry: %v, want a non-retryable %s", err, ErrTypeGrantVoided)
	}
	evs, _ := a.Store.ListAudit(ctx, in.WorkflowID)
	for _, e := range evs {
		if e.Outcome == AuditConfirmationIssued {
			t.Fatalf("the voided grant's confirmation was audited as put to people: %+v", e)
		}
	}
}

// grantUsedOnce sets a's clock, stores bob's grant of three x.send calls under cap:R1 for
// alice in conversation n, and takes one use of it for workflowID's first call, as a first
// attempt of IssueConfirmation does before a kill -9. It returns that call's input, its
// confirmation id and the clock's time.
func grantUsedOnce(t *testing.T, a *Activities, workflowID string) (IssueInput, string, time.Time) {
	t.Helper()
	ctx := context.Background()
	at := time.Now().UTC()
	a.Now = func() time.Time { return at }
	in := IssueInput{WorkflowID: workflowID, RunID: "r", Seq: 1, CallID: "c1", CapabilityID: "x.send", Version: 1,
		ArgsDigest: "d", Arguments: json.RawMessage(`{"to":"a@example.com"}`), TTL: time.Minute,
		Principal: "alice", Conversation: "n", RegistryRevision: "cap:R1"}
	if _, err := a.Store.CreateGrant(ctx, store.Grant{ID: "rg-cf-0", ConfirmationID: "cf-0", Conversation: "n", Principal: "alice",
		CapabilityID: "x.send", Version: 1, ArgsDigest: "d", RegistryRevision: "cap:R1", Approver: "bob", Granted: 3,
		GrantedAt: at.Add(-time.Minute), ExpiresAt: at.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	id := ConfirmationID(in.WorkflowID, in.RunID, in.Seq)
	if use, _, err := a.Store.UseGrant(ctx, store.GrantScope{ConfirmationID: id, Conversation: "n", Principal: "alice", CapabilityID: "x.send",
		Version: 1, ArgsDigest: "d", RegistryRevision: "cap:R1", At: at}); err != nil || use == nil {
		t.Fatalf("first attempt's use: %+v %v", use, err)
	}
	return in, id, at
}
