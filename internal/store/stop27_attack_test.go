package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// stop27Audit is a full audit event (every column set, odd text included) for key.
func stop27Audit(key, wf string) AuditEvent {
	return AuditEvent{Key: key, WorkflowID: wf, RunID: "run-é", Seq: 7, CallID: "call_7", CapabilityID: "files.write", Version: 3,
		Outcome: "executed", Stage: "execute", Reason: "ok", Detail: "détail \u202e bidi", ArgsDigest: "sha256:ab",
		OriginalDigest: "sha256:cd", Approver: "alice", Provenance: json.RawMessage(`{"b": 1, "a": [true, null]}`), At: base}
}

// sameAudit compares what the store returned with what was recorded.
func sameAudit(got, want AuditEvent) bool {
	got.ID = 0
	want.At = want.At.UTC().Truncate(time.Microsecond)
	return got.Key == want.Key && got.WorkflowID == want.WorkflowID && got.RunID == want.RunID && got.Seq == want.Seq &&
		got.CallID == want.CallID && got.CapabilityID == want.CapabilityID && got.Version == want.Version &&
		got.Outcome == want.Outcome && got.Stage == want.Stage && got.Reason == want.Reason && got.Detail == want.Detail &&
		got.ArgsDigest == want.ArgsDigest && got.OriginalDigest == want.OriginalDigest && got.Approver == want.Approver &&
		string(got.Provenance) == string(want.Provenance) && got.At.Equal(want.At)
}

