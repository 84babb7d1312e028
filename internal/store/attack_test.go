package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Attack: a context entry refused by the database in the middle of the data-modifying WITH
// (audit row + messages) must leave neither the audit row nor any message.
func TestAttackRecordContextRefusedMidStatement(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		refuseInsert(t, s, "context_entries", "entry_key", "k2")
		err := s.Record(ctx, Recording{
			Audit: &AuditEvent{Key: "wf/a", WorkflowID: "wf", Outcome: "executed", At: base},
			Context: []ContextEntry{
				{Conversation: "cv", Key: "k1", Payload: json.RawMessage(`1`)},
				{Conversation: "cv", Key: "k2", Payload: json.RawMessage(`2`)},
				{Conversation: "cv", Key: "k3", Payload: json.RawMessage(`3`)},
			},
		})
		if err == nil {
			t.Fatal("refused context entry: Record succeeded")
		}
		if rows, _ := s.ListAudit(ctx, "wf"); len(rows) != 0 {
			t.Fatalf("audit row written without its messages: %+v", rows)
		}
		if got, _ := s.LoadContext(ctx, "cv", 0); len(got) != 0 {
			t.Fatalf("%d context entries of a refused statement", len(got))
		}
		// Context-only multi-row insert: all or nothing too.
		err = s.AppendContext(ctx, []ContextEntry{
			{Conversation: "cv2", Key: "k1", Payload: json.RawMessage(`1`)},
			{Conversation: "cv2", Key: "k2", Payload: json.RawMessage(`2`)},
		})
		if err == nil {
			t.Fatal("AppendContext of a refused entry succeeded")
		}
		if got, _ := s.LoadContext(ctx, "cv2", 0); len(got) != 0 {
			t.Fatalf("%d entries of a refused AppendContext", len(got))
		}
	})
}

