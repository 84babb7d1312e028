package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
		// A decision the turn recorded when it judged it (DecideProved), then its outcome: the
		// audit row and the message are written (on PostgreSQL in one statement).
		c2 := newConfirmation("c-2", 2)
		c2.CreatedAt, c2.ExpiresAt = base, base.Add(10*time.Minute)
		if _, err := s.CreateConfirmation(ctx, c2); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideProved(ctx, "c-2", DecisionApproved, "alice", "", "", base); err != nil {
			t.Fatal(err)
		}
		executed := Recording{
			Audit:    &AuditEvent{Key: "wf/r/2/executed", WorkflowID: "wf", RunID: "r", Seq: 2, Outcome: "executed", Stage: "execute", Approver: "alice", At: base},
			Decision: &RecordedDecision{ConfirmationID: "c-2", Decision: DecisionApproved, Approver: "alice", At: base},
			Context:  []ContextEntry{{Conversation: "conv", Key: "wf/r/2/executed/0", WorkflowID: "wf", Payload: json.RawMessage(`{"role":"tool","n":2}`), CreatedAt: base}},
		}
		for range 2 { // and its retry, a no-op
			if err := s.Record(ctx, executed); err != nil {
				t.Fatalf("record the outcome of a decided confirmation: %v", err)
			}
		}
		if rows, err := s.ListAudit(ctx, "wf"); err != nil || len(rows) != 2 || rows[1].Outcome != "executed" || rows[1].Approver != "alice" || !rows[1].At.Equal(base.Truncate(time.Microsecond)) {
			t.Fatalf("audit rows = %+v, %v; want the denied row and one executed row", rows, err)
		}
		if entries, err := s.LoadContext(ctx, "conv", 0); err != nil || len(entries) != 2 || string(entries[1].Payload) != `{"role":"tool","n":2}` || entries[1].WorkflowID != "wf" {
			t.Fatalf("context entries = %+v, %v; want the denied entry and the executed one", entries, err)
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

// A batch larger than one multi-row statement (contextRowsPerStatement) is written in order
// and all or nothing; a batch of one statement is atomic by itself, including a ReplaceContext
// of several entries.
func TestContextBatchesKeepOrderAndAtomicity(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		n := 2*contextRowsPerStatement + 50
		var batch []ContextEntry
		for i := range n {
			batch = append(batch, ContextEntry{Conversation: "big", Key: fmt.Sprintf("k%03d", i), Payload: json.RawMessage(fmt.Sprint(i))})
		}
		if err := s.AppendContext(ctx, batch); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadContext(ctx, "big", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("%d entries stored, want %d", len(got), n)
		}
		for i, e := range got {
			if e.Key != fmt.Sprintf("k%03d", i) || string(e.Payload) != fmt.Sprint(i) {
				t.Fatalf("entry %d = %s %s, want k%03d %d (insertion order)", i, e.Key, e.Payload, i, i)
			}
		}
		// The database refuses the last entry, in the third statement of the batch: the
		// first two statements are rolled back with it.
		refuseContextKey(t, s, "last")
		var bad []ContextEntry
		for i := range n {
			bad = append(bad, ContextEntry{Conversation: "bad", Key: fmt.Sprintf("k%03d", i), Payload: json.RawMessage(`1`)})
		}
		bad[n-1].Key = "last"
		if err := s.AppendContext(ctx, bad); err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("err = %v, want the trigger's error", err)
		}
		if rows, _ := s.LoadContext(ctx, "bad", 0); len(rows) != 0 {
			t.Fatalf("a failed batch left %d entries", len(rows))
		}
		// Several replaced entries in one statement keep their places.
		for _, r := range []Recording{
			{Context: []ContextEntry{{Conversation: "r", Key: "a", Payload: json.RawMessage(`1`)}, {Conversation: "r", Key: "b", Payload: json.RawMessage(`2`)}}},
			{Context: []ContextEntry{{Conversation: "r", Key: "b", Payload: json.RawMessage(`"b2"`)}, {Conversation: "r", Key: "a", Payload: json.RawMessage(`"a2"`)}, {Conversation: "r", Key: "c", Payload: json.RawMessage(`3`)}}, ReplaceContext: true},
		} {
			if err := s.Record(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := s.LoadContext(ctx, "r", 0)
		if err != nil {
			t.Fatal(err)
		}
		var kv []string
		for _, e := range rs {
			kv = append(kv, e.Key+"="+string(e.Payload))
		}
		if strings.Join(kv, " ") != `a="a2" b="b2" c=3` {
			t.Fatalf("entries = %v, want a=\"a2\" b=\"b2\" c=3", kv)
		}
	})
}

// An outcome's audit row and messages without a decision (an automatic call's record; on
// PostgreSQL a single statement) are written all or nothing, and a retry writes nothing twice.
func TestRecordAuditAndContextAllOrNothing(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		refuseContextKey(t, s, "boom")
		rec := func(auditKey, entryKey string) Recording {
			return Recording{
				Audit:   &AuditEvent{Key: auditKey, WorkflowID: "wf", RunID: "r", Seq: 1, Outcome: "executed", Stage: "execute", At: base},
				Context: []ContextEntry{{Conversation: "conv", Key: entryKey, Payload: json.RawMessage(`{"role":"tool"}`)}},
			}
		}
		if err := s.Record(ctx, rec("wf/r/1/executed", "boom")); err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("err = %v, want the trigger's error", err)
		}
		if rows, err := s.ListAudit(ctx, "wf"); err != nil || len(rows) != 0 {
			t.Fatalf("audit rows after a failed record = %+v, %v; want none", rows, err)
		}
		for range 2 {
			if err := s.Record(ctx, rec("wf/r/1/executed", "wf/r/1/0")); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := s.ListAudit(ctx, "wf")
		if err != nil || len(rows) != 1 || rows[0].Outcome != "executed" {
			t.Fatalf("audit rows = %+v, %v; want the one executed row", rows, err)
		}
		entries, err := s.LoadContext(ctx, "conv", 0)
		if err != nil || len(entries) != 1 || entries[0].Key != "wf/r/1/0" {
			t.Fatalf("context entries = %+v, %v; want the one entry", entries, err)
		}
	})
}
