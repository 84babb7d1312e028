package activities

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/store"
)

// crashOnce fails its first Pending as a worker dying between storing the confirmation and
// writing its notices would, then passes to the real outbox.
type crashOnce struct {
	next   Notifier
	failed bool
}

func (c *crashOnce) Pending(ctx context.Context, row store.Confirmation) error {
	if !c.failed {
		c.failed = true
		return errors.New("worker died before the outbox write")
	}
	return c.next.Pending(ctx, row)
}

// A crash between issuing a confirmation and writing its notices loses nothing: the activity's
// retry finds the stored row and writes the notices; further retries write nothing twice, and
// the notice never carries the token.
func TestIssueConfirmationOwesNoticesOnceAcrossRetries(t *testing.T) {
	a := issuingStore(t)
	path := filepath.Join(t.TempDir(), "notify.yaml")
	if err := os.WriteFile(path, []byte("channels: [{name: hook, type: webhook}, {name: mail, type: email}]\nroutes: [{channels: [hook, mail], remind_at: 0.5}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.Notices = &crashOnce{next: &notify.Outbox{Store: a.Store, Source: notify.NewSource(path)}}
	ctx := context.Background()
	in := IssueInput{WorkflowID: "turn/n/1", RunID: "r", Seq: 1, CallID: "c1", CapabilityID: "x.send", Version: 1,
		ArgsDigest: "d", Arguments: json.RawMessage(`{"to":"a@example.com"}`), TTL: time.Minute}
	if _, err := a.IssueConfirmation(ctx, in); err == nil {
		t.Fatal("the first attempt's outbox failure was swallowed: its notices would be lost")
	}
	var id string
	for range 3 {
		out, err := a.IssueConfirmation(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if id != "" && out.ConfirmationID != id {
			t.Fatalf("a retry issued another confirmation: %s then %s", id, out.ConfirmationID)
		}
		id = out.ConfirmationID
	}
	ds, err := a.Store.ListDeliveries(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, d := range ds {
		kinds[d.Kind+"/"+d.Channel]++
	}
	if len(ds) != 4 || kinds["pending/hook"] != 1 || kinds["pending/mail"] != 1 || kinds["reminder/hook"] != 1 || kinds["reminder/mail"] != 1 {
		t.Fatalf("deliveries: %v", kinds)
	}
	row, _ := a.Store.GetConfirmation(ctx, id)
	for _, d := range ds {
		if strings.Contains(string(d.Payload), string(row.SealedToken)) || strings.Contains(string(d.Payload), "token") {
			t.Fatalf("a notice carries the token: %s", d.Payload)
		}
	}
}

// A confirmation is stored with its quorum and the user's request (the presentation every
// surface shows), and recording its decision owes the decided notice once, on every attempt
// (issue 34).
func TestRecordingADecisionOwesItsNoticeOnce(t *testing.T) {
	a := issuingStore(t)
	path := filepath.Join(t.TempDir(), "notify.yaml")
	if err := os.WriteFile(path, []byte("channels: [{name: hook, type: webhook}]\nroutes: [{channels: [hook]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.Notices = &notify.Outbox{Store: a.Store, Source: notify.NewSource(path)}
	ctx := context.Background()
	if err := a.Record(ctx, RecordInput{Conversation: "n", ContextKey: "turn/n/1/r1", Messages: []inference.Message{
		{Role: inference.RoleUser, Content: "older question"}, {Role: inference.RoleUser, Content: "Mail a@example.com the report"}}}); err != nil {
		t.Fatal(err)
	}
	out, err := a.IssueConfirmation(ctx, IssueInput{WorkflowID: "turn/n/1", RunID: "r", Seq: 1, CallID: "c1", CapabilityID: "x.send", Version: 1,
		ArgsDigest: "d", Arguments: json.RawMessage(`{"to":"a@example.com"}`), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	row, err := a.Store.GetConfirmation(ctx, out.ConfirmationID)
	if err != nil || row.UserRequest != "Mail a@example.com the report" || row.Quorum != out.Quorum || row.Quorum < 1 {
		t.Fatalf("stored confirmation: %v user request %q quorum %d (issued %d)", err, row.UserRequest, row.Quorum, out.Quorum)
	}
	rec := RecordInput{Audit: &AuditRecord{Kind: string(OutcomeDenied), WorkflowID: "turn/n/1", RunID: "r", Seq: 1, CallID: "c1", CapabilityID: "x.send",
		Version: 1, Approver: "bob"}, Decision: &Decision{ConfirmationID: out.ConfirmationID, Decision: "denied", Approver: "bob", Reason: "no"}}
	for range 2 {
		if err := a.Record(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := a.Store.ListDeliveries(ctx, out.ConfirmationID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, d := range ds {
		kinds[d.Kind]++
	}
	if kinds[notify.KindDecided] != 1 || kinds[notify.KindPending] != 1 || len(ds) != 2 {
		t.Fatalf("outbox: %v", kinds)
	}
}