// Attack: kill the client mid-statement (context cancelled while the server sleeps inside the
// WITH statement / the decision UPDATE). Nothing may be committed; a retry writes exactly once.
func TestAttackCancelMidStatement(t *testing.T) {
	t.Parallel()
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	for _, q := range []string{
		`CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN IF current_setting('application_name', true) IS NOT NULL AND EXISTS (SELECT 1 FROM slowdown) THEN PERFORM pg_sleep(2); END IF; RETURN NEW; END $$`,
		`CREATE TABLE slowdown (x int)`,
		`CREATE TRIGGER slow_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION slow()`,
		`CREATE TRIGGER slow_conf BEFORE UPDATE ON confirmations FOR EACH ROW EXECUTE FUNCTION slow()`,
		`INSERT INTO slowdown VALUES (1)`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rec := Recording{
		Audit:   &AuditEvent{Key: "wf/x", WorkflowID: "wf", Outcome: "executed", At: base},
		Context: []ContextEntry{{Conversation: "cv", Key: "a", Payload: json.RawMessage(`"a"`)}, {Conversation: "cv", Key: "b", Payload: json.RawMessage(`"b"`)}},
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := s.Record(short, rec)
	cancel()
	if err == nil {
		t.Fatal("Record under a 300 ms deadline with a 2 s trigger succeeded")
	}
	if _, err := s.CreateConfirmation(ctx, newConfirmation("c-k", 0x33)); err != nil {
		t.Fatal(err)
	}
	short, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = s.DecideProved(short, "c-k", DecisionApproved, "alice", "", "alice's CLI credential", base)
	cancel()
	if err == nil {
		t.Fatal("DecideProved under a 300 ms deadline succeeded")
	}
	time.Sleep(2500 * time.Millisecond) // the server's statements are over, cancelled or not
	if rows, _ := s.ListAudit(ctx, "wf"); len(rows) != 0 {
		t.Errorf("a killed Record committed its audit row: %+v", rows)
	}
	if got, _ := s.LoadContext(ctx, "cv", 0); len(got) != 0 {
		t.Errorf("a killed Record committed %d messages", len(got))
	}
	if row, _ := s.GetConfirmation(ctx, "c-k"); row.Decision != "" || row.ApproverProof != "" {
		t.Errorf("a killed decision committed: %+v", row)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM slowdown`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Record(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideProved(ctx, "c-k", DecisionApproved, "alice", "", "alice's CLI credential", base); err != nil {
			t.Fatal(err)
		}
	}
	if rows, _ := s.ListAudit(ctx, "wf"); len(rows) != 1 {
		t.Errorf("retries: %d audit rows, want 1", len(rows))
	}
	if got, _ := s.LoadContext(ctx, "cv", 0); len(got) != 2 {
		t.Errorf("retries: %d messages, want 2", len(got))
	}
	if row, _ := s.GetConfirmation(ctx, "c-k"); row.Approver != "alice" || row.ApproverProof != "alice's CLI credential" {
		t.Errorf("retried decision: %+v", row)
	}
}

// hostile is what a model or tool could put in arguments and messages.
var hostile = []string{
	"\u202Eevil\u202C txt.exe", "\u2066rtl\u2069\u200F\u061C", "ctl:\x01\x07\x08\x1b[31mred\x1b[0m\r\n\t",
	"c1:\u0085\u009b31m", "nul-escape", "line\u2028sep\u2029", "<script>&amp;", strings.Repeat("\u202E", 3000),
}

func hostilePayloads(t *testing.T) []json.RawMessage {
	var out []json.RawMessage
	for _, h := range hostile {
		b, err := json.Marshal(map[string]string{"role": "tool", "content": h})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	// JSON text as a model or tool could send it, not re-marshalled by Go: \u0000 escapes,
	// raw bidi characters, odd whitespace, big numbers.
	out = append(out, json.RawMessage(`{"content":"a\u0000b\u202e", "n": 1e400 , "x" : [ ] }`))
	out = append(out, json.RawMessage("{\"raw\":\"\u202E\u2066\x7f\"}"))
	big, _ := json.Marshal(map[string]string{"content": strings.Repeat("\u202Ex\x01", 1<<20/5)})
	out = append(out, big) // ~1.2 MB
	return out
}

// Attack: hostile payloads through the multi-row insert, the WITH statement and the
// transaction path are stored byte for byte, in order, and identically on every path.
func TestAttackHostileContextRoundTrip(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		ps := hostilePayloads(t)
		mk := func(conv string, n int) []ContextEntry {
			var es []ContextEntry
			for i := range n {
				es = append(es, ContextEntry{Conversation: conv, Key: fmt.Sprint("k", i), WorkflowID: hostile[i%len(hostile)], Payload: ps[i%len(ps)]})
			}
			return es
		}
		check := func(conv string, n int) {
			t.Helper()
			got, err := s.LoadContext(ctx, conv, 0)
			if err != nil || len(got) != n {
				t.Fatalf("%s: %d entries, %v; want %d", conv, len(got), err, n)
			}
			for i, e := range got {
				if e.Key != fmt.Sprint("k", i) || string(e.Payload) != string(ps[i%len(ps)]) || e.WorkflowID != hostile[i%len(hostile)] {
					t.Fatalf("%s: entry %d stored differently: key %s wf %q payload %.80q", conv, i, e.Key, e.WorkflowID, e.Payload)
				}
			}
		}
		n := len(ps)
		if err := s.AppendContext(ctx, mk("multi", n)); err != nil { // one multi-row statement
			t.Fatal(err)
		}
		check("multi", n)
		if err := s.Record(ctx, Recording{Context: mk("ctxonly", n), ReplaceContext: true}); err != nil {
			t.Fatal(err)
		}
		check("ctxonly", n)
		det := strings.Join(hostile[:7], "|")
		if err := s.Record(ctx, Recording{Audit: &AuditEvent{Key: "with", WorkflowID: "w-with", Outcome: "executed", Detail: det, Reason: hostile[0], Approver: hostile[1], At: base},
			Context: mk("with", n)}); err != nil { // the WITH statement on PostgreSQL
			t.Fatal(err)
		}
		check("with", n)
		if rows, err := s.ListAudit(ctx, "w-with"); err != nil || len(rows) != 1 || rows[0].Detail != det || rows[0].Reason != hostile[0] || rows[0].Approver != hostile[1] {
			t.Fatalf("audit of the WITH statement = %+v, %v", rows, err)
		}
		if err := s.Record(ctx, Recording{Audit: &AuditEvent{Key: "tx", WorkflowID: "w-tx", Outcome: "executed", Detail: det, At: base},
			Context: mk("tx", contextRowsPerStatement+1)}); err != nil { // the transaction
			t.Fatal(err)
		}
		check("tx", contextRowsPerStatement+1)
		// Confirmation arguments: RETURNING's row is the stored row, byte for byte.
		c := newConfirmation("c-h", 0x5a)
		c.Arguments = ps[len(ps)-1]
		c.Display = strings.Join(hostile, "\n")
		got, err := s.CreateConfirmation(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.GetConfirmation(ctx, "c-h")
		if err != nil || string(got.Arguments) != string(c.Arguments) || string(again.Arguments) != string(c.Arguments) || got.Display != c.Display || again.Display != c.Display {
			t.Fatalf("confirmation arguments/display differ: returned %d bytes, stored %d, want %d; %v", len(got.Arguments), len(again.Arguments), len(c.Arguments), err)
		}
	})
}

// Attack: NUL bytes and invalid UTF-8 in text fields (an audit detail, a deny reason, a
// workflow id) are either stored exactly or refused with an error, never silently altered,
// and a refusal of the WITH statement leaves no messages.
func TestAttackNULBytes(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		for i, bad := range []string{"before\x00after", "bad\xff\xfeutf8"} {
			wf := fmt.Sprint("w-nul-", i)
			conv := fmt.Sprint("nul-", i)
			err := s.Record(ctx, Recording{Audit: &AuditEvent{Key: wf, WorkflowID: wf, Outcome: "executed", Detail: bad, At: base},
				Context: []ContextEntry{{Conversation: conv, Key: "k", Payload: json.RawMessage(`1`)}}})
			rows, _ := s.ListAudit(ctx, wf)
			msgs, _ := s.LoadContext(ctx, conv, 0)
			switch {
			case err != nil && (len(rows) != 0 || len(msgs) != 0):
				t.Errorf("%q: refused (%v) but stored %d audit rows, %d messages", bad, err, len(rows), len(msgs))
			case err == nil && (len(rows) != 1 || rows[0].Detail != bad || len(msgs) != 1):
				t.Errorf("%q: accepted but stored %+v (%d messages)", bad, rows, len(msgs))
			default:
				t.Logf("%q: err=%v", bad, err)
			}
			id := fmt.Sprint("c-nul-", i)
			if _, err := s.CreateConfirmation(ctx, newConfirmation(id, byte(0xc0+i))); err != nil {
				t.Fatal(err)
			}
			err = s.DecideProved(ctx, id, DecisionDenied, "bob", bad, "bob's credential", base)
			row, _ := s.GetConfirmation(ctx, id)
			switch {
			case err != nil && row.Decision != "":
				t.Errorf("deny reason %q: refused (%v) but decided %+v", bad, err, row)
			case err == nil && row.Reason != bad:
				t.Errorf("deny reason %q: accepted but stored %q", bad, row.Reason)
			default:
				t.Logf("deny reason %q: err=%v", bad, err)
			}
		}
	})
}

// Attack: the timer's expiry (stage 6 Record with the decision), an approval with its proof
// and an edit race on one confirmation: one decision counts, its proof is its own approver's,
// and the loser of Record leaves no audit row.
func TestAttackDecisionRaces(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		for round := range 20 {
			id := fmt.Sprintf("c-dr-%d", round)
			if _, err := s.CreateConfirmation(ctx, newConfirmation(id, byte(round))); err != nil {
				t.Fatal(err)
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make([]error, 4)
			run := func(i int, f func() error) {
				wg.Add(1)
				go func() { defer wg.Done(); <-start; errs[i] = f() }()
			}
			run(0, func() error {
				return s.DecideProved(ctx, id, DecisionApproved, "alice", "", "alice-proof", base)
			})
			run(1, func() error {
				return s.Record(ctx, Recording{Audit: &AuditEvent{Key: id + "/expired", WorkflowID: id, Outcome: "expired", At: base},
					Decision: &RecordedDecision{ConfirmationID: id, Decision: DecisionExpired, At: base},
					Context:  []ContextEntry{{Conversation: id, Key: "exp", Payload: json.RawMessage(`"expired"`)}}})
			})
			run(2, func() error { return s.EditConfirmation(ctx, id, "carol", "sha256:e", base) })
			run(3, func() error {
				return s.DecideProved(ctx, id, DecisionApproved, "bob", "", "bob-proof", base)
			})
			close(start)
			wg.Wait()
			row, err := s.GetConfirmation(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			ok := 0
			for _, e := range errs {
				if e == nil {
					ok++
				} else if !errors.Is(e, ErrConflict) {
					t.Errorf("%s: unexpected error %v", id, e)
				}
			}
			audit, _ := s.ListAudit(ctx, id)
			msgs, _ := s.LoadContext(ctx, id, 0)
			switch row.Decision {
			case DecisionExpired:
				if len(audit) != 1 || len(msgs) != 1 || row.ApproverProof != "" {
					t.Errorf("%s expired: audit %d msgs %d proof %q", id, len(audit), len(msgs), row.ApproverProof)
				}
			default:
				if len(audit) != 0 || len(msgs) != 0 {
					t.Errorf("%s %s by %s: the losing expiry left audit %d msgs %d", id, row.Decision, row.Approver, len(audit), len(msgs))
				}
				if row.Decision == DecisionApproved && row.ApproverProof != row.Approver+"-proof" {
					t.Errorf("%s approved by %s with proof %q", id, row.Approver, row.ApproverProof)
				}
			}
			if row.Decision == DecisionApproved && ok != 2 || row.Decision != DecisionApproved && ok != 1 {
				// Two approvers with the same decision both get nil: record it for the report.
				t.Logf("%s: decision %s by %s, %d calls returned success: errs %v", id, row.Decision, row.Approver, ok, errs)
			}
			if row.Decision == DecisionApproved && errs[0] == nil && errs[3] == nil {
				t.Logf("%s: both alice and bob were told their approval was recorded; stored approver %s", id, row.Approver)
			}
		}
	})
}
