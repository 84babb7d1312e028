package integration

// Issue 8 items 1 and 4 on the real dev server and PostgreSQL: the consequential calls of one
// model message are pending together and decided in any order, then run in call order; an
// approver's edit denies the original and runs exactly the approver's arguments as a new,
// approver-originated proposal that passes the executor stages again.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// hitServer is a real local HTTP server web_fetch can reach; it records every path requested.
type hitServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

func newHitServer(t *testing.T) *hitServer {
	h := &hitServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits = append(h.hits, r.URL.Path)
		h.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<title>page</title><p>"+r.URL.Path+"</p>")
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hitServer) paths() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.hits, " ")
}

// decideAs decides confirmation id through the decide update (internal/approval), as an
// approver surface does; args are an edit's arguments.
func decideAs(t *testing.T, c client.Client, cfg config.Config, st *store.Store, id, decision, approver, args string) error {
	t.Helper()
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := approval.Request{ConfirmationID: id, Decision: decision, Approver: approver, Signer: signer(t, approver)}
	if args != "" {
		r.Arguments = json.RawMessage(args)
	}
	return approval.Decide(ctx, c, st, key, r)
}

// pendingCount reads the turn's AirlockPendingConfirmations as the server holds it.
func pendingCount(t *testing.T, c client.Client, id string) int64 {
	d, err := c.DescribeWorkflow(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if p, ok := d.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.AttrPending.GetName()]; ok {
		if err := json.Unmarshal(p.GetData(), &n); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// Two consequential calls in one model message are pending at once (the pending query lists
// both, AirlockPendingConfirmations counts 2), are decided in reverse order, and then both run
// in call order against a real HTTP server.
func TestBatchTwoConfirmationsPendingAtOnceDecidedInReverseOrder(t *testing.T) {
	target := newHitServer(t)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/first"}`, target.URL)),
		call("c2", "web_fetch", fmt.Sprintf(`{"url":"%s/second"}`, target.URL))))
	c, cfg, st := liveModelStack(t, model)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "batch", Principal: "ops", Message: "fetch both pages"})
	var ps []workflows.PendingConfirmation
	eventually(t, 60*time.Second, "both confirmations pending at once", func() bool {
		ps = pending(t, c, run.GetID())
		return len(ps) == 2 && pendingCount(t, c, run.GetID()) == 2
	})
	if ps[0].CallID != "c1" || ps[1].CallID != "c2" || ps[0].ConfirmationID == ps[1].ConfirmationID {
		t.Fatalf("pending = %+v", ps)
	}
	if err := decideAs(t, c, cfg, st, ps[1].ConfirmationID, workflows.DecisionApprove, "alice", ""); err != nil {
		t.Fatalf("approve the second: %v", err)
	}
	eventually(t, 30*time.Second, "only the first still pending", func() bool {
		p := pending(t, c, run.GetID())
		return len(p) == 1 && p[0].ConfirmationID == ps[0].ConfirmationID && pendingCount(t, c, run.GetID()) == 1
	})
	if got := target.paths(); got != "" {
		t.Fatalf("a call ran before every confirmation of its message was decided: %s", got)
	}
	if err := decideAs(t, c, cfg, st, ps[0].ConfirmationID, workflows.DecisionApprove, "bob", ""); err != nil {
		t.Fatalf("approve the first: %v", err)
	}
	res := result(t, run)
	if got := outcomeList(res); got != "web_fetch:executed web_fetch:executed" || res.Outcomes[0].Approver != "bob" || res.Outcomes[1].Approver != "alice" {
		t.Fatalf("outcomes = %s %+v", got, res.Outcomes)
	}
	if got := target.paths(); got != "/first /second" {
		t.Fatalf("the server saw %q, want both in call order", got)
	}
}

