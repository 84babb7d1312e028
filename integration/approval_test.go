package integration

// Attacker tests of the confirmation path (issue 7 items 1, 2 and 7): decisions bound by a MAC,
// never the token; any presentation to a pending proposal consumes its token and a refused one
// gets a fresh token; one turn's decision does not burn another's; two approvers at once: one
// wins, the other is told; confirmed calls run at most once unless declared idempotent.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// approvalRegistry: record_value (an external write), pay (an external write under the
// four-eyes rule), fetch_page (external, side effect none: confirmed like web.fetch) and
// fetch_idempotent (the same, declared idempotent).
var approvalRegistry = `{"schema/v":"capability-registry.v1","revision":"approval-test.1","entries":[` + strings.Join([]string{
	apEntry("test.record-value", "record_value", "external-write", "external", "Record a value in the external ledger.", ""),
	apEntry("test.pay", "pay", "external-write", "external", "Pay someone.", ""),
	apEntry("test.fetch-page", "fetch_page", "none", "external", "Fetch a web page.", ""),
	apEntry("test.fetch-idempotent", "fetch_idempotent", "none", "external", "Fetch a web page (idempotent).", `,"idempotent":true`),
	apEntry("test.slow-record", "slow_record", "external-write", "external", "Record a value, slowly.", ""),
}, ",") + `]}`

func apEntry(id, tool, sideEffect, network, description, extra string) string {
	return fmt.Sprintf(`{"capability/id":%q,"version":1,"owner":"tests","surfaces":["host-local"],"wire/name":"app/%s","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":%q,"description":%q,"side-effect":%q,"network":%q,"per-turn/cap":5,"timeout":"10s","model-visible":true%s}}`,
		id, id, tool, description, sideEffect, network, testDestination(sideEffect, network, extra)+extra)
}

// testDestination is the destination declaration test entries need when they are external
// (RuleDestinationDeclared): a test system, with no argument field declared as leaving.
func testDestination(sideEffect, network string, extra ...string) string {
	if len(extra) > 0 && strings.Contains(extra[0], `"destination"`) {
		return "" // the entry declares its own
	}
	if sideEffect == "external-write" || network == "external" {
		return `,"destination":{"kind":"system","name":"test ledger"}`
	}
	return ""
}

type urlArgs struct {
	URL string `json:"url" validate:"required"`
}

// newApprovalEnv is a durEnv serving approvalRegistry; every invocation is recorded in e.rec.
// slow_record blocks until the test ends.
func newApprovalEnv(t *testing.T) *durEnv {
	t.Helper()
	return newGatedApprovalEnv(t, nil)
}

