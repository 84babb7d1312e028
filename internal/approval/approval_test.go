package approval_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/workflows"
)

// A reason longer than MaxReasonBytes is refused before anything is signed or sent, on every
// surface (it would travel through history and the audit to the model).
func TestSignRefusesAnOverlongReason(t *testing.T) {
	cred, err := approvers.NewCredential("approver:alice")
	if err != nil {
		t.Fatal(err)
	}
	row := store.Confirmation{ID: "cf-1", ArgsDigest: "d", ExpiresAt: time.Now().Add(time.Minute)}
	r := approval.Request{ConfirmationID: "cf-1", Decision: workflows.DecisionDeny, Approver: "alice",
		Reason: strings.Repeat("x", approval.MaxReasonBytes+1), Signer: cred}
	if _, err := approval.Sign(token.Key{}, row, r, time.Now()); !errors.Is(err, approval.ErrReasonTooLong) {
		t.Fatalf("Sign with a %d-byte reason = %v, want ErrReasonTooLong", len(r.Reason), err)
	}
	r.Reason = strings.Repeat("x", approval.MaxReasonBytes)
	if _, err := approval.Sign(token.Key{}, row, r, time.Now()); errors.Is(err, approval.ErrReasonTooLong) {
		t.Fatalf("Sign with a %d-byte reason = %v", len(r.Reason), err)
	}
}
