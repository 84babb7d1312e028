package workflows_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// onPostgres moves fixture f onto a fresh PostgreSQL schema (the store's new one-statement
// write paths are PostgreSQL-only).
func onPostgres(t *testing.T, f *fixture) {
	t.Helper()
	base := os.Getenv("AIRLOCK_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("AIRLOCK_TEST_DATABASE_URL unset")
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	schema := "airlock_t_" + hex.EncodeToString(rnd[:])
	admin, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE"); admin.Close() })
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	st, err := store.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.store = st
	f.acts.Store = st
}

// Four-eyes, replay of the final decision's nonce, a late decision after expiry-less
// approval: on PostgreSQL exactly one decision counts, its row carries its own approver's
// proof and the audit names that approver.
func TestPostgresFourEyesAndReplayCountOneDecision(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
	onPostgres(t, f)
	src := registry.Source{Name: "test", Data: []byte(testRegistry)}
	reg, err := registry.Load([]registry.Source{src, registry.StructuralPolicy("four-eyes policy", "test.1", func(e registry.Entry) bool { return e.ID == "test.send" }, src)}, testImpls(f))
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Registry = reg
	var id string
	var bobs workflows.Decision
	f.at(time.Minute, func() {
		id = f.pending()[0].ConfirmationID
		f.signal(f.decision(id, workflows.DecisionApprove, "alice", "")) // the turn's own principal
	})
	f.at(time.Minute+time.Second, func() {
		bobs = f.decision(id, workflows.DecisionApprove, "bob", "")
		f.signal(bobs)
		f.signal(bobs) // replay: same nonce
	})
	f.at(time.Minute+2*time.Second, func() {
		d := f.decision(id, workflows.DecisionDeny, "carol", "too late")
		f.signal(d)
	})
	res := f.run(workflows.TurnRequest{Principal: "alice"})
	wantOutcomes(t, res, "executed")
	if f.sends.Load() != 1 || res.Outcomes[0].Approver != "bob" {
		t.Fatalf("sends %d, outcome %+v", f.sends.Load(), res.Outcomes[0])
	}
	row, err := f.store.GetConfirmation(context.Background(), id)
	if err != nil || row.Decision != store.DecisionApproved || row.Approver != "bob" || row.ApproverProof == "" {
		t.Fatalf("row = %+v, %v", row, err)
	}
	t.Logf("refusals %v, proof %q", f.refusals(), row.ApproverProof)
	executed := 0
	for _, r := range f.audit() {
		if r.Outcome == "executed" {
			executed++
			if r.Approver != "bob" {
				t.Errorf("executed row names %q", r.Approver)
			}
		}
	}
	if executed != 1 {
		t.Fatalf("%d executed rows", executed)
	}
}

// A decision whose approver (or reason) holds a NUL byte, sent by anyone who can signal the
// turn: on PostgreSQL every text column refuses it. The turn must still refuse it, stay
// decidable, and run alice's real approval.
func TestPostgresNULInDecisionIsRefused(t *testing.T) {
	for _, field := range []string{"approver", "reason"} {
		t.Run(field, func(t *testing.T) {
			f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
			onPostgres(t, f)
			f.at(time.Minute, func() {
				id := f.pending()[0].ConfirmationID
				var d workflows.Decision
				if field == "approver" {
					d = f.decision(id, workflows.DecisionApprove, "mal\x00lory", "")
				} else {
					d = f.decision(id, workflows.DecisionDeny, "bob", "no\x00pe")
				}
				f.signal(d)
			})
			f.at(time.Minute+10*time.Second, func() {
				p := f.pending()
				if len(p) != 1 {
					t.Errorf("pending after the NUL decision: %d", len(p))
					return
				}
				f.signal(f.decision(p[0].ConfirmationID, workflows.DecisionApprove, "alice", ""))
			})
			f.env.ExecuteWorkflow(workflows.TurnWorkflow, signed(f, workflows.TurnRequest{Conversation: "c1", Message: "hello"}))
			if !f.env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			if err := f.env.GetWorkflowError(); err != nil {
				t.Fatalf("workflow failed: %v", err)
			}
			var res workflows.TurnResult
			if err := f.env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			t.Logf("outcomes %v refusals %v sends %d", outcomes(res), f.refusals(), f.sends.Load())
			if r := f.refusals(); len(r) == 0 || r[0] != workflows.RefusalMalformed {
				t.Errorf("refusals = %v, want the NUL decision refused as %s first", r, workflows.RefusalMalformed)
			}
			if got := f.sends.Load(); got != 1 {
				t.Errorf("the call ran %d times, want once (alice's approval)", got)
			}
			for _, r := range f.audit() {
				if strings.Contains(r.Approver, "\x00") || strings.Contains(r.Reason, "\x00") {
					t.Errorf("NUL stored: %+v", r)
				}
			}
			_ = activities.AuditConfirmationRefused
		})
	}
}

func signed(f *fixture, req workflows.TurnRequest) workflows.TurnRequest {
	f.sign(&req)
	return req
}
