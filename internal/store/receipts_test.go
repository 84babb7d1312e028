package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/receipts"
)

// receiptKeys makes a log key for a test: the store signs with it, the keyring verifies.
func receiptKeys(t testing.TB) (*receipts.Signer, *receipts.Keyring) {
	t.Helper()
	skey, vkey, err := receipts.GenerateKey("airlock.test/receipts")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := receipts.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := receipts.ParseKeyring([]byte(vkey))
	if err != nil {
		t.Fatal(err)
	}
	return sg, kr
}

// buildLog writes a realistic turn into s: a proven requester, a call put to a person and
// approved with a passkey, an automatic call, a refused call, a refused decision (an event
// row) and an agent proposal's decision. It returns the audit rows' keys in order.
func buildLog(t *testing.T, s *Store) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := s.RecordRequester(ctx, TurnRequester{WorkflowID: "turn/c/1", RunID: "run-1", FirstRunID: "run-1",
		Principal: "alice", Client: "laptop", Signature: "attestation-sig", At: base}); err != nil {
		t.Fatal(err)
	}
	c := newConfirmation("conf-1", 0xA1)
	if _, err := s.CreateConfirmation(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.DecideProved(ctx, "conf-1", DecisionApproved, "bob", "", "passkey on approver page web", base.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	rows := []Recording{
		{Audit: &AuditEvent{Key: "turn/c/1/run-1/1/executed", WorkflowID: "turn/c/1", RunID: "run-1", Seq: 1, CallID: "call_1",
			CapabilityID: "system.health", Version: 1, Outcome: "executed", Stage: "execute", ArgsDigest: "aa", At: base,
			Facts: &ReceiptFacts{Rule: "local_read_only", RegistryRevision: "reg:1", Fingerprint: "cap:1", ResultDigest: receipts.Digest([]byte("ok"))}},
			Context: []ContextEntry{{Conversation: "c", Key: "turn/c/1/p1/0", Payload: []byte(`{"role":"tool"}`), CreatedAt: base}}},
		{Audit: &AuditEvent{Key: "turn/c/1/run-1/2/executed", WorkflowID: "turn/c/1", RunID: "run-1", Seq: 2, CallID: "call_2",
			CapabilityID: "files.write", Version: 1, Outcome: "executed", Stage: "execute", ArgsDigest: "sha256:0123", Approver: "bob", At: base.Add(2 * time.Minute),
			Facts: &ReceiptFacts{RegistryRevision: "reg:1", Quorum: 1, ResultDigest: receipts.Digest([]byte("written"))}},
			Decision: &RecordedDecision{ConfirmationID: "conf-1", Decision: DecisionApproved, Approver: "bob", At: base.Add(time.Minute)}},
		{Audit: &AuditEvent{Key: "turn/c/1/run-1/3/rejected", WorkflowID: "turn/c/1", RunID: "run-1", Seq: 3, CallID: "call_3",
			CapabilityID: "nope", Version: 1, Outcome: "rejected", Stage: "resolve", Reason: "unknown_capability", At: base.Add(3 * time.Minute)}},
	}
	for _, r := range rows {
		if err := s.Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AppendAudit(ctx, AuditEvent{Key: "turn/c/1/run-1/2/confirmation_refused/1", WorkflowID: "turn/c/1", RunID: "run-1", Seq: 2,
		Outcome: "confirmation_refused", Stage: "confirm", Reason: "decision_mac_invalid", Detail: "<b>forged</b>", At: base.Add(90 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SequenceReceipts(ctx); err != nil {
		t.Fatal(err)
	}
}

// exportOf exports s's log.
func exportOf(t *testing.T, s *Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.ExportReceipts(testCtx(t), receipts.NewWriter(&buf)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReceiptsAppendWithTheAuditRowOnce(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		sg, kr := receiptKeys(t)
		s.UseReceiptKey(sg)
		buildLog(t, s)
		// 3 calls × 2 records + 1 event.
		h, err := s.ReceiptHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Size != 7 {
			t.Fatalf("head size %d, want 7 (two records per call, one per other row)", h.Size)
		}
		// A retry of every write (activity retry, replay) appends nothing.
		buildLog(t, s)
		if h2, _ := s.ReceiptHead(ctx); h2.Size != 7 {
			t.Fatalf("after retries the head has %d records, want 7: a retry appended again", h2.Size)
		}
		var got []receipts.Record
		var events []string
		if err := s.EachReceipt(ctx, 0, func(r receipts.Receipt) error {
			rec, err := receipts.ParseRecord(r.Leaf)
			got = append(got, rec)
			events = append(events, rec.Type+" "+rec.Event)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"authorization turn/c/1/run-1/1/executed", "settlement turn/c/1/run-1/1/executed",
			"authorization turn/c/1/run-1/2/executed", "settlement turn/c/1/run-1/2/executed",
			"authorization turn/c/1/run-1/3/rejected", "settlement turn/c/1/run-1/3/rejected",
			"event turn/c/1/run-1/2/confirmation_refused/1",
		}
		if strings.Join(events, "\n") != strings.Join(want, "\n") {
			t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
		}
		auto, human, refused := got[0].Authorization, got[2].Authorization, got[4].Authorization
		if auto.Mode != receipts.ModeAutomatic || auto.Rule != "local_read_only" || auto.Fingerprint != "cap:1" || auto.Requester == nil || auto.Requester.Principal != "alice" {
			t.Errorf("automatic authorization: %+v", auto)
		}
		if human.Mode != receipts.ModeHuman || human.Decision != DecisionApproved || len(human.Approvers) != 1 ||
			human.Approvers[0].Name != "bob" || human.Approvers[0].ProofKind != receipts.ProofPasskey || human.AskedAt == nil || human.DecidedAt == nil {
			t.Errorf("human authorization: %+v", human)
		}
		if refused.Mode != receipts.ModeRefused || refused.Rule != "resolve:unknown_capability" {
			t.Errorf("refused authorization: %+v", refused)
		}
		if s1 := got[1].Settlement; s1.Outcome != receipts.SettlementExecuted || s1.ResultDigest != receipts.Digest([]byte("ok")) {
			t.Errorf("settlement: %+v", s1)
		}
		if s5 := got[5].Settlement; s5.Outcome != receipts.SettlementRefused || s5.AuditOutcome != "rejected" {
			t.Errorf("refused settlement: %+v", s5)
		}
		rep, err := receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{EachRecord: true})
		if err != nil {
			t.Fatalf("an untouched log does not verify: %v", err)
		}
		if rep.Records != 7 || rep.Signed != 7 {
			t.Fatalf("report %+v, want 7 records all signed", rep)
		}
	})
}

// TestReceiptsTamperDetected alters the log with SQL, as someone with write access to the
// database could, and checks that verify names the record each time.
func TestReceiptsTamperDetected(t *testing.T) {
	t.Parallel()
	type tamper struct {
		name string
		do   func(t *testing.T, s *Store)
		// wantIndex is the record the first problem must name, wantEvent its event ("" for a
		// record the export no longer holds), wantWords words of its description.
		wantIndex int64
		wantEvent string
		wantWords string
	}
	exec := func(t *testing.T, s *Store, q string, args ...any) {
		t.Helper()
		if _, err := s.db.ExecContext(testCtx(t), s.q(q), args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// move renumbers records from idx on by delta in two steps (a unique key stays unique).
	move := func(t *testing.T, s *Store, from int64, delta int64) {
		exec(t, s, `UPDATE receipts SET idx = -idx - 1 WHERE idx >= ?`, from)
		exec(t, s, `UPDATE receipts SET idx = -idx - 1 + ? WHERE idx < 0`, delta)
	}
	cases := []tamper{
		{name: "edited", do: func(t *testing.T, s *Store) {
			var rec []byte
			if err := s.db.GetContext(testCtx(t), &rec, `SELECT record FROM receipts WHERE idx = 3`); err != nil {
				t.Fatal(err)
			}
			forged := bytes.Replace(rec, []byte(`"executed"`), []byte(`"failed"`), 1)
			if bytes.Equal(forged, rec) {
				t.Fatal("record 3 holds no outcome to edit")
			}
			exec(t, s, `UPDATE receipts SET record = ? WHERE idx = 3`, forged)
		}, wantIndex: 3, wantEvent: "turn/c/1/run-1/2/executed", wantWords: "altered"},
		{name: "removed", do: func(t *testing.T, s *Store) {
			exec(t, s, `DELETE FROM receipts WHERE idx = 4`)
		}, wantIndex: 4, wantWords: "missing (removed)"},
		{name: "removed-and-renumbered", do: func(t *testing.T, s *Store) {
			exec(t, s, `DELETE FROM receipts WHERE idx = 4`)
			move(t, s, 5, -1)
		}, wantIndex: 4, wantEvent: "turn/c/1/run-1/3/rejected", wantWords: "moved, or records before it were removed"},
		{name: "inserted", do: func(t *testing.T, s *Store) {
			move(t, s, 2, 1)
			leaf, _ := receipts.Record{Type: receipts.TypeSettlement, Event: "forged/1", At: base,
				Settlement: &receipts.Settlement{Outcome: receipts.SettlementExecuted}}.Leaf()
			// The forger copies the proof and checkpoint of the record it displaced.
			exec(t, s, `INSERT INTO receipts (idx, event_key, part, record, proof, checkpoint, at)
				SELECT 2, 'forged/1', 'settlement', ?, proof, checkpoint, at FROM receipts WHERE idx = 3`, leaf)
		}, wantIndex: 2, wantEvent: "forged/1", wantWords: "altered"},
		{name: "inserted-at-the-end", do: func(t *testing.T, s *Store) {
			leaf, _ := receipts.Record{Type: receipts.TypeSettlement, Event: "forged/2", At: base,
				Settlement: &receipts.Settlement{Outcome: receipts.SettlementExecuted}}.Leaf()
			exec(t, s, `INSERT INTO receipts (idx, event_key, part, record, proof, checkpoint, at) VALUES (7, 'forged/2', 'settlement', ?, NULL, '', ?)`, leaf, tsArg(base))
			exec(t, s, `UPDATE receipt_head SET size = 8`)
		}, wantIndex: 7, wantWords: "covered by no signed checkpoint"},
		{name: "reordered", do: func(t *testing.T, s *Store) {
			exec(t, s, `UPDATE receipts SET idx = -100 WHERE idx = 1`)
			exec(t, s, `UPDATE receipts SET idx = 1 WHERE idx = 5`)
			exec(t, s, `UPDATE receipts SET idx = 5 WHERE idx = -100`)
		}, wantIndex: 1, wantEvent: "turn/c/1/run-1/3/rejected", wantWords: "it was record 5"},
		{name: "tail-cut", do: func(t *testing.T, s *Store) {
			// A careful attacker: the last three records go, and the head and the kept
			// checkpoints are made to agree. Only the published checkpoint remembers.
			var leaves [][]byte
			if err := s.db.SelectContext(testCtx(t), &leaves, `SELECT record FROM receipts WHERE idx < 4 ORDER BY idx`); err != nil {
				t.Fatal(err)
			}
			h := receipts.Head{}
			for _, l := range leaves {
				h, _, _ = h.Append(receipts.LeafHash(l))
			}
			exec(t, s, `DELETE FROM receipts WHERE idx >= 4`)
			exec(t, s, `DELETE FROM receipt_checkpoints`)
			exec(t, s, `UPDATE receipt_head SET size = 4, frontier = ?`, receipts.JoinHashes(h.Frontier))
		}, wantIndex: 4, wantWords: "the tail was cut"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachDriver(t, func(t *testing.T, s *Store, _ string) {
				sg, kr := receiptKeys(t)
				s.UseReceiptKey(sg)
				buildLog(t, s)
				published, err := s.SignReceiptHead(testCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{Checkpoints: [][]byte{published}}); err != nil {
					t.Fatalf("before tampering: %v", err)
				}
				tc.do(t, s)
				_, err = receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{Checkpoints: [][]byte{published}})
				var te *receipts.TamperError
				if !errors.As(err, &te) || !errors.Is(err, receipts.ErrTampered) {
					t.Fatalf("verify after %s: %v, want a TamperError", tc.name, err)
				}
				first := te.Problems[0]
				if first.Index != tc.wantIndex || first.Event != tc.wantEvent || !strings.Contains(first.What, tc.wantWords) {
					t.Fatalf("first problem %q (index %d, event %q), want record %d (%q) with %q\n%v",
						first.String(), first.Index, first.Event, tc.wantIndex, tc.wantEvent, tc.wantWords, err)
				}
				t.Logf("%s: %v", tc.name, err)
			})
		})
	}
}

// TestReceiptsUnsignedAppendsAreCoveredLater: a process without the log key still appends
// (the tree never has a gap); a checkpoint signed later covers those records, and an edit
// among them is found between the signed records around it.
func TestReceiptsUnsignedAppendsAreCoveredLater(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		sg, kr := receiptKeys(t)
		buildLog(t, s) // no key: unsigned
		_, err := receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{})
		if !errors.Is(err, receipts.ErrTampered) || !strings.Contains(err.Error(), "covered by no signed checkpoint") {
			t.Fatalf("unsigned records verified without a checkpoint: %v", err)
		}
		s.UseReceiptKey(sg)
		if _, err := s.SignReceiptHead(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{}); err != nil {
			t.Fatalf("records covered by a signed checkpoint: %v", err)
		}
		var rec []byte
		if err := s.db.GetContext(ctx, &rec, `SELECT record FROM receipts WHERE idx = 3`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.ExecContext(ctx, s.q(`UPDATE receipts SET record = ? WHERE idx = 3`), bytes.Replace(rec, []byte(`"executed"`), []byte(`"failed"`), 1)); err != nil {
			t.Fatal(err)
		}
		_, err = receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{})
		var te *receipts.TamperError
		if !errors.As(err, &te) || len(te.Problems) != 1 || !strings.Contains(te.Problems[0].What, "does not match records 0 to 6") {
			t.Fatalf("an edit among unsigned records: %v", err)
		}
	})
}

var _ = context.Background

// Retention removes old stream events and old audit rows, and keeps what verification needs:
// audit rows without records (written before the log) and the whole log, which still verifies.
func TestPruneKeepsWhatVerificationNeeds(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		sg, kr := receiptKeys(t)
		s.UseReceiptKey(sg)
		buildLog(t, s) // 4 audit rows at base .. base+3m, all with records
		// A row from before the log: no records.
		if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO audit_events (event_key, outcome, at) VALUES ('old/row', 'executed', ?)`), tsArg(base.Add(-time.Hour))); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendStreamEvent(ctx, "s1", "d1", "RUN_STARTED", []byte(`{}`), base); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendStreamEvent(ctx, "s1", "d2", "RUN_FINISHED", []byte(`{}`), base.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		p, err := s.Prune(ctx, Retention{StreamsBefore: base.Add(time.Minute), AuditBefore: base.Add(150 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if p.StreamEvents != 1 || p.AuditRows != 3 {
			t.Fatalf("pruned %+v, want 1 stream event and 3 audit rows (the rows at base, +90s and +2m)", p)
		}
		rows, _ := s.ListAudit(ctx, "")
		var keys []string
		for _, r := range rows {
			keys = append(keys, r.Key)
		}
		if strings.Join(keys, " ") != "turn/c/1/run-1/3/rejected old/row" {
			t.Fatalf("audit rows kept: %v", keys)
		}
		if ev, _ := s.StreamEvents(ctx, "s1", 0, 10); len(ev) != 1 || ev[0].Type != "RUN_FINISHED" {
			t.Fatalf("stream events kept: %+v", ev)
		}
		if _, err := receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{EachRecord: true}); err != nil {
			t.Fatalf("the log after pruning: %v", err)
		}
		// The pruned rows written again (a very late retry): the rows come back, their
		// records stay as they were, once, and nothing fails.
		before, _ := s.ReceiptHead(ctx)
		buildLog(t, s)
		if after, _ := s.ReceiptHead(ctx); after.Size != before.Size {
			t.Fatalf("rows written again after pruning added records: %d, then %d", before.Size, after.Size)
		}
		if _, err := receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{EachRecord: true}); err != nil {
			t.Fatalf("the log after the pruned rows came back: %v", err)
		}
	})
}

// The export carries an RFC 6962 consistency proof from each kept checkpoint to the newest:
// with it, a holder of the two checkpoints alone checks that the log only grew; a proof that
// does not fit is reported.
func TestReceiptsExportProvesConsistency(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		sg, kr := receiptKeys(t)
		s.UseReceiptKey(sg)
		buildLog(t, s)
		older, err := s.SignReceiptHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendAudit(ctx, AuditEvent{Key: "later/1", Outcome: "executed", At: base}); err != nil {
			t.Fatal(err)
		}
		newer, err := s.SignReceiptHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		exp := exportOf(t, s)
		var line receipts.Line
		for _, l := range bytes.Split(exp, []byte("\n")) {
			if bytes.Contains(l, []byte(`"type":"consistency"`)) {
				if err := json.Unmarshal(l, &line); err != nil {
					t.Fatal(err)
				}
			}
		}
		if line.From != 7 || line.Size != 9 || len(line.Proof) == 0 {
			t.Fatalf("consistency line %+v", line)
		}
		if err := receipts.VerifyConsistency(kr, older, newer, line.Proof); err != nil {
			t.Fatalf("the two checkpoints and the proof: %v", err)
		}
		if err := receipts.VerifyConsistency(kr, newer, older, line.Proof); !errors.Is(err, receipts.ErrTampered) {
			t.Fatalf("newer before older: %v", err)
		}
		if _, err := receipts.Verify(bytes.NewReader(exp), kr, receipts.VerifyOptions{}); err != nil {
			t.Fatal(err)
		}
		cut := bytes.LastIndex(exp, []byte(`{"type":"consistency"`))
		bad := append(slices.Clone(exp[:cut]), bytes.Replace(exp[cut:], []byte(base64.StdEncoding.EncodeToString(line.Proof[0])), []byte(base64.StdEncoding.EncodeToString(make([]byte, 32))), 1)...)
		_, err = receipts.Verify(bytes.NewReader(bad), kr, receipts.VerifyOptions{})
		if !errors.Is(err, receipts.ErrTampered) || !strings.Contains(err.Error(), "are not consistent") {
			t.Fatalf("a wrong consistency proof: %v", err)
		}
	})
}

// A quorum's authorization record names every approver with the kind of proof each gave, the
// deciding one last, and the quorum the policy asked for.
func TestReceiptsNameEveryApproverOfAQuorum(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		c := newConfirmation("conf-q", 0xC1)
		if _, err := s.CreateConfirmation(ctx, c); err != nil {
			t.Fatal(err)
		}
		for _, a := range []Approval{{ConfirmationID: "conf-q", Approver: "alice", Nonce: "n1", Proof: "CLI credential", At: base.Add(time.Minute)},
			{ConfirmationID: "conf-q", Approver: "bob", Nonce: "n2", Proof: "passkey on approver page web", At: base.Add(2 * time.Minute)}} {
			if _, err := s.AddApproval(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DecideProved(ctx, "conf-q", DecisionApproved, "bob", "", "passkey on approver page web; quorum of alice, bob", base.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, Recording{Audit: &AuditEvent{Key: "turn/c/1/run-1/2/executed", WorkflowID: "turn/c/1", RunID: "run-1", Seq: 2,
			CapabilityID: "files.write", Version: 1, Outcome: "executed", Approver: "bob", At: base.Add(3 * time.Minute), Facts: &ReceiptFacts{Quorum: 2}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SequenceReceipts(ctx); err != nil {
			t.Fatal(err)
		}
		var auth *receipts.Authorization
		if err := s.EachReceipt(ctx, 0, func(r receipts.Receipt) error {
			rec, err := receipts.ParseRecord(r.Leaf)
			if rec.Authorization != nil {
				auth = rec.Authorization
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if auth == nil || auth.Quorum != 2 || len(auth.Approvers) != 2 ||
			auth.Approvers[0].Name != "alice" || auth.Approvers[0].ProofKind != receipts.ProofCLICredential ||
			auth.Approvers[1].Name != "bob" || auth.Approvers[1].ProofKind != receipts.ProofPasskey || auth.Approvers[1].Proof != "passkey on approver page web" {
			t.Fatalf("authorization %+v", auth)
		}
	})
}

// Records are written with their audit rows and placed in the tree by the sequencer: rows
// written by many writers at once, sequenced by several sequencers at once (two processes'
// worth), end as one dense log with each row's records exactly once, and nothing written
// before a crash of the sequencer is lost.
func TestReceiptsSequencedOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, u string) {
		ctx := testCtx(t)
		sg, kr := receiptKeys(t)
		// Written without a sequencer: all pending, the tree still empty.
		for i := 0; i < 5; i++ {
			if _, err := s.AppendAudit(ctx, AuditEvent{Key: fmt.Sprintf("pre/%d", i), Outcome: "executed", At: base}); err != nil {
				t.Fatal(err)
			}
		}
		if h, _ := s.ReceiptHead(ctx); h.Size != 0 {
			t.Fatalf("head %d before any sequencing", h.Size)
		}
		other := openStore(t, u) // a second process's store on the same database
		s.UseReceiptKey(sg)
		other.UseReceiptKey(sg)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				st := s
				if w%2 == 1 {
					st = other
				}
				for i := 0; i < 10; i++ {
					if _, err := st.AppendAudit(ctx, AuditEvent{Key: fmt.Sprintf("w%d/%d", w, i), Outcome: "executed", At: base}); err != nil {
						errs <- err
						return
					}
					if _, err := st.SequenceReceipts(ctx); err != nil {
						errs <- err
						return
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if _, err := s.SequenceReceipts(ctx); err != nil {
			t.Fatal(err)
		}
		h, _ := s.ReceiptHead(ctx)
		if h.Size != 90 { // 45 rows × 2 records
			t.Fatalf("head %d, want 90", h.Size)
		}
		seen := map[string]int{}
		next := uint64(0)
		if err := s.EachReceipt(ctx, 0, func(r receipts.Receipt) error {
			if r.Index != next {
				return fmt.Errorf("index %d after %d", r.Index, next)
			}
			next++
			rec, err := receipts.ParseRecord(r.Leaf)
			seen[rec.Event+" "+rec.Type]++
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 90 {
			t.Fatalf("%d distinct records, want 90", len(seen))
		}
		rep, err := receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{EachRecord: true})
		if err != nil || rep.Signed != 90 {
			t.Fatalf("verify: %+v %v", rep, err)
		}
	})
}

// Every kind of audit row, written through every path that writes one (Record in one
// statement or in a transaction, AppendAudit, Settle), lands exactly once with exactly its
// records, whatever else the store holds about its call: a proposal whose confirmation a
// registry change voided and reissued, a stale confirmation for the same proposal (what a
// stale approver page holds), confirmations of no turn at all. Each row is written twice, as
// a retried activity does with the same key, and one call gets rows of several kinds (three
// refused decisions, a counted approval, a reissued token, its outcome). This is the fault
// that kept B25's confirmation_refused rows from ever being written on PostgreSQL: reading
// the call's confirmation by (turn, run, seq) found two rows.
func TestReceiptsEveryAuditRowOnce(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		sg, kr := receiptKeys(t)
		s.UseReceiptKey(sg)
		const wf, run = "turn/e/1", "run-1"
		if _, err := s.RecordRequester(ctx, TurnRequester{WorkflowID: wf, RunID: run, FirstRunID: run,
			Principal: "alice", Client: "laptop", Signature: "sig", At: base}); err != nil {
			t.Fatal(err)
		}
		conf := func(id string, hash byte, wfID, runID string, seq int, at time.Time) {
			t.Helper()
			c := newConfirmation(id, hash)
			c.WorkflowID, c.RunID, c.Seq, c.CreatedAt, c.ExpiresAt = wfID, runID, seq, at, at.Add(time.Hour)
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		// Seq 2: voided by a registry change, surfaced again and approved, then a stale
		// page's confirmation for the same proposal, never decided.
		conf("cf-2-voided", 0xE1, wf, run, 2, base)
		if err := s.DecideConfirmation(ctx, "cf-2-voided", DecisionExpired, "", "registry_changed", base.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		conf("cf-2-surfaced", 0xE2, wf, run, 2, base.Add(time.Minute))
		if err := s.DecideProved(ctx, "cf-2-surfaced", DecisionApproved, "bob", "", "passkey on approver page web", base.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		conf("cf-2-stale", 0xE3, wf, run, 2, base.Add(3*time.Minute))
		// Seq 4: undecided until its outcome's recording decides it (Record's transaction).
		conf("cf-4", 0xE4, wf, run, 4, base)
		// Confirmations of no turn, as rows with no workflow (MCP pins, notices) would match.
		conf("cf-none-1", 0xE5, "", "", 0, base)
		conf("cf-none-2", 0xE6, "", "", 0, base.Add(time.Second))

		type write struct {
			key, outcome, how string
			seq               int
			wf                string
		}
		var writes []write
		n := 0
		for _, k := range []string{"executed", "failed", "outcome_unknown", "denied", "expired", "rejected", "parse_failed", "budget_exhausted", "captured"} {
			how := []string{"record", "record-tx", "append"}[n%3]
			n++
			writes = append(writes, write{key: fmt.Sprintf("%s/%s/2/%s", wf, run, k), outcome: k, how: how, seq: 2, wf: wf})
		}
		for i, k := range []string{"confirmation_refused/1", "confirmation_refused/2", "confirmation_refused/3", "approval_counted/4",
			"token_reissued/1", "proposal_edited", "deprecated_admitted"} {
			outcome, _, _ := strings.Cut(k, "/")
			writes = append(writes, write{key: fmt.Sprintf("%s/%s/2/%s", wf, run, k), outcome: outcome, how: []string{"record", "append", "record-tx"}[i%3], seq: 2, wf: wf})
		}
		writes = append(writes,
			write{key: wf + "/" + run + "/4/denied", outcome: "denied", how: "record-decide", seq: 4, wf: wf},
			write{key: wf + "/" + run + "/turn_failed", outcome: "turn_failed", how: "append", wf: wf},
			write{key: wf + "/" + run + "/r1/message_incomplete", outcome: "message_incomplete", how: "append", wf: wf},
			write{key: "caller/x/call_refused", outcome: "call_refused", how: "append"},
			write{key: "mcp/srv/tool/a/b", outcome: "mcp_definition_changed", how: "record"},
			write{key: "notice/1/sent", outcome: "notice_sent", how: "append"},
			write{key: wf + "/" + run + "/6/captured", outcome: "captured", how: "settle", seq: 6, wf: wf},
			write{key: wf + "/" + run + "/6/proposal_captured", outcome: "proposal_captured", how: "settle", seq: 6, wf: wf},
		)
		for attempt := 0; attempt < 2; attempt++ { // the second round is every activity retried with the same keys
			for i, w := range writes {
				e := AuditEvent{Key: w.key, WorkflowID: w.wf, RunID: run, Seq: w.seq, CallID: "call", CapabilityID: "files.write", Version: 1,
					Outcome: w.outcome, Stage: "confirm", Reason: "r", ArgsDigest: "sha256:0123", At: base.Add(time.Duration(10+i) * time.Minute),
					Facts: &ReceiptFacts{RegistryRevision: "reg:1", Quorum: 1}}
				if w.wf == "" {
					e.RunID = ""
				}
				msg := []ContextEntry{{Conversation: "e", Key: w.key + "/0", Payload: []byte(`{"role":"tool"}`), CreatedAt: base}}
				var err error
				switch w.how {
				case "record":
					err = s.Record(ctx, Recording{Audit: &e, Context: msg})
				case "record-tx": // more messages than one statement takes: Record's transaction
					many := make([]ContextEntry, contextRowsPerStatement+1)
					for j := range many {
						many[j] = ContextEntry{Conversation: "e", Key: fmt.Sprintf("%s/%d", w.key, j), Payload: []byte(`{}`), CreatedAt: base}
					}
					err = s.Record(ctx, Recording{Audit: &e, Context: many})
				case "record-decide":
					err = s.Record(ctx, Recording{Audit: &e, Context: msg,
						Decision: &RecordedDecision{ConfirmationID: "cf-4", Decision: DecisionDenied, Approver: "carol", At: base.Add(5 * time.Minute)}})
				case "append":
					var inserted bool
					inserted, err = s.AppendAudit(ctx, e)
					if err == nil && inserted != (attempt == 0) {
						t.Errorf("%s attempt %d: inserted %v", w.key, attempt, inserted)
					}
				case "settle":
					err = s.Settle(ctx, Settlement{WorkflowID: wf + "/settled", Conversation: "e", Audit: []AuditEvent{e}, Result: json.RawMessage(`{}`), At: e.At})
				}
				if err != nil {
					t.Fatalf("write %s (%s) attempt %d: %v", w.key, w.how, attempt, err)
				}
			}
		}
		if _, err := s.SequenceReceipts(ctx); err != nil {
			t.Fatal(err)
		}

		rows, err := s.ListAudit(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{}
		byKey := map[string]int{}
		for _, r := range rows {
			byKey[r.Key]++
			for _, typ := range ReceiptTypes(r.Outcome) {
				want[typ+" "+r.Key]++
			}
		}
		for _, w := range writes {
			if byKey[w.key] != 1 {
				t.Errorf("audit row %s (%s, %s) stored %d times, want once", w.key, w.outcome, w.how, byKey[w.key])
			}
		}
		if len(rows) != len(writes) {
			t.Errorf("%d audit rows, want %d", len(rows), len(writes))
		}
		got := map[string]int{}
		records := map[string]receipts.Record{}
		if err := s.EachReceipt(ctx, 0, func(r receipts.Receipt) error {
			rec, err := receipts.ParseRecord(r.Leaf)
			got[rec.Type+" "+rec.Event]++
			records[rec.Type+" "+rec.Event] = rec
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for k, c := range want {
			if got[k] != c {
				t.Errorf("record %q: %d in the log, want %d", k, got[k], c)
			}
		}
		for k, c := range got {
			if want[k] == 0 {
				t.Errorf("record %q (%d) belongs to no audit row", k, c)
			}
		}
		// The outcome of seq 2 names the confirmation that decided it: the surfaced one.
		auth := records["authorization "+wf+"/"+run+"/2/executed"].Authorization
		if auth == nil || auth.Mode != receipts.ModeHuman || auth.Decision != DecisionApproved || len(auth.Approvers) != 1 ||
			auth.Approvers[0].Name != "bob" || auth.Approvers[0].ProofKind != receipts.ProofPasskey || auth.DecidedAt == nil || !auth.DecidedAt.Equal(norm(base.Add(2*time.Minute))) {
			t.Errorf("seq 2's authorization must name the surfaced confirmation bob approved: %+v", auth)
		}
		auth4 := records["authorization "+wf+"/"+run+"/4/denied"].Authorization
		if auth4 == nil || auth4.Decision != DecisionDenied || len(auth4.Approvers) != 1 || auth4.Approvers[0].Name != "carol" {
			t.Errorf("seq 4's authorization must name the decision its recording made: %+v", auth4)
		}
		rep, err := receipts.Verify(bytes.NewReader(exportOf(t, s)), kr, receipts.VerifyOptions{EachRecord: true})
		if err != nil || rep.Records != uint64(len(got)) {
			t.Fatalf("verify: %+v %v", rep, err)
		}
	})
}