// Record of the outcome of a confirmation decided already (on PostgreSQL the one-statement
// recordDecidedPG) writes exactly what the transaction writes on SQLite, byte for byte; its
// retries write nothing more (the first payload kept, or replaced with ReplaceContext); a
// conflicting decision, an unknown confirmation or an undecided one behave as the
// transaction does, and a refusal writes nothing; the decision's own fields never change.
func TestStop27RecordDecidedMatrix(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		c := newConfirmation("c-m", 1)
		if _, err := s.CreateConfirmation(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideProved(ctx, "c-m", DecisionApproved, "alice", "looks fine", "alice's passkey", base); err != nil {
			t.Fatal(err)
		}
		payload := json.RawMessage(`{"role":"tool", "z":1,"a":"\u0000 \ud83d\ude00 é","n":1.50e2}`)
		a := stop27Audit("wf-m/1/executed", "wf-m")
		rec := Recording{Audit: &a, Decision: &RecordedDecision{ConfirmationID: "c-m", Decision: DecisionApproved, Approver: "mallory", Reason: "other", At: base.Add(time.Hour)},
			Context: []ContextEntry{{Conversation: "cv-m", Key: "k1", WorkflowID: "wf-m", Payload: payload, CreatedAt: base}}}
		if err := s.Record(ctx, rec); err != nil {
			t.Fatalf("record decided: %v", err)
		}
		rows, err := s.ListAudit(ctx, "wf-m")
		if err != nil || len(rows) != 1 || !sameAudit(rows[0], a) {
			t.Fatalf("audit = %+v, %v; want %+v", rows, err, a)
		}
		msgs, err := s.LoadContext(ctx, "cv-m", 0)
		if err != nil || len(msgs) != 1 || string(msgs[0].Payload) != string(payload) || msgs[0].WorkflowID != "wf-m" || !msgs[0].CreatedAt.Equal(base.Truncate(time.Microsecond)) {
			t.Fatalf("context = %+v, %v; want the payload byte for byte", msgs, err)
		}
		got, err := s.GetConfirmation(ctx, "c-m")
		if err != nil || got.Decision != DecisionApproved || got.Approver != "alice" || got.Reason != "looks fine" || got.ApproverProof != "alice's passkey" {
			t.Fatalf("the recorded outcome changed the decision: %+v, %v", got, err)
		}

		// Retries: another payload and audit detail under the same keys keep the first; with
		// ReplaceContext the message takes the new payload, the audit row stays.
		retry := rec
		a2 := a
		a2.Detail = "changed"
		retry.Audit = &a2
		retry.Context = []ContextEntry{{Conversation: "cv-m", Key: "k1", WorkflowID: "wf-m", Payload: json.RawMessage(`{"v":2}`), CreatedAt: base}}
		if err := s.Record(ctx, retry); err != nil {
			t.Fatal(err)
		}
		if rows, _ := s.ListAudit(ctx, "wf-m"); len(rows) != 1 || rows[0].Detail != a.Detail {
			t.Fatalf("retry changed the audit: %+v", rows)
		}
		if msgs, _ := s.LoadContext(ctx, "cv-m", 0); len(msgs) != 1 || string(msgs[0].Payload) != string(payload) {
			t.Fatalf("retry without replace changed the message: %+v", msgs)
		}
		retry.ReplaceContext = true
		retry.Context[0].WorkflowID = "wf-m2"
		if err := s.Record(ctx, retry); err != nil {
			t.Fatal(err)
		}
		if msgs, _ := s.LoadContext(ctx, "cv-m", 0); len(msgs) != 1 || string(msgs[0].Payload) != `{"v":2}` || msgs[0].WorkflowID != "wf-m2" {
			t.Fatalf("replace: %+v", msgs)
		}

		// A decision, audit only, message only: each a no-op or a write of its part.
		if err := s.Record(ctx, Recording{Decision: &RecordedDecision{ConfirmationID: "c-m", Decision: DecisionApproved}}); err != nil {
			t.Fatalf("decision alone: %v", err)
		}
		aOnly := stop27Audit("wf-m/2/executed", "wf-m")
		if err := s.Record(ctx, Recording{Audit: &aOnly, Decision: &RecordedDecision{ConfirmationID: "c-m", Decision: DecisionApproved}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, Recording{Decision: &RecordedDecision{ConfirmationID: "c-m", Decision: DecisionApproved},
			Context: []ContextEntry{{Conversation: "cv-m", Key: "k2", Payload: json.RawMessage(`[]`)}}}); err != nil {
			t.Fatal(err)
		}
		if rows, _ := s.ListAudit(ctx, "wf-m"); len(rows) != 2 {
			t.Fatalf("audit rows = %d, want 2", len(rows))
		}
		if msgs, _ := s.LoadContext(ctx, "cv-m", 0); len(msgs) != 2 || msgs[1].Key != "k2" || msgs[1].WorkflowID != "" {
			t.Fatalf("messages: %+v", msgs)
		}

		// Refusals write nothing.
		for _, tc := range []struct {
			name, id, decision string
			want               error
		}{
			{"denied on approved", "c-m", DecisionDenied, ErrConflict},
			{"expired on approved", "c-m", DecisionExpired, ErrConflict},
			{"unknown confirmation", "c-none", DecisionApproved, ErrNotFound},
			{"empty id", "", DecisionApproved, ErrNotFound},
		} {
			bad := stop27Audit("wf-bad/"+tc.name, "wf-bad")
			err := s.Record(ctx, Recording{Audit: &bad, Decision: &RecordedDecision{ConfirmationID: tc.id, Decision: tc.decision},
				Context: []ContextEntry{{Conversation: "cv-bad", Key: tc.name, Payload: json.RawMessage(`1`)}}})
			if !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}
		if rows, _ := s.ListAudit(ctx, "wf-bad"); len(rows) != 0 {
			t.Fatalf("refused records wrote audit rows: %+v", rows)
		}
		if msgs, _ := s.LoadContext(ctx, "cv-bad", 0); len(msgs) != 0 {
			t.Fatalf("refused records wrote messages: %+v", msgs)
		}

		// Undecided: the record decides it (its approver and reason), as before.
		if _, err := s.CreateConfirmation(ctx, newConfirmation("c-u", 2)); err != nil {
			t.Fatal(err)
		}
		u := stop27Audit("wf-u/1/denied", "wf-u")
		if err := s.Record(ctx, Recording{Audit: &u, Decision: &RecordedDecision{ConfirmationID: "c-u", Decision: DecisionDenied, Approver: "bob", Reason: "no", At: base},
			Context: []ContextEntry{{Conversation: "cv-u", Key: "k", Payload: json.RawMessage(`"denied"`)}}}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetConfirmation(ctx, "c-u"); err != nil || got.Decision != DecisionDenied || got.Approver != "bob" || got.Reason != "no" {
			t.Fatalf("undecided: %+v, %v", got, err)
		}
		if rows, _ := s.ListAudit(ctx, "wf-u"); len(rows) != 1 || !sameAudit(rows[0], u) {
			t.Fatalf("undecided audit: %+v", rows)
		}
	})
}

// Racing records of one outcome on a decided confirmation write one audit row and one
// message; racing records of opposite decisions on an undecided confirmation: exactly the
// callers of the stored decision succeed and each wrote its own rows, every other caller gets
// ErrConflict and wrote nothing.
func TestStop27RecordDecidedConcurrent(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if _, err := s.CreateConfirmation(ctx, newConfirmation("c-same", 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideProved(ctx, "c-same", DecisionApproved, "alice", "", "", base); err != nil {
			t.Fatal(err)
		}
		a := stop27Audit("wf-same/1", "wf-same")
		rec := Recording{Audit: &a, Decision: &RecordedDecision{ConfirmationID: "c-same", Decision: DecisionApproved},
			Context: []ContextEntry{{Conversation: "cv-same", Key: "k", Payload: json.RawMessage(`{"n":1}`)}}}
		var wg sync.WaitGroup
		errs := make([]error, 12)
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = s.Record(ctx, rec) }()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
		}
		if rows, _ := s.ListAudit(ctx, "wf-same"); len(rows) != 1 {
			t.Fatalf("audit rows = %d, want 1", len(rows))
		}
		if msgs, _ := s.LoadContext(ctx, "cv-same", 0); len(msgs) != 1 {
			t.Fatalf("messages = %d, want 1", len(msgs))
		}

		for round := range 8 {
			id := fmt.Sprintf("c-race-%d", round)
			if _, err := s.CreateConfirmation(ctx, newConfirmation(id, byte(0x40+round))); err != nil {
				t.Fatal(err)
			}
			decisions := []string{DecisionApproved, DecisionDenied, DecisionApproved, DecisionDenied, DecisionExpired, DecisionApproved}
			errs := make([]error, len(decisions))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, d := range decisions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					a := stop27Audit(fmt.Sprintf("%s/%d", id, i), id)
					errs[i] = s.Record(ctx, Recording{Audit: &a, Decision: &RecordedDecision{ConfirmationID: id, Decision: d},
						Context: []ContextEntry{{Conversation: id, Key: fmt.Sprint(i), Payload: json.RawMessage(`1`)}}})
				}()
			}
			close(start)
			wg.Wait()
			got, err := s.GetConfirmation(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			rows, _ := s.ListAudit(ctx, id)
			msgs, _ := s.LoadContext(ctx, id, 0)
			var wantKeys, gotKeys, wantMsgs, gotMsgs []string
			for i, d := range decisions {
				switch {
				case d == got.Decision && errs[i] == nil:
					wantKeys = append(wantKeys, fmt.Sprintf("%s/%d", id, i))
					wantMsgs = append(wantMsgs, fmt.Sprint(i))
				case d != got.Decision && errors.Is(errs[i], ErrConflict):
				default:
					t.Errorf("%s: record %d (%s) against stored %s: %v", id, i, d, got.Decision, errs[i])
				}
			}
			for _, r := range rows {
				gotKeys = append(gotKeys, r.Key)
			}
			for _, m := range msgs {
				gotMsgs = append(gotMsgs, m.Key)
			}
			slices.Sort(gotKeys)
			slices.Sort(gotMsgs)
			if !slices.Equal(gotKeys, wantKeys) || !slices.Equal(gotMsgs, wantMsgs) {
				t.Errorf("%s (%s): audit %v want %v; messages %v want %v", id, got.Decision, gotKeys, wantKeys, gotMsgs, wantMsgs)
			}
		}
	})
}

