package store

// Tests of the store's one-round-trip writes (insertContext and oneStatement, Record's
// data-modifying WITH, execChanging and notifyChanged, DecideProved, RETURNING in
// RecordRequester and BindConversation) under retries, races and edge sizes; written by a
// reviewer trying to break them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Concurrent retries of one Recording, of each shape Record takes (context alone: one
// statement; audit + context: PostgreSQL's data-modifying WITH; audit + decision + context:
// the transaction), all succeed and write exactly once.
func TestConcurrentRecordRetries(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if _, err := s.CreateConfirmation(ctx, newConfirmation("c-rec", 0x31)); err != nil {
			t.Fatal(err)
		}
		entries := func(conv string, n int) []ContextEntry {
			var es []ContextEntry
			for i := range n {
				es = append(es, ContextEntry{Conversation: conv, Key: fmt.Sprintf("k%d", i), Payload: json.RawMessage(fmt.Sprint(i))})
			}
			return es
		}
		shapes := map[string]Recording{
			"context":         {Context: entries("ctx", 3)},
			"context-replace": {Context: entries("ctxr", 3), ReplaceContext: true},
			"audit+context": {Audit: &AuditEvent{Key: "wf/a/1", WorkflowID: "wf-a", Outcome: "executed", At: base},
				Context: entries("ac", 3)},
			"audit+context-replace": {Audit: &AuditEvent{Key: "wf/ar/1", WorkflowID: "wf-ar", Outcome: "executed", At: base},
				Context: entries("acr", 3), ReplaceContext: true},
			"audit+decision+context": {Audit: &AuditEvent{Key: "wf/d/1", WorkflowID: "wf-d", Outcome: "executed", At: base},
				Decision: &RecordedDecision{ConfirmationID: "c-rec", Decision: DecisionApproved, Approver: "alice", At: base},
				Context:  entries("adc", 3)},
		}
		for name, r := range shapes {
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 8 {
				wg.Add(1)
				go func() { defer wg.Done(); errs <- s.Record(ctx, r) }()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("%s: concurrent retry: %v", name, err)
				}
			}
			if r.Audit != nil {
				if rows, err := s.ListAudit(ctx, r.Audit.WorkflowID); err != nil || len(rows) != 1 {
					t.Errorf("%s: audit rows = %d, %v; want 1", name, len(rows), err)
				}
			}
			got, err := s.LoadContext(ctx, r.Context[0].Conversation, 0)
			if err != nil || len(got) != 3 {
				t.Errorf("%s: context = %d, %v; want 3", name, len(got), err)
			}
			for i, e := range got {
				if e.Key != fmt.Sprintf("k%d", i) {
					t.Errorf("%s: entry %d is %s (order)", name, i, e.Key)
				}
			}
		}
	})
}

// Racing decisions with their proofs: one wins, the others with the same decision are no-ops,
// the others ErrConflict; the stored proof is the winner's.
func TestConcurrentDecideProved(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		for round := range 10 {
			id := fmt.Sprintf("c-race-%d", round)
			if _, err := s.CreateConfirmation(ctx, newConfirmation(id, byte(0x40+round))); err != nil {
				t.Fatal(err)
			}
			type res struct {
				decision string
				err      error
			}
			out := make(chan res, 8)
			for i := range 8 {
				go func() {
					d := DecisionApproved
					if i%2 == 1 {
						d = DecisionDenied
					}
					who := fmt.Sprintf("p%d", i)
					out <- res{d, s.DecideProved(ctx, id, d, who, "", "proof of "+who, base)}
				}()
			}
			var rs []res
			for range 8 {
				rs = append(rs, <-out)
			}
			row, err := s.GetConfirmation(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if row.ApproverProof != "proof of "+row.Approver {
				t.Errorf("%s: approver %q with proof %q", id, row.Approver, row.ApproverProof)
			}
			for _, r := range rs {
				switch {
				case r.decision == row.Decision && r.err != nil:
					t.Errorf("%s: same decision %s: %v", id, r.decision, r.err)
				case r.decision != row.Decision && !errors.Is(r.err, ErrConflict):
					t.Errorf("%s: other decision %s: err %v, want ErrConflict", id, r.decision, r.err)
				}
			}
		}
	})
}