// An edit runs exactly the approver's arguments (the real HTTP server sees only the edited
// URL, never the original); the original is denied edited_by_approver; the audit shows both
// digests; the model gets one tool result for its call id, saying it was edited. The edit is
// sent with the CLI, `airlock edit`.
func TestEditRunsTheEditedArgumentsExactly(t *testing.T) {
	target := newHitServer(t)
	orig := fmt.Sprintf(`{"url":"%s/original"}`, target.URL)
	edited := fmt.Sprintf(`{"url":"%s/edited"}`, target.URL)
	model := newFakeModel(t, calls(call("c1", "web_fetch", orig)))
	c, cfg, st := liveModelStack(t, model)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "edit", Principal: "ops", Message: "fetch the page"})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	cmd := exec.Command(airlockBin, "edit", p.ConfirmationID, "--args", edited, "--credential", itCredentials["alice"])
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+cfg.Home, "AIRLOCK_DATABASE_URL="+cfg.DatabaseURL,
		"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "edited") {
		t.Fatalf("airlock edit: %v\n%s", err, out)
	}
	res := result(t, run)
	if got := outcomeList(res); got != "web_fetch:denied:edited_by_approver web_fetch:executed" {
		t.Fatalf("outcomes = %s", got)
	}
	e := res.Outcomes[1]
	if e.Origin != workflows.OriginApprover || e.EditOf != res.Outcomes[0].Seq || e.Approver != "alice" || string(e.Arguments) != edited {
		t.Fatalf("edited proposal = %+v", e)
	}
	if got := target.paths(); got != "/edited" {
		t.Fatalf("the server saw %q, want only the edited URL", got)
	}
	od, _ := canonical.Digest([]byte(orig))
	ed, _ := canonical.Digest([]byte(edited))
	rows, err := st.ListAudit(context.Background(), run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range rows {
		kinds = append(kinds, r.Outcome+":"+r.Reason)
		switch r.Outcome {
		case activities.AuditProposalEdited:
			if r.ArgsDigest != ed || r.OriginalDigest != od || r.Approver != "alice" || r.Seq != e.Seq {
				t.Fatalf("proposal_edited row = %+v", r)
			}
		case string(activities.OutcomeDenied):
			if r.ArgsDigest != od || r.Approver != "alice" {
				t.Fatalf("denied row = %+v", r)
			}
		case string(activities.OutcomeExecuted):
			if r.ArgsDigest != ed || r.Approver != "alice" {
				t.Fatalf("executed row = %+v", r)
			}
		}
	}
	if got := strings.Join(kinds, " "); got != "confirmation_issued: denied:edited_by_approver proposal_edited:edited_by_approver executed:" {
		t.Fatalf("audit = %s", got)
	}
	reqs := model.requests()
	last := wireMessages(t, reqs[len(reqs)-1])
	n := 0
	for _, m := range last {
		if m.Role == "tool" {
			n++
		}
	}
	env := toolResults(t, last)["c1"]
	if n != 1 || env.Outcome != activities.OutcomeExecuted || env.EditedBy != "alice" || env.Origin != workflows.OriginApprover || string(env.Arguments) != edited {
		t.Fatalf("%d tool messages; c1's = %+v", n, env)
	}
}

// An edit whose arguments fail validation is rejected at stage 2 and nothing runs.
func TestEditFailingValidationRunsNothing(t *testing.T) {
	target := newHitServer(t)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/original"}`, target.URL))))
	c, cfg, st := liveModelStack(t, model)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "edit-invalid", Principal: "ops", Message: "fetch the page"})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	if err := decideAs(t, c, cfg, st, p.ConfirmationID, workflows.DecisionEdit, "alice", `{"url":"`+target.URL+`/x","method":"DELETE"}`); err != nil {
		t.Fatalf("edit: %v", err)
	}
	res := result(t, run)
	if got := outcomeList(res); !strings.HasPrefix(got, "web_fetch:denied:edited_by_approver web_fetch:rejected:") ||
		res.Outcomes[1].Stage != activities.StageValidate || res.Outcomes[1].Origin != workflows.OriginApprover {
		t.Fatalf("outcomes = %s %+v", got, res.Outcomes)
	}
	if got := target.paths(); got != "" {
		t.Fatalf("the server saw %q; nothing may run", got)
	}
}

// On a four-eyes capability the requester's own edit is refused (approver_is_requester) and
// runs nothing; another approver's edit then runs, exactly as edited.
func TestEditByTheRequesterOnAFourEyesCapabilityIsRefused(t *testing.T) {
	e := newApprovalEnv(t)
	model := newFakeModel(t, calls(call("p1", "pay", `{"message":"pay mallory 500"}`)))
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("edit-four-eyes", 1, workflows.TurnRequest{Principal: "alice", Message: "pay"})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	edit := func(approver string) error {
		return approval.Decide(ctx, e.c, e.st, e.key, approval.Request{ConfirmationID: p.ConfirmationID, Decision: workflows.DecisionEdit,
			Approver: approver, Arguments: json.RawMessage(`{"message":"pay bob 5"}`), Signer: signer(t, approver)})
	}
	var ref *approval.RefusedError
	if err := edit("alice"); !errors.As(err, &ref) || ref.Code != activities.ApproverIsRequester || !ref.Reissued {
		t.Fatalf("the requester's edit = %v, want approver_is_requester", err)
	}
	if n := e.rec.total(); n != 0 {
		t.Fatalf("%d calls ran after a refused edit", n)
	}
	if err := edit("bob"); err != nil {
		t.Fatalf("bob's edit: %v", err)
	}
	res := result(t, run)
	if got := outcomeList(res); got != "pay:denied:edited_by_approver pay:executed" || res.Outcomes[1].Approver != "bob" {
		t.Fatalf("outcomes = %s %+v", got, res.Outcomes)
	}
	if got := e.rec.of("pay"); len(got) != 1 || got[0] != `{"message":"pay bob 5"}` {
		t.Fatalf("pay ran with %v", got)
	}
}
