package store

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// Record writes an outcome's audit row, decision and context messages all or nothing: a
// decision that conflicts with the stored one leaves no audit row and no context entry behind,
// and a retry of a Record that committed writes nothing twice.
func TestRecordIsAtomicAndIdempotent(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		c := newConfirmation("c-1", 1)
		c.CreatedAt, c.ExpiresAt = base, base.Add(10*time.Minute)
		if _, err := s.CreateConfirmation(ctx, c); err != nil {
			t.Fatal(err)
		}
		rec := func(key, decision string) Recording {
			return Recording{
				Audit:    &AuditEvent{Key: key, WorkflowID: "wf", RunID: "r", Seq: 1, Outcome: "denied", Stage: "confirm", At: base},
				Decision: &RecordedDecision{ConfirmationID: "c-1", Decision: decision, Approver: "alice", At: base},
				Context:  []ContextEntry{{Conversation: "conv", Key: key + "/0", Payload: json.RawMessage(`{"role":"tool"}`)}},
			}
		}
		if err := s.Record(ctx, rec("wf/r/1/denied", DecisionDenied)); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, rec("wf/r/1/denied", DecisionDenied)); err != nil {
			t.Fatalf("a retried Record must be a no-op: %v", err)
		}
		// Another decision for the same confirmation: refused, and its audit row and context
		// entry are rolled back with it.
		if err := s.Record(ctx, rec("wf/r/1/approved", DecisionApproved)); !errors.Is(err, ErrConflict) {
			t.Fatalf("conflicting decision err = %v, want ErrConflict", err)
		}
		rows, err := s.ListAudit(ctx, "wf")
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Outcome != "denied" {
			t.Fatalf("audit rows = %+v, want the one denied row", rows)
		}
		entries, err := s.LoadContext(ctx, "conv", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Key != "wf/r/1/denied/0" {
			t.Fatalf("context entries = %+v, want the one denied entry", entries)
		}
		if err := s.Record(ctx, Recording{Audit: &AuditEvent{WorkflowID: "wf", Outcome: "x"}}); err == nil {
			t.Fatal("an audit event without a key must be refused")
		}
		if err := s.Record(ctx, Recording{Decision: &RecordedDecision{ConfirmationID: "c-1", Decision: "maybe"}}); err == nil {
			t.Fatal("an invalid decision must be refused")
		}
	})
}

// ReplaceContext gives a stored key the new payload in place (same entry, same position); a
// Record without it keeps the stored payload.
func TestRecordReplaceContextKeepsThePlace(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		entry := func(key, payload string) ContextEntry {
			return ContextEntry{Conversation: "conv", Key: key, Payload: json.RawMessage(payload)}
		}
		for _, r := range []Recording{
			{Context: []ContextEntry{entry("a", `{"n":1}`), entry("b", `{"n":2}`)}},
			{Context: []ContextEntry{entry("a", `{"n":"kept"}`)}},
			{Context: []ContextEntry{entry("a", `{"n":"replaced"}`)}, ReplaceContext: true},
		} {
			if err := s.Record(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.LoadContext(ctx, "conv", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Key != "a" || string(got[0].Payload) != `{"n":"replaced"}` || got[1].Key != "b" {
			t.Fatalf("entries = %+v", got)
		}
	})
}