// Hostile text in a record of a decided confirmation (NUL bytes, invalid UTF-8 in the audit
// detail, the approver, a message's workflow id or payload) is stored exactly or refused, and
// a refusal leaves neither the audit row nor the message.
func TestStop27RecordDecidedHostileText(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if _, err := s.CreateConfirmation(ctx, newConfirmation("c-h", 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideProved(ctx, "c-h", DecisionApproved, "alice", "", "", base); err != nil {
			t.Fatal(err)
		}
		for i, bad := range []string{"nul\x00byte", "bad\xff\xfeutf8"} {
			for part := range 4 {
				wf := fmt.Sprintf("wf-h-%d-%d", i, part)
				a := stop27Audit(wf, wf)
				e := ContextEntry{Conversation: wf, Key: "k", WorkflowID: wf, Payload: json.RawMessage(`{"ok":1}`)}
				switch part {
				case 0:
					a.Detail = bad
				case 1:
					a.Approver = bad
				case 2:
					e.WorkflowID = bad
				case 3:
					b, _ := json.Marshal(bad) // NUL escaped; invalid UTF-8 replaced by Marshal
					e.Payload = json.RawMessage(`{"s":` + string(b) + `,"raw":"` + bad[:3] + "\xff" + `"}`)
				}
				err := s.Record(ctx, Recording{Audit: &a, Decision: &RecordedDecision{ConfirmationID: "c-h", Decision: DecisionApproved}, Context: []ContextEntry{e}})
				rows, _ := s.ListAudit(ctx, wf)
				msgs, _ := s.LoadContext(ctx, wf, 0)
				if err != nil {
					if len(rows) != 0 || len(msgs) != 0 {
						t.Errorf("%q part %d: refused (%v) but wrote %d audit rows, %d messages", bad, part, err, len(rows), len(msgs))
					}
					continue
				}
				if len(rows) != 1 || !sameAudit(rows[0], a) || len(msgs) != 1 || msgs[0].WorkflowID != e.WorkflowID || string(msgs[0].Payload) != string(e.Payload) {
					t.Errorf("%q part %d: accepted but stored %+v / %+v", bad, part, rows, msgs)
				}
			}
		}
	})
}