// newGatedApprovalEnv is newApprovalEnv whose slow_record, once recorded, blocks until gate is
// closed (or its context ends).
func newGatedApprovalEnv(t *testing.T, gate <-chan struct{}) *durEnv {
	t.Helper()
	e := newDurEnv(t)
	approvalSrc := registry.Source{Name: "approval-test", Data: []byte(approvalRegistry)}
	// test.pay keeps the four-eyes rule (now in the policy sidecar).
	reg, err := registry.Load([]registry.Source{approvalSrc, registry.StructuralPolicy("approval-test policy", "approval-test.1",
		func(e registry.Entry) bool { return e.ID == "test.pay" }, approvalSrc)}, []registry.Implementation{
		effect[messageArgs](e, "test.record-value", "record_value", `{"recorded":true}`),
		effect[messageArgs](e, "test.pay", "pay", `{"paid":true}`),
		effect[urlArgs](e, "test.fetch-page", "fetch_page", `{"body":"<html>page</html>"}`),
		effect[urlArgs](e, "test.fetch-idempotent", "fetch_idempotent", `{"body":"<html>page</html>"}`),
		registry.Typed("test.slow-record", 1, func(ctx context.Context, _ *messageArgs, inv registry.Invocation) (registry.Output, error) {
			e.rec.add("slow_record", inv.Arguments)
			select {
			case <-gate:
			case <-ctx.Done():
				return registry.Output{}, ctx.Err()
			}
			return registry.Output{Data: json.RawMessage(`{"recorded":true}`)}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.reg = reg
	return e
}

// newRoutedModel answers a turn whose first user message contains key with routes[key][r-1] in
// round r (assistant messages in the request, plus one), and with a final answer after that.
func newRoutedModel(t *testing.T, routes map[string][]string) *modelServer {
	return newModelServer(t, func(_ int, b []byte) (int, string) {
		var req struct {
			Messages []wireMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			return http.StatusBadRequest, `{"error":{"message":"bad json"}}`
		}
		user, round := "", 1
		for _, m := range req.Messages {
			switch m.Role {
			case "user":
				if user == "" {
					user = m.text()
				}
			case "assistant":
				round++
			}
		}
		for key, rounds := range routes {
			if strings.Contains(user, key) && round <= len(rounds) {
				return http.StatusOK, rounds[round-1]
			}
		}
		return http.StatusOK, answer("all done")
	})
}

// raceApprovals sends one approval of confirmation id per name through the decide update, all
// released at once, and returns each sender's error (nil for the one that decided it).
func (e *durEnv) raceApprovals(id string, names []string) []error {
	errs := make([]error, len(names))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[k] = e.approveUpdate(id, workflows.DecisionApprove, names[k])
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// row reads a confirmation row.
func (e *durEnv) row(id string) store.Confirmation {
	e.t.Helper()
	r, err := e.st.GetConfirmation(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// reissues lists the reasons of the token_reissued audit rows of a turn.
func (e *durEnv) reissues(workflowID string) []string {
	return e.auditReasons(workflowID, activities.AuditTokenReissued)
}

// waitRefusals waits until the turn has audited n refused decisions and returns their codes;
// each guard runs at every poll (to fail at once when a call ran instead).
func (e *durEnv) waitRefusals(workflowID string, n int, guards ...func()) []string {
	e.t.Helper()
	var got []string
	eventually(e.t, 30*time.Second, fmt.Sprintf("%d refused decisions audited on %s", n, workflowID), func() bool {
		for _, g := range guards {
			g()
		}
		got = e.refusals(workflowID)
		return len(got) >= n
	})
	if len(got) != n {
		e.t.Fatalf("refusals on %s = %v, want %d", workflowID, got, n)
	}
	return got
}

// update sends d as the turn's decide update exactly as given (no signing) and returns the
// turn's result or error.
func (e *durEnv) update(workflowID string, d workflows.Decision) (workflows.DecisionResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res workflows.DecisionResult
	h, err := e.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: workflowID, UpdateName: workflows.UpdateDecide,
		Args: []any{d}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, &res)
	}
	return res, err
}

// approve decides p through internal/approval's update, as an approver surface does.
func (e *durEnv) approveUpdate(id, decision, approver string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return approval.Decide(ctx, e.c, e.st, e.key, approval.Request{ConfirmationID: id, Decision: decision, Approver: approver, Reason: "test decision", Signer: signer(e.t, approver)})
}

// approveUpdateAs is approveUpdate with the decision attested by credential's owner.
func (e *durEnv) approveUpdateAs(id, decision, approver, credential string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return approval.Decide(ctx, e.c, e.st, e.key, approval.Request{ConfirmationID: id, Decision: decision, Approver: approver,
		Reason: "test decision", Signer: signer(e.t, credential)})
}

// historyBytes returns every event of the turn's history both as protojson and in the proto
// wire format (where payload data appear as the raw bytes they are, not base64), and every
// Decision carried by a confirmation signal or a decide update.
func (e *durEnv) historyBytes(workflowID string) ([]byte, []workflows.Decision) {
	e.t.Helper()
	var all []byte
	var ds []workflows.Decision
	dc := converter.GetDefaultDataConverter()
	it := e.c.GetWorkflowHistory(context.Background(), workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		j, err := protojson.Marshal(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		w, err := proto.Marshal(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(append(append(all, j...), '\n'), w...)
		if s := ev.GetWorkflowExecutionSignaledEventAttributes(); s != nil && s.GetSignalName() == workflows.SignalConfirmation {
			var d workflows.Decision
			if err := dc.FromPayloads(s.GetInput(), &d); err != nil {
				e.t.Fatalf("decode the confirmation signal of %s: %v", workflowID, err)
			}
			ds = append(ds, d)
		}
		if u := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); u != nil && u.GetAcceptedRequest().GetInput().GetName() == workflows.UpdateDecide {
			var d workflows.Decision
			if err := dc.FromPayloads(u.GetAcceptedRequest().GetInput().GetArgs(), &d); err != nil {
				e.t.Fatalf("decode the decide update of %s: %v", workflowID, err)
			}
			ds = append(ds, d)
		}
	}
	return all, ds
}

// dumpStore returns every column of every row of every table of the test's schema, as JSON
// text (bytea columns as \x hex), one row a line, and the table names.
func (e *durEnv) dumpStore() (string, []string) {
	e.t.Helper()
	db, err := sqlx.Open("postgres", e.dbURL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	if err := db.Select(&tables, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`); err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	for _, tbl := range tables {
		var rows []string
		if err := db.Select(&rows, fmt.Sprintf(`SELECT row_to_json(t)::text FROM %q t`, tbl)); err != nil {
			e.t.Fatalf("dump %s: %v", tbl, err)
		}
		for _, r := range rows {
			b.WriteString(tbl + ": " + r + "\n")
		}
	}
	return b.String(), tables
}

// tokenForms are the encodings a token could be found under: its text, the text's hex (a
// bytea column), its raw bytes, their hex and their standard base64.
func tokenForms(tok string) []string {
	forms := []string{tok, hex.EncodeToString([]byte(tok)), base64.StdEncoding.EncodeToString([]byte(tok))}
	if raw, err := base64.RawURLEncoding.DecodeString(tok); err == nil {
		forms = append(forms, string(raw), hex.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw), base64.RawURLEncoding.EncodeToString(raw))
	}
	return forms
}

// ---------------------------------------------------------------------------------------------
// Item 1: the plaintext token is nowhere an attacker can read

// A confirmation refused once (so a second token generation is issued), then approved: neither
// generation's token appears in the turn's Temporal history (every event, protojson and wire
// bytes), in any column of any row of the store, or in any request the model received.
func TestApprovalTokenNeverInHistoryOrStore(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	model := newRoutedModel(t, map[string][]string{"tokens": {calls(call("call_1", "record_value", `{"message":"one"}`))}})
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("tok", 1, workflows.TurnRequest{Message: "record tokens"})
	wf := run.GetID()
	p := waitPending(t, e.c, wf, map[string]bool{})

	toks := []string{e.tokenOf(p.ConfirmationID)}
	// Refused (a decision neither approve nor deny), through the decide update.
	err := e.approveUpdate(p.ConfirmationID, "maybe", "alice")
	var ref *approval.RefusedError
	if !errors.As(err, &ref) || ref.Code != activities.BadDecision || !ref.Reissued {
		t.Fatalf("decision \"maybe\" = %v, want a reissued refusal %s", err, activities.BadDecision)
	}
	if r := e.row(p.ConfirmationID); r.Generation != 1 || r.ConsumedAt != nil || r.Decision != "" {
		t.Fatalf("after the refusal: generation %d consumed %v decision %q, want a fresh unconsumed generation 1", r.Generation, r.ConsumedAt, r.Decision)
	}
	toks = append(toks, e.tokenOf(p.ConfirmationID))
	if toks[0] == toks[1] {
		t.Fatal("the reissued token equals the consumed one")
	}
	// Approved through the signal.
	d, err := approval.Send(context.Background(), e.c, e.st, e.key, approval.Request{ConfirmationID: p.ConfirmationID,
		Decision: workflows.DecisionApprove, Approver: "alice", Signer: signer(t, "alice")})
	if err != nil {
		t.Fatal(err)
	}
	if err := approval.Wait(context.Background(), e.st, d, 30*time.Second); err != nil {
		t.Fatalf("approval: %v", err)
	}
	res := result(t, run)
	if got := outcomeList(res); got != "record_value:executed" || res.Outcomes[0].Approver != "alice" {
		t.Fatalf("outcomes = %s %+v", got, res.Outcomes)
	}

	hist, decisions := e.historyBytes(wf)
	if len(decisions) != 2 || decisions[0].Decision != "maybe" || decisions[1].Decision != workflows.DecisionApprove ||
		decisions[1].Nonce != d.Nonce || decisions[1].MAC == "" {
		t.Fatalf("history must carry the refused update and the approving signal, MAC-signed: %+v", decisions)
	}
	db, tables := e.dumpStore()
	for _, want := range []string{"confirmations", "decision_nonces", "audit_events", "executions", "context_entries"} {
		if !slices.Contains(tables, want) {
			t.Fatalf("store tables %v lack %s", tables, want)
		}
		if !strings.Contains(db, want+": ") {
			t.Fatalf("table %s is empty: the dump would prove nothing", want)
		}
	}
	// Two rounds; on a loaded machine a round may be asked again (a workflow task that timed
	// out re-runs its local inference), and every request is searched below all the same.
	reqs := model.requests()
	if len(reqs) < 2 {
		t.Fatalf("model requests = %d, want at least the turn's 2 rounds", len(reqs))
	}
	for gen, tok := range toks {
		for _, form := range tokenForms(tok) {
			if bytes.Contains(hist, []byte(form)) {
				t.Errorf("token generation %d (%q) is in the Temporal history of %s", gen, form, wf)
			}
			if strings.Contains(db, form) {
				t.Errorf("token generation %d (%q) is in the store", gen, form)
			}
			for i, r := range reqs {
				if strings.Contains(r, form) {
					t.Errorf("token generation %d is in model request %d", gen, i)
				}
			}
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Item 1: a decision read from history is useless

// Turn A proposes record_value twice, turn B once. A's first proposal is approved by signal;
// the attacker decodes that Decision from the WorkflowExecutionSignaled event and re-sends it:
// unchanged to A's next proposal (not_pending: it names a confirmation no longer pending; no
// token is touched), re-aimed at A's next proposal with its nonce (nonce_replayed), under
// another approver name (nonce_replayed with the recorded nonce, decision_mac_invalid with a
// fresh one, not_pending when it still names the decided confirmation), to turn B unchanged
// (not_pending) and re-aimed at B's proposal (nonce_replayed, then decision_mac_invalid). A copy
// whose nonce the turn has seen is refused by the turn before any presentation (issue 20): it
// touches no token; every other presentation to a pending proposal consumed its token and got
// it a fresh one; nothing ran; both proposals are then approved and each runs exactly once.
func TestApprovalDecisionFromHistoryIsUseless(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	model := newRoutedModel(t, map[string][]string{
		"alpha": {calls(call("a1", "record_value", `{"message":"one"}`)), calls(call("a2", "record_value", `{"message":"two"}`))},
		"bravo": {calls(call("b1", "record_value", `{"message":"b"}`))},
	})
	e.startWorker(e.openAI(model.URL))
	runA, _ := e.startTurn("hist-a", 1, workflows.TurnRequest{Message: "alpha"})
	runB, _ := e.startTurn("hist-b", 1, workflows.TurnRequest{Message: "bravo"})
	wfA, wfB := runA.GetID(), runB.GetID()
	seenA := map[string]bool{}
	a1 := waitPending(t, e.c, wfA, seenA)
	b1 := waitPending(t, e.c, wfB, map[string]bool{})

	sent := e.decide(a1, workflows.DecisionApprove, "alice")
	a2 := waitPending(t, e.c, wfA, seenA)
	if got := e.rec.of("record_value"); len(got) != 1 || got[0] != `{"message":"one"}` {
		t.Fatalf("record_value ran %v, want only the approved first call", got)
	}
	_, ds := e.historyBytes(wfA)
	if len(ds) != 1 || !reflect.DeepEqual(ds[0], sent) {
		t.Fatalf("history decisions = %+v, want exactly the approval %+v", ds, sent)
	}
	hist := ds[0]

	nothingRan := func(when string) {
		t.Helper()
		if n := len(e.rec.of("record_value")); n != 1 {
			t.Fatalf("%s: record_value ran %d times: a decision read from history executed a call (%v)", when, n, e.rec.of("record_value"))
		}
	}
	ran := func() { nothingRan("waiting for the refusal") }
	stillWaits := func(p workflows.PendingConfirmation, gen int, when string) {
		t.Helper()
		r := e.row(p.ConfirmationID)
		if r.Generation != gen || r.ConsumedAt != nil || r.Decision != "" {
			t.Fatalf("%s: %s generation %d consumed %v decision %q, want generation %d, unconsumed, undecided",
				when, p.ConfirmationID, r.Generation, r.ConsumedAt, r.Decision, gen)
		}
		if ps := pending(t, e.c, p.WorkflowID); len(ps) != 1 || ps[0].ConfirmationID != p.ConfirmationID {
			t.Fatalf("%s: %s must still wait for %s: %+v", when, p.WorkflowID, p.ConfirmationID, ps)
		}
		nothingRan(when)
	}
	fresh := func(d workflows.Decision) workflows.Decision {
		n, err := token.NewNonce()
		if err != nil {
			t.Fatal(err)
		}
		d.Nonce = n
		return d
	}
	wantNotPendingUpdate := func(wf string, d workflows.Decision, when string) {
		t.Helper()
		res, err := e.update(wf, d)
		if err == nil || !hasAppErrorType(err, workflows.ErrTypeNotPending) {
			t.Fatalf("%s: update = %+v, %v; want the validator's %s refusal", when, res, err, workflows.ErrTypeNotPending)
		}
	}

	// (c) Unchanged, to the later proposal of the same turn: as a signal it names a
	// confirmation that is no longer pending (no token touched); as an update the validator
	// refuses it before it reaches history.
	e.signal(wfA, hist)
	e.waitRefusals(wfA, 1, ran)
	stillWaits(a2, 0, "copy unchanged to A's next proposal")
	wantNotPendingUpdate(wfA, hist, "copy unchanged as an update")
	// Re-aimed at the later proposal: the nonce was recorded by the approval.
	reaimed := hist
	reaimed.ConfirmationID = a2.ConfirmationID
	e.signal(wfA, reaimed)
	e.waitRefusals(wfA, 2, ran)
	stillWaits(a2, 0, "copy re-aimed at A's next proposal") // refused by the turn before any presentation
	// (a) Under another approver name, re-aimed: with the recorded nonce, then a fresh one (the
	// MAC binds the approver); and as it stands in history, naming the decided confirmation.
	mallory := reaimed
	mallory.Approver = "mallory"
	e.signal(wfA, mallory)
	e.waitRefusals(wfA, 3, ran)
	stillWaits(a2, 0, "copy under another approver, recorded nonce")
	e.signal(wfA, fresh(mallory))
	e.waitRefusals(wfA, 4, ran)
	stillWaits(a2, 1, "copy under another approver, fresh nonce")
	malloryA1 := hist
	malloryA1.Approver = "mallory"
	e.signal(wfA, malloryA1)
	e.waitRefusals(wfA, 5, ran)
	stillWaits(a2, 1, "copy under another approver for the decided confirmation")
	// The same re-aimed copy through the decide update: the validator refuses it (its nonce was
	// presented to this turn) before it reaches history.
	res, err := e.update(wfA, mallory)
	if err == nil || !hasAppErrorType(err, workflows.ErrTypeBadDecision) {
		t.Fatalf("re-aimed copy as an update = %+v, %v; want the validator's %s refusal", res, err, workflows.ErrTypeBadDecision)
	}
	stillWaits(a2, 1, "copy re-aimed as an update")
	// The re-aimed copy with a fresh nonce carries A1's argument digest: refused as made on
	// other arguments (stale_digest) before its MAC is even checked.
	wantA := []string{activities.RefusalNotPending, activities.NonceReplayed, activities.NonceReplayed,
		activities.StaleDigest, activities.RefusalNotPending}
	if got := e.waitRefusals(wfA, len(wantA)); !slices.Equal(got, wantA) {
		t.Fatalf("refusals on A = %v, want %v", got, wantA)
	}
	for _, r := range e.audit(wfA) {
		if r.Outcome == activities.AuditConfirmationRefused && (r.Seq != a2.Seq || r.ArgsDigest != a2.ArgsDigest) {
			t.Fatalf("a refusal must be audited against the waiting proposal #%d: %+v", a2.Seq, r)
		}
	}
	if got, want := e.reissues(wfA), []string{activities.StaleDigest}; !slices.Equal(got, want) {
		t.Fatalf("token_reissued on A = %v, want %v", got, want)
	}

	// (b) To another turn's pending confirmation: unchanged, re-aimed with the recorded nonce,
	// re-aimed with a fresh nonce, and unchanged as an update.
	e.signal(wfB, hist)
	e.waitRefusals(wfB, 1, ran)
	stillWaits(b1, 0, "copy unchanged to turn B")
	toB := hist
	toB.ConfirmationID = b1.ConfirmationID
	e.signal(wfB, toB)
	e.waitRefusals(wfB, 2, ran)
	stillWaits(b1, 0, "copy re-aimed at B") // B saw this nonce in the unchanged copy
	// With B's own argument digest (readable from the pending query), so the MAC is what
	// refuses it: it was made with A1's token.
	toBDigest := fresh(toB)
	toBDigest.ArgsDigest = b1.ArgsDigest
	e.signal(wfB, toBDigest)
	e.waitRefusals(wfB, 3, ran)
	stillWaits(b1, 1, "copy re-aimed at B with a fresh nonce")
	wantNotPendingUpdate(wfB, hist, "copy unchanged to B as an update")
	if got, want := e.refusals(wfB), []string{activities.RefusalNotPending, activities.NonceReplayed, activities.DecisionMACInvalid}; !slices.Equal(got, want) {
		t.Fatalf("refusals on B = %v, want %v", got, want)
	}
	if got, want := e.reissues(wfB), []string{activities.DecisionMACInvalid}; !slices.Equal(got, want) {
		t.Fatalf("token_reissued on B = %v, want %v", got, want)
	}

	// The genuine approvals decide both proposals; each runs exactly once.
	if err := e.approveUpdate(a2.ConfirmationID, workflows.DecisionApprove, "alice"); err != nil {
		t.Fatalf("approve A's second proposal: %v", err)
	}
	if err := e.approveUpdate(b1.ConfirmationID, workflows.DecisionApprove, "bob"); err != nil {
		t.Fatalf("approve B's proposal: %v", err)
	}
	resA, resB := result(t, runA), result(t, runB)
	if got := outcomeList(resA); got != "record_value:executed record_value:executed" || resA.Outcomes[1].Approver != "alice" {
		t.Fatalf("A outcomes = %s %+v", got, resA.Outcomes)
	}
	if got := outcomeList(resB); got != "record_value:executed" || resB.Outcomes[0].Approver != "bob" {
		t.Fatalf("B outcomes = %s %+v", got, resB.Outcomes)
	}
	got := e.rec.of("record_value")
	slices.Sort(got)
	if want := []string{`{"message":"b"}`, `{"message":"one"}`, `{"message":"two"}`}; !slices.Equal(got, want) {
		t.Fatalf("record_value ran %v, want each approved call once: %v", got, want)
	}
}

// ---------------------------------------------------------------------------------------------
// Item 1: decisions refused before the consume now consume and reissue

// On a four-eyes capability requested by mallory: an approval without an approver, a decision
// that is neither approve nor deny and mallory approving her own call each consume the token
// (refused with their code, the generation increments, token_reissued audited); a mistyped
// confirmation id touches nothing. The proposal then stays decidable: bob's approval runs it
// exactly once.
func TestApprovalRefusedDecisionsConsumeAndReissue(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	model := newRoutedModel(t, map[string][]string{"payment": {calls(call("p1", "pay", `{"message":"pay 10 to carol"}`))}})
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("four-eyes", 1, workflows.TurnRequest{Message: "make the payment", Principal: "mallory"})
	wf := run.GetID()
	p := waitPending(t, e.c, wf, map[string]bool{})

	check := func(gen int, reissued []string, when string) {
		t.Helper()
		r := e.row(p.ConfirmationID)
		if r.Generation != gen || r.ConsumedAt != nil || r.Decision != "" {
			t.Fatalf("%s: generation %d consumed %v decision %q, want generation %d, unconsumed, undecided",
				when, r.Generation, r.ConsumedAt, r.Decision, gen)
		}
		if got := e.reissues(wf); !slices.Equal(got, reissued) {
			t.Fatalf("%s: token_reissued = %v, want %v", when, got, reissued)
		}
		if ps := pending(t, e.c, wf); len(ps) != 1 || ps[0].ConfirmationID != p.ConfirmationID {
			t.Fatalf("%s: the proposal must still wait: %+v", when, ps)
		}
		if n := e.rec.total(); n != 0 {
			t.Fatalf("%s: pay ran %d times", when, n)
		}
	}
	var reissued []string
	for i, c := range []struct {
		decision, approver, credential, code string
	}{
		{workflows.DecisionApprove, "", "", activities.ApproverMissing},
		{"maybe", "alice", "alice", activities.BadDecision},
		{workflows.DecisionApprove, "mallory", "mallory", activities.ApproverIsRequester},
		// The requester holds the approver key and her own credential, and types bob's name:
		// the name is not proven, so it is not bob's approval.
		{workflows.DecisionApprove, "bob", "mallory", activities.ApproverUnauthenticated},
	} {
		before := e.tokenOf(p.ConfirmationID)
		err := e.approveUpdateAs(p.ConfirmationID, c.decision, c.approver, c.credential)
		var ref *approval.RefusedError
		if !errors.As(err, &ref) || ref.Code != c.code || !ref.Reissued || ref.ConfirmationID != p.ConfirmationID {
			t.Fatalf("%q by %q = %v, want a reissued refusal %s", c.decision, c.approver, err, c.code)
		}
		reissued = append(reissued, c.code)
		check(i+1, reissued, c.code)
		if e.tokenOf(p.ConfirmationID) == before {
			t.Fatalf("%s: the consumed token was not replaced", c.code)
		}
	}

	// A mistyped confirmation id, correctly signed otherwise: as a signal it is refused
	// not_pending and touches no token; as an update the validator refuses it.
	typo := e.sign(p, workflows.DecisionApprove, "bob")
	typo.ConfirmationID = p.ConfirmationID[:len(p.ConfirmationID)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(p.ConfirmationID, "0")]
	e.signal(wf, typo)
	e.waitRefusals(wf, 5)
	check(4, reissued, "mistyped id (signal)")
	if _, err := e.update(wf, typo); !hasAppErrorType(err, workflows.ErrTypeNotPending) {
		t.Fatalf("mistyped id as an update = %v, want the validator's %s refusal", err, workflows.ErrTypeNotPending)
	}
	check(4, reissued, "mistyped id (update)")
	err := e.approveUpdate(typo.ConfirmationID, workflows.DecisionApprove, "bob")
	var np *approval.NotPendingError
	if !errors.As(err, &np) || np.Detail != "no such confirmation" {
		t.Fatalf("approval.Decide on a mistyped id = %v, want NotPendingError(no such confirmation)", err)
	}
	check(4, reissued, "mistyped id (approval.Decide)")
	want := []string{activities.ApproverMissing, activities.BadDecision, activities.ApproverIsRequester, activities.ApproverUnauthenticated, activities.RefusalNotPending}
	if got := e.refusals(wf); !slices.Equal(got, want) {
		t.Fatalf("refusals = %v, want %v", got, want)
	}

	if err := e.approveUpdate(p.ConfirmationID, workflows.DecisionApprove, "bob"); err != nil {
		t.Fatalf("bob's approval: %v", err)
	}
	res := result(t, run)
	if got := outcomeList(res); got != "pay:executed" || res.Outcomes[0].Approver != "bob" {
		t.Fatalf("outcomes = %s %+v", got, res.Outcomes)
	}
	if got := e.rec.of("pay"); len(got) != 1 {
		t.Fatalf("pay ran %d times, want once", len(got))
	}
	if r := e.row(p.ConfirmationID); r.Decision != store.DecisionApproved || r.Approver != "bob" || r.Generation != 4 {
		t.Fatalf("confirmation = decision %q approver %q generation %d", r.Decision, r.Approver, r.Generation)
	}
}

// ---------------------------------------------------------------------------------------------
// Item 1: one turn's decision presented to another turn does not burn the first turn's token

func TestApprovalCrossTurnDecisionDoesNotBurnToken(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	model := newRoutedModel(t, map[string][]string{
		"first":  {calls(call("a1", "record_value", `{"message":"a"}`))},
		"second": {calls(call("b1", "record_value", `{"message":"b"}`))},
	})
	e.startWorker(e.openAI(model.URL))
	runA, _ := e.startTurn("cross-a", 1, workflows.TurnRequest{Message: "first"})
	runB, _ := e.startTurn("cross-b", 1, workflows.TurnRequest{Message: "second"})
	pa := waitPending(t, e.c, runA.GetID(), map[string]bool{})
	pb := waitPending(t, e.c, runB.GetID(), map[string]bool{})

	dA := e.sign(pa, workflows.DecisionApprove, "alice")
	e.signal(runB.GetID(), dA)
	if got := e.waitRefusals(runB.GetID(), 1); got[0] != activities.RefusalNotPending {
		t.Fatalf("B refusals = %v, want [%s]", got, activities.RefusalNotPending)
	}
	if _, err := e.update(runB.GetID(), dA); !hasAppErrorType(err, workflows.ErrTypeNotPending) {
		t.Fatalf("A's decision as an update to B = %v, want the validator's %s refusal", err, workflows.ErrTypeNotPending)
	}
	for _, p := range []workflows.PendingConfirmation{pa, pb} {
		r := e.row(p.ConfirmationID)
		if r.Generation != 0 || r.ConsumedAt != nil || r.Decision != "" {
			t.Fatalf("%s: generation %d consumed %v decision %q: a decision for A presented to B touched a token", p.WorkflowID, r.Generation, r.ConsumedAt, r.Decision)
		}
		if got := e.reissues(p.WorkflowID); len(got) != 0 {
			t.Fatalf("%s: token_reissued %v", p.WorkflowID, got)
		}
	}
	if _, err := e.st.GetNonce(context.Background(), dA.Nonce); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the misrouted decision's nonce was recorded (%v): it was judged against a token", err)
	}
	if r := e.audit(runB.GetID()); len(r) != 1 || r[0].Seq != pb.Seq || r[0].CallID != pb.CallID || r[0].Approver != "alice" {
		t.Fatalf("B's audit = %+v, want one not_pending refusal against its waiting proposal", r)
	}
	if r := e.audit(runA.GetID()); len(r) != 0 {
		t.Fatalf("A's audit = %+v, want nothing", r)
	}

	// The very decision, now delivered to its own turn, still decides A.
	e.signal(runA.GetID(), dA)
	if err := approval.Wait(context.Background(), e.st, dA, 30*time.Second); err != nil {
		t.Fatalf("A's decision on A: %v", err)
	}
	if err := e.approveUpdate(pb.ConfirmationID, workflows.DecisionDeny, "bob"); err != nil {
		t.Fatalf("deny B: %v", err)
	}
	if got := outcomeList(result(t, runA)); got != "record_value:executed" {
		t.Fatalf("A outcomes = %s", got)
	}
	if got := outcomeList(result(t, runB)); got != "record_value:denied:denied_by_approver" {
		t.Fatalf("B outcomes = %s", got)
	}
	if got := e.rec.of("record_value"); len(got) != 1 || got[0] != `{"message":"a"}` {
		t.Fatalf("record_value ran %v, want only A's call", got)
	}
}

// ---------------------------------------------------------------------------------------------
// Item 7: two approvers deciding at once

// raceTurns starts n turns each proposing record_value {"message":"race-i"} and returns them
// with their pending confirmations.
func raceTurns(t *testing.T, e *durEnv, prefix string, n int) ([]client.WorkflowRun, []workflows.PendingConfirmation) {
	routes := map[string][]string{}
	for i := range n {
		routes[fmt.Sprintf("%s-%d-go", prefix, i)] = []string{calls(call("c1", "record_value", fmt.Sprintf(`{"message":"race-%d"}`, i)))}
	}
	model := newRoutedModel(t, routes)
	e.startWorker(e.openAI(model.URL))
	var runs []client.WorkflowRun
	for i := range n {
		run, _ := e.startTurn(fmt.Sprintf("%s-%d", prefix, i), 1, workflows.TurnRequest{Message: fmt.Sprintf("%s-%d-go", prefix, i)})
		runs = append(runs, run)
	}
	var ps []workflows.PendingConfirmation
	for _, run := range runs {
		ps = append(ps, waitPending(t, e.c, run.GetID(), map[string]bool{}))
	}
	return runs, ps
}

// checkRaceOutcome asserts the turn ran its call once, approved by winner.
func checkRaceOutcome(t *testing.T, e *durEnv, run client.WorkflowRun, p workflows.PendingConfirmation, i int, winner, loser string) {
	t.Helper()
	res := result(t, run)
	if got := outcomeList(res); got != "record_value:executed" || res.Outcomes[0].Approver != winner {
		t.Fatalf("race %d: outcomes = %s %+v, want executed by %s", i, got, res.Outcomes, winner)
	}
	n := 0
	for _, v := range e.rec.of("record_value") {
		if v == fmt.Sprintf(`{"message":"race-%d"}`, i) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("race %d: the call ran %d times", i, n)
	}
	if r := e.row(p.ConfirmationID); r.Decision != store.DecisionApproved || r.Approver != winner || r.Generation != 0 {
		t.Fatalf("race %d: confirmation decision %q approver %q generation %d", i, r.Decision, r.Approver, r.Generation)
	}
	for _, r := range e.audit(run.GetID()) {
		switch {
		case r.Outcome == string(activities.OutcomeExecuted) && r.Approver == winner:
		case r.Outcome == activities.AuditConfirmationRefused && r.Reason == activities.RefusalNotPending && r.Approver == loser:
		default:
			t.Fatalf("race %d: unexpected audit row %+v", i, r)
		}
	}
}

// Two approval.Decide calls (the decide update) released together: exactly one returns nil, the
// other a *NotPendingError naming the winner's decision and approver; the call runs once.
func TestApprovalConcurrentDecideUpdates(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	const rounds = 3
	runs, ps := raceTurns(t, e, "race-update", rounds)
	for i, p := range ps {
		names := []string{"alice", "bob"}
		errs := e.raceApprovals(p.ConfirmationID, names)
		w := -1
		for k, err := range errs {
			if err == nil {
				if w >= 0 {
					t.Fatalf("race %d: both approvals report success", i)
				}
				w = k
			}
		}
		if w < 0 {
			t.Fatalf("race %d: neither approval won: %v / %v", i, errs[0], errs[1])
		}
		winner, loser := names[w], names[1-w]
		var np *approval.NotPendingError
		if err := errs[1-w]; !errors.As(err, &np) || np.ConfirmationID != p.ConfirmationID ||
			np.Decision != store.DecisionApproved || np.Approver != winner {
			t.Fatalf("race %d: the loser %s got %v (%+v), want a NotPendingError naming approved by %s", i, loser, err, np, winner)
		}
		t.Logf("race %d: %s won; %s: %v", i, winner, loser, errs[1-w])
		checkRaceOutcome(t, e, runs[i], p, i, winner, loser)
	}
}

// Two approvers racing while the winner's call is still executing (slow_record blocks until
// the test releases it): the loser, through the decide update or the CLI, is told at once that
// the confirmation was already approved and by whom, not after the execution ends.
func TestApprovalConcurrentDecideWhileExecuting(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	t.Cleanup(open)
	e := newGatedApprovalEnv(t, gate)
	model := newRoutedModel(t, map[string][]string{"slowly": {calls(call("s1", "slow_record", `{"message":"slow"}`))}})
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("slow", 1, workflows.TurnRequest{Message: "record slowly"})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})

	names := []string{"alice", "bob"}
	errs := e.raceApprovals(p.ConfirmationID, names)
	// The call cannot finish before open(): whatever the loser was told, it was told before.
	eventually(t, 30*time.Second, "slow_record to start", func() bool { return len(e.rec.of("slow_record")) == 1 })
	w := slices.IndexFunc(errs, func(err error) bool { return err == nil })
	if w < 0 || errs[1-w] == nil {
		t.Fatalf("want exactly one winner: %v / %v", errs[0], errs[1])
	}
	winner := names[w]
	var np *approval.NotPendingError
	if err := errs[1-w]; !errors.As(err, &np) || np.Decision != store.DecisionApproved || np.Approver != winner {
		t.Fatalf("while the approved call executes, the loser got %v (%+v), want a NotPendingError naming approved by %s", err, np, winner)
	}
	cmd := exec.Command(airlockBin, "approve", p.ConfirmationID, "--credential", itCredentials["carol"])
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+e.home, "AIRLOCK_DATABASE_URL="+e.dbURL, "AIRLOCK_APPROVER_KEY=",
		"AIRLOCK_APPROVER_KEY_FILE=", "TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already approved by "+winner) {
		t.Fatalf("a late `airlock approve` while the call executes: %v\n%s", err, out)
	}
	open()
	res := result(t, run)
	if got := outcomeList(res); got != "slow_record:executed" || res.Outcomes[0].Approver != winner {
		t.Fatalf("outcomes = %s %+v", got, res.Outcomes)
	}
	if n := len(e.rec.of("slow_record")); n != 1 {
		t.Fatalf("slow_record ran %d times", n)
	}
}

// Two `airlock approve` processes started together: exactly one exits 0 printing "approved
// by", the other exits non-zero saying the confirmation was already approved by the winner.
func TestApprovalConcurrentCLIApprove(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	const rounds = 3
	runs, ps := raceTurns(t, e, "race-cli", rounds)
	for i, p := range ps {
		names := []string{"alice", "bob"}
		outs := make([]bytes.Buffer, 2)
		cmds := make([]*exec.Cmd, 2)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		for k, name := range names {
			cmd := exec.CommandContext(ctx, airlockBin, "approve", p.ConfirmationID, "--credential", itCredentials[name])
			cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+e.home, "AIRLOCK_DATABASE_URL="+e.dbURL, "AIRLOCK_APPROVER_KEY=",
				"AIRLOCK_APPROVER_KEY_FILE=", "TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
			cmd.Stdout, cmd.Stderr = &outs[k], &outs[k]
			cmds[k] = cmd
		}
		for k, cmd := range cmds {
			if err := cmd.Start(); err != nil {
				cancel()
				t.Fatalf("start approver %s: %v", names[k], err)
			}
		}
		errs := make([]error, 2)
		for k, cmd := range cmds {
			errs[k] = cmd.Wait()
		}
		cancel()
		w := -1
		for k, err := range errs {
			if err == nil {
				if w >= 0 {
					t.Fatalf("race %d: both approvers exit 0:\n%s\n%s", i, outs[0].String(), outs[1].String())
				}
				w = k
			}
		}
		if w < 0 {
			t.Fatalf("race %d: neither approver succeeded:\n%v: %s\n%v: %s", i, errs[0], outs[0].String(), errs[1], outs[1].String())
		}
		winner, loser := names[w], names[1-w]
		if got := outs[w].String(); !strings.Contains(got, "approved by "+winner) {
			t.Fatalf("race %d: the winner %s printed %q", i, winner, got)
		}
		lost := outs[1-w].String()
		var ee *exec.ExitError
		if !errors.As(errs[1-w], &ee) || ee.ExitCode() == 0 || !strings.Contains(lost, "already approved by "+winner) ||
			strings.Contains(lost, "approved by "+loser) {
			t.Fatalf("race %d: the loser %s (%v) printed %q, want a non-zero exit saying it was already approved by %s", i, loser, errs[1-w], lost, winner)
		}
		t.Logf("race %d: %s won; %s: %s", i, winner, loser, strings.TrimSpace(lost))
		checkRaceOutcome(t, e, runs[i], p, i, winner, loser)
	}
}

// ---------------------------------------------------------------------------------------------
// Item 2: at most once for every confirmed call

// A confirmed capability with side effect "none" (external, like web.fetch) whose execution
// was interrupted (its ledger row claimed by an earlier attempt, as a crash mid-execute leaves
// it) is reported outcome_unknown to the model, the audit, the TurnResult and `airlock turn
// show`, and never runs; the same capability declared idempotent runs again and its outcome
// says 2 attempts.
func TestApprovalConfirmedReadOnlyCallRunsAtMostOnce(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	model := newRoutedModel(t, map[string][]string{
		"plain": {calls(call("f1", "fetch_page", `{"url":"https://example.com/a"}`))},
		"idem":  {calls(call("f1", "fetch_idempotent", `{"url":"https://example.com/b"}`))},
	})
	e.startWorker(e.openAI(model.URL))
	runOnce, _ := e.startTurn("amo-plain", 1, workflows.TurnRequest{Message: "fetch plain"})
	runIdem, _ := e.startTurn("amo-idem", 1, workflows.TurnRequest{Message: "fetch idem"})

	crashed := func(run client.WorkflowRun) workflows.PendingConfirmation {
		p := waitPending(t, e.c, run.GetID(), map[string]bool{})
		// What an attempt that crashed after claiming the ledger leaves behind.
		key := fmt.Sprintf("%s/%d", run.GetID(), p.Seq)
		if existing, err := e.st.BeginExecution(context.Background(), store.Execution{Key: key, WorkflowID: run.GetID(), Seq: p.Seq,
			CapabilityID: p.CapabilityID, Version: p.Version}); err != nil || existing != nil {
			t.Fatalf("claim ledger %s: %v %+v", key, err, existing)
		}
		if err := e.approveUpdate(p.ConfirmationID, workflows.DecisionApprove, "alice"); err != nil {
			t.Fatalf("approve %s: %v", p.ConfirmationID, err)
		}
		return p
	}
	pOnce, pIdem := crashed(runOnce), crashed(runIdem)
	resOnce, resIdem := result(t, runOnce), result(t, runIdem)

	// Not idempotent: outcome_unknown everywhere, never run.
	if got := outcomeList(resOnce); got != "fetch_page:outcome_unknown" || resOnce.Outcomes[0].Approver != "alice" ||
		resOnce.Outcomes[0].Attempts != 0 || resOnce.Outcomes[0].Detail == "" {
		t.Fatalf("outcomes = %s %+v", got, resOnce.Outcomes)
	}
	if n := len(e.rec.of("fetch_page")); n != 0 {
		t.Fatalf("fetch_page ran %d times after an interrupted attempt", n)
	}
	if ex, err := e.st.GetExecution(context.Background(), fmt.Sprintf("%s/%d", runOnce.GetID(), pOnce.Seq)); err != nil || ex.State != store.ExecStarted || ex.Attempts != 1 {
		t.Fatalf("ledger = %+v %v: an unknown outcome must stay unknown", ex, err)
	}
	if rows := e.audit(runOnce.GetID()); len(rows) != 1 || rows[0].Outcome != string(activities.OutcomeUnknown) ||
		rows[0].Stage != string(activities.StageExecute) || rows[0].Approver != "alice" {
		t.Fatalf("audit = %+v", rows)
	}
	envOf := func(run client.WorkflowRun, key string) activities.Envelope {
		t.Helper()
		for _, r := range model.requests() {
			if !strings.Contains(r, key) {
				continue
			}
			if env, ok := toolResults(t, wireMessages(t, r))["f1"]; ok {
				return env
			}
		}
		t.Fatalf("no model request of %s carries the result of f1", run.GetID())
		return activities.Envelope{}
	}
	if env := envOf(runOnce, "fetch plain"); env.Outcome != activities.OutcomeUnknown || env.Error == "" || env.Attempts != 0 {
		t.Fatalf("the model received %+v, want outcome_unknown", env)
	}
	cmd := exec.Command(airlockBin, "turn", "show", runOnce.GetID())
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+e.home, "AIRLOCK_DATABASE_URL="+e.dbURL,
		"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), string(activities.OutcomeUnknown)) {
		t.Fatalf("airlock turn show: %v\n%s", err, out)
	}

	// Idempotent: started again, once, and the outcome counts both attempts.
	if got := outcomeList(resIdem); got != "fetch_idempotent:executed" || resIdem.Outcomes[0].Attempts != 2 {
		t.Fatalf("outcomes = %s %+v, want executed with 2 attempts", got, resIdem.Outcomes)
	}
	if n := len(e.rec.of("fetch_idempotent")); n != 1 {
		t.Fatalf("fetch_idempotent ran %d times in this process, want 1", n)
	}
	if ex, err := e.st.GetExecution(context.Background(), fmt.Sprintf("%s/%d", runIdem.GetID(), pIdem.Seq)); err != nil || ex.State != store.ExecCompleted || ex.Attempts != 2 {
		t.Fatalf("ledger = %+v %v", ex, err)
	}
	if env := envOf(runIdem, "fetch idem"); env.Outcome != activities.OutcomeExecuted || env.Attempts != 2 {
		t.Fatalf("the model received %+v, want executed with attempts 2", env)
	}
	if rows := e.audit(runIdem.GetID()); len(rows) != 1 || rows[0].Outcome != string(activities.OutcomeExecuted) {
		t.Fatalf("audit = %+v", rows)
	}
}