// A "retry" of DecideProved by another approver than the one whose decision is stored (the
// decision recorded without a proof, e.g. by Record) must not attach that approver's proof to
// the stored decision (the row would say alice decided, proven by bob's credential); neither
// may SetApproverProof.
func TestRetryProofOfAnotherApprover(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if _, err := s.CreateConfirmation(ctx, newConfirmation("c-other", 0x51)); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, Recording{Decision: &RecordedDecision{ConfirmationID: "c-other", Decision: DecisionApproved, Approver: "alice", At: base}}); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideProved(ctx, "c-other", DecisionApproved, "bob", "", "bob's CLI credential", base); err != nil {
			t.Fatal(err)
		}
		if err := s.SetApproverProof(ctx, "c-other", "bob", "bob's passkey"); err != nil {
			t.Fatal(err)
		}
		row, _ := s.GetConfirmation(ctx, "c-other")
		if row.Approver != "alice" || row.ApproverProof != "" {
			t.Fatalf("decision of %q carries the proof %q of another approver", row.Approver, row.ApproverProof)
		}
		if err := s.DecideProved(ctx, "c-other", DecisionApproved, "alice", "", "alice's CLI credential", base); err != nil {
			t.Fatal(err)
		}
		if row, _ := s.GetConfirmation(ctx, "c-other"); row.ApproverProof != "alice's CLI credential" {
			t.Fatalf("proof = %q, want alice's own", row.ApproverProof)
		}
	})
}

// Racing creations of one confirmation id all succeed and all return the same stored row;
// the returned row (RETURNING) equals a later read.
func TestConcurrentCreateConfirmation(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		out := make(chan Confirmation, 8)
		errs := make(chan error, 8)
		for i := range 8 {
			go func() {
				c := newConfirmation("c-cc", byte(0x60+i))
				c.Display = fmt.Sprint("attempt ", i)
				got, err := s.CreateConfirmation(ctx, c)
				out <- got
				errs <- err
			}()
		}
		stored := map[string]bool{}
		for range 8 {
			got := <-out
			if err := <-errs; err != nil {
				// Another attempt's token hash is unique: a racing attempt with another
				// hash still conflicts on the id first.
				t.Errorf("create: %v", err)
				continue
			}
			stored[got.Display] = true
		}
		if len(stored) != 1 {
			t.Errorf("racing creates returned %d different rows: %v", len(stored), stored)
		}
		row, err := s.GetConfirmation(ctx, "c-cc")
		if err != nil || !stored[row.Display] {
			t.Errorf("stored row %q, %v not among the returned %v", row.Display, err, stored)
		}
		first := newConfirmation("c-eq", 0x71)
		a, err := s.CreateConfirmation(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.CreateConfirmation(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
			t.Errorf("first create returned\n%+v\nthe retry\n%+v", a, b)
		}
	})
}

// Record at the edge of one statement: 100 entries with an audit row (PostgreSQL: the
// data-modifying WITH, 516 parameters) and 101 (the transaction), replacing stored keys, keep
// order, write the audit row once, and replace payloads in place.
func TestRecordStatementEdge(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		for _, n := range []int{contextRowsPerStatement, contextRowsPerStatement + 1} {
			conv := fmt.Sprint("edge-", n)
			mk := func(v string) Recording {
				r := Recording{Audit: &AuditEvent{Key: conv + "/audit", WorkflowID: conv, Outcome: "executed", Detail: "d?x", At: base}, ReplaceContext: true}
				for i := range n {
					r.Context = append(r.Context, ContextEntry{Conversation: conv, Key: fmt.Sprintf("k%03d", i), WorkflowID: "w?" + v, Payload: json.RawMessage(fmt.Sprintf(`"%s%d?"`, v, i))})
				}
				return r
			}
			for _, v := range []string{"a", "b"} {
				if err := s.Record(ctx, mk(v)); err != nil {
					t.Fatalf("%d entries: %v", n, err)
				}
			}
			got, err := s.LoadContext(ctx, conv, 0)
			if err != nil || len(got) != n {
				t.Fatalf("%d entries stored, %v; want %d", len(got), err, n)
			}
			for i, e := range got {
				if e.Key != fmt.Sprintf("k%03d", i) || string(e.Payload) != fmt.Sprintf(`"b%d?"`, i) || e.WorkflowID != "w?b" {
					t.Fatalf("entry %d = %s %s %s", i, e.Key, e.Payload, e.WorkflowID)
				}
			}
			rows, err := s.ListAudit(ctx, conv)
			if err != nil || len(rows) != 1 || rows[0].Detail != "d?x" {
				t.Fatalf("audit = %+v, %v", rows, err)
			}
		}
	})
}

// Heavier race of first turns of one conversation: every bind returns the one owner stored.
func TestBindConversationRace(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		for round := range 30 {
			conv := fmt.Sprint("r-", round)
			owners := make(chan string, 12)
			errs := make(chan error, 12)
			start := make(chan struct{})
			for i := range 12 {
				go func() {
					<-start
					o, err := s.BindConversation(ctx, conv, fmt.Sprint("p", i), "turn/"+conv+"/1", base)
					owners <- o
					errs <- err
				}()
			}
			close(start)
			seen := map[string]bool{}
			for range 12 {
				if err := <-errs; err != nil {
					t.Fatalf("bind: %v", err)
				}
				seen[<-owners] = true
			}
			var stored string
			if err := s.db.GetContext(ctx, &stored, s.q(`SELECT principal FROM conversation_principals WHERE conversation = ?`), conv); err != nil {
				t.Fatal(err)
			}
			if len(seen) != 1 || !seen[stored] {
				t.Fatalf("%s: binds returned %v, stored %q", conv, seen, stored)
			}
		}
	})
}

