package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// A real turn on the dev server and PostgreSQL leaves, for each of its calls, an
// authorization and a settlement record in the receipts log, written with the audit rows:
// an automatic call by its rule, a call a person approved (who, with which proof, under which
// capability fingerprint), one a person denied, one the executor refused. The log has no gap
// and no duplicate, and its export verifies offline with the worker's public key only.
func TestReceiptsOfARealTurn(t *testing.T) {
	target := newHitServer(t)
	model := newFakeModel(t,
		calls(call("c1", "system_health", `{}`),
			call("c2", "web_fetch", fmt.Sprintf(`{"url":"%s/approved"}`, target.URL)),
			call("c3", "web_fetch", fmt.Sprintf(`{"url":"%s/denied"}`, target.URL)),
			call("c4", "no_such_tool", `{}`)),
		answer("done"))
	c, cfg, st := liveModelStack(t, model)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "receipts", Principal: "ops", Message: "check and fetch"})
	var ps []workflows.PendingConfirmation
	eventually(t, 60*time.Second, "both fetches pending", func() bool {
		ps = pending(t, c, run.GetID())
		return len(ps) == 2
	})
	if err := decideAs(t, c, cfg, st, ps[0].ConfirmationID, workflows.DecisionApprove, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if err := decideAs(t, c, cfg, st, ps[1].ConfirmationID, workflows.DecisionDeny, "bob", ""); err != nil {
		t.Fatal(err)
	}
	res := result(t, run)
	if got := outcomeList(res); got != "system_health:executed web_fetch:executed web_fetch:denied:denied_by_approver no_such_tool:rejected:unknown_capability" {
		t.Fatalf("outcomes %s", got)
	}
	ctx := context.Background()
	rows, err := st.ListAudit(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	rc := checkReceipts(ctx, st, cfg.Home, rows)
	if rc.Gaps != 0 || rc.Duplicates != 0 || rc.Verify != "" {
		t.Fatalf("receipts log: %+v", rc)
	}
	auth := map[int]*receipts.Authorization{}
	settle := map[int]*receipts.Settlement{}
	if err := st.EachReceipt(ctx, 0, func(r receipts.Receipt) error {
		rec, err := receipts.ParseRecord(r.Leaf)
		if err != nil || rec.Turn != run.GetID() {
			return err
		}
		t.Logf("record %d: %s", r.Index, r.Leaf)
		if rec.Authorization != nil {
			auth[rec.Seq] = rec.Authorization
		}
		if rec.Settlement != nil {
			settle[rec.Seq] = rec.Settlement
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(auth) != 4 || len(settle) != 4 {
		t.Fatalf("authorizations %d, settlements %d, want 4 each", len(auth), len(settle))
	}
	conf, err := st.GetConfirmation(ctx, ps[0].ConfirmationID)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2, a3, a4 := auth[1], auth[2], auth[3], auth[4]
	switch {
	case a1.Mode != receipts.ModeAutomatic || a1.Rule != "local_read_only" || a1.Fingerprint == "" || a1.RegistryRevision == "":
		t.Errorf("system.health authorization: %+v", a1)
	case a1.Requester == nil || a1.Requester.Principal != "ops" || a1.Requester.Attestation == "":
		t.Errorf("requester: %+v", a1.Requester)
	case a2.Mode != receipts.ModeHuman || a2.Decision != store.DecisionApproved || len(a2.Approvers) != 1 || a2.Approvers[0].Name != "alice" ||
		a2.Approvers[0].ProofKind != store.ProofKind(conf.ApproverProof) || a2.Approvers[0].ProofKind == receipts.ProofUnattested ||
		a2.Fingerprint != conf.RegistryRevision || a2.AskedAt == nil || a2.DecidedAt == nil || a2.Quorum != 1:
		t.Errorf("approved web_fetch authorization: %+v (confirmation proof %q)", a2, conf.ApproverProof)
	case a3.Mode != receipts.ModeHuman || a3.Decision != store.DecisionDenied || len(a3.Approvers) != 1 || a3.Approvers[0].Name != "bob":
		t.Errorf("denied web_fetch authorization: %+v", a3)
	case a4.Mode != receipts.ModeRefused || a4.Rule != "resolve:unknown_capability":
		t.Errorf("refused authorization: %+v", a4)
	case settle[1].Outcome != receipts.SettlementExecuted || settle[1].ResultDigest == "" || settle[2].ResultDigest == "":
		t.Errorf("executed settlements: %+v %+v", settle[1], settle[2])
	case settle[3].Outcome != receipts.SettlementDenied || settle[4].Outcome != receipts.SettlementRefused || settle[4].AuditOutcome != "rejected":
		t.Errorf("denied and refused settlements: %+v %+v", settle[3], settle[4])
	}
}