// RecordRequester (on PostgreSQL one statement): racing first rounds of one run with one
// attestation all get the one row; racing attestations for one run: one wins, the others
// get ErrAttestationUsed and the stored row is the winner's; a refused run stores nothing;
// hostile text is stored exactly or refused with nothing stored.
func TestStop27RequesterRaces(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		r := TurnRequester{WorkflowID: "turn/r/1", RunID: "run-1", Principal: "user:carol", Client: "chat", Signature: "sig-1", At: base}
		var wg sync.WaitGroup
		got := make([]TurnRequester, 10)
		errs := make([]error, 10)
		for i := range got {
			wg.Add(1)
			go func() { defer wg.Done(); got[i], errs[i] = s.RecordRequester(ctx, r) }()
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil || got[i].Signature != "sig-1" || got[i].FirstRunID != "run-1" || got[i].Principal != "user:carol" || !got[i].At.Equal(base.Truncate(time.Microsecond)) {
				t.Errorf("racing retry %d = %+v, %v", i, got[i], errs[i])
			}
		}

		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := TurnRequester{WorkflowID: "turn/r/2", RunID: "run-2", Principal: fmt.Sprint("user:", i), Client: "chat", Signature: fmt.Sprint("sig-2-", i), At: base}
				got[i], errs[i] = s.RecordRequester(ctx, x)
			}()
		}
		wg.Wait()
		stored, err := s.GetRequester(ctx, "turn/r/2", "run-2")
		if err != nil {
			t.Fatal(err)
		}
		won := 0
		for i := range got {
			switch {
			case errs[i] == nil && got[i].Signature == fmt.Sprint("sig-2-", i) && stored.Signature == got[i].Signature:
				won++
			case errors.Is(errs[i], ErrAttestationUsed):
			default:
				t.Errorf("attestation %d for one run: %+v, %v (stored %+v)", i, got[i], errs[i], stored)
			}
		}
		if won != 1 {
			t.Errorf("%d attestations won one run, want 1", won)
		}

		// Another chain (a second start of the workflow id) with sig-1: refused, nothing stored,
		// whatever its principal; a retry of chain run-1 may use it.
		again := r
		again.RunID, again.FirstRunID, again.Principal = "run-9", "run-9", "user:mallory"
		if _, err := s.RecordRequester(ctx, again); !errors.Is(err, ErrAttestationUsed) {
			t.Fatalf("other chain: %v", err)
		}
		if _, err := s.GetRequester(ctx, "turn/r/1", "run-9"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a refused run has a requester: %v", err)
		}
		again.FirstRunID = "run-1"
		if g, err := s.RecordRequester(ctx, again); err != nil || g.RunID != "run-9" || g.FirstRunID != "run-1" {
			t.Fatalf("chain retry: %+v, %v", g, err)
		}

		for i, bad := range []string{"nul\x00sig", "bad\xffsig"} {
			x := TurnRequester{WorkflowID: fmt.Sprint("turn/h/", i), RunID: "run", Principal: bad, Client: "chat", Signature: bad, At: base}
			g, err := s.RecordRequester(ctx, x)
			stored, gerr := s.GetRequester(ctx, x.WorkflowID, "run")
			if err != nil {
				if !errors.Is(gerr, ErrNotFound) {
					t.Errorf("%q refused (%v) but stored %+v", bad, err, stored)
				}
				continue
			}
			if g.Signature != bad || stored.Signature != bad || stored.Principal != bad {
				t.Errorf("%q accepted but stored %+v (returned %+v)", bad, stored, g)
			}
		}
	})
}

// PendingIDs lists exactly the ids ListPendingConfirmations lists, in its order: a consumed
// token, an edit, an approved-by-edit row, an expiry at the very instant and ties on created_at.
func TestStop27PendingIDsMatchesList(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		for i, id := range []string{"p-b", "p-a", "p-consumed", "p-edited", "p-now", "p-denied"} {
			c := newConfirmation(id, byte(i+1))
			if id == "p-now" {
				c.ExpiresAt = base.Add(time.Minute)
			}
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		ap := newConfirmation("p-approved", 0x70)
		ap.Approver = "alice"
		if _, err := s.CreateApprovedConfirmation(ctx, ap); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PresentToken(ctx, "p-consumed", "alice", base); err != nil {
			t.Fatal(err)
		}
		if err := s.EditConfirmation(ctx, "p-edited", "bob", "sha256:e", base); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideConfirmation(ctx, "p-denied", DecisionDenied, "bob", "", base); err != nil {
			t.Fatal(err)
		}
		now := base.Add(time.Minute) // p-now expires at this very instant: not pending
		ids, err := s.PendingIDs(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.ListPendingConfirmations(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, r := range rows {
			want = append(want, r.ID)
		}
		if !slices.Equal(ids, want) || !slices.Equal(ids, []string{"p-a", "p-b", "p-consumed"}) {
			t.Fatalf("PendingIDs = %v, list = %v; want p-a,p-b,p-consumed", ids, want)
		}
	})
}