// RecordRequester: the inserted row (RETURNING) is what a retry and GetRequester read, and the
// ErrAttestationUsed cases stand.
func TestRecordRequesterReturning(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		r := TurnRequester{WorkflowID: "turn/x/1", RunID: "run-1", Principal: "carol", Client: "cli", Signature: "sig-x", At: base}
		a, err := s.RecordRequester(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.RecordRequester(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.GetRequester(ctx, "turn/x/1", "run-1")
		if err != nil {
			t.Fatal(err)
		}
		if !a.At.Equal(b.At) || fmt.Sprint(a) != fmt.Sprint(b) || fmt.Sprint(a) != fmt.Sprint(g) || a.FirstRunID != "run-1" {
			t.Fatalf("insert %+v\nretry  %+v\nget    %+v", a, b, g)
		}
		other := r
		other.Signature = "sig-y"
		if _, err := s.RecordRequester(ctx, other); !errors.Is(err, ErrAttestationUsed) {
			t.Fatalf("another signature for the run: %v", err)
		}
		chain := r
		chain.RunID, chain.FirstRunID = "run-9", "run-9"
		if _, err := s.RecordRequester(ctx, chain); !errors.Is(err, ErrAttestationUsed) {
			t.Fatalf("the signature for another chain: %v", err)
		}
		if !strings.Contains(fmt.Sprint(a.At.Sub(base.UTC().Truncate(time.Microsecond))), "0s") {
			t.Fatalf("At = %v, want %v", a.At, base)
		}
	})
}

// Record's audit row and messages are all or nothing when the database refuses the AUDIT row
// (PostgreSQL: the data-modifying WITH's sub-statement, run after the main INSERT).
func TestRecordAuditRefusedWritesNoContext(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		refuseInsert(t, s, "audit_events", "event_key", "bad")
		err := s.Record(ctx, Recording{
			Audit:   &AuditEvent{Key: "bad", WorkflowID: "wf", Outcome: "executed", At: base},
			Context: []ContextEntry{{Conversation: "cv", Key: "k", Payload: json.RawMessage(`1`)}, {Conversation: "cv", Key: "k2", Payload: json.RawMessage(`2`)}},
		})
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("err = %v, want the trigger's", err)
		}
		if got, _ := s.LoadContext(ctx, "cv", 0); len(got) != 0 {
			t.Fatalf("a refused audit row left %d context entries", len(got))
		}
	})
}

// ErrNotFound and no-op cases of the rewritten changing statements, on both drivers.
func TestChangingStatementsNotFound(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if err := s.DecideProved(ctx, "none", DecisionApproved, "a", "", "p", base); !errors.Is(err, ErrNotFound) {
			t.Errorf("DecideProved unknown: %v", err)
		}
		if err := s.EditConfirmation(ctx, "none", "a", "sha256:x", base); !errors.Is(err, ErrNotFound) {
			t.Errorf("EditConfirmation unknown: %v", err)
		}
		if ok, err := s.ReissueToken(ctx, "none", "p", 1, []byte{1}, nil); ok || err != nil {
			t.Errorf("ReissueToken unknown: %v, %v", ok, err)
		}
		if err := s.Record(ctx, Recording{Decision: &RecordedDecision{ConfirmationID: "none", Decision: DecisionExpired}}); !errors.Is(err, ErrNotFound) {
			t.Errorf("Record decision unknown: %v", err)
		}
		if _, err := s.CreateConfirmation(ctx, newConfirmation("e1", 0x91)); err != nil {
			t.Fatal(err)
		}
		if err := s.EditConfirmation(ctx, "e1", "a", "sha256:x", base); err != nil {
			t.Fatal(err)
		}
		if err := s.EditConfirmation(ctx, "e1", "a", "sha256:y", base); !errors.Is(err, ErrConflict) {
			t.Errorf("another edit: %v", err)
		}
		if err := s.DecideProved(ctx, "e1", DecisionApproved, "a", "", "p", base); !errors.Is(err, ErrConflict) {
			t.Errorf("approve an edited row: %v", err)
		}
		// A create whose token hash another confirmation holds is an error, not a retry.
		if _, err := s.CreateConfirmation(ctx, newConfirmation("e2", 0x91)); err == nil {
			t.Error("duplicate token hash accepted")
		}
	})
}
