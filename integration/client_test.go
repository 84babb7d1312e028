package integration

// The public client package (client/) against a real dev server, PostgreSQL and a worker, and
// what operators read of a turn in Temporal (memo preview, search attributes, summaries).

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
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/converter"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/workflows"
)

// A client app starts a turn whose call needs a confirmation, finds it among the pending
// confirmations (visibility + pending query), has a decision on other arguments refused as
// stale, approves it as an authenticated approver, and reads the result: the call ran once,
// approved by that approver, with citations and usage in the public contract types.
func TestClientStartListDecideResult(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>client page</title></head><body><p>client content</p></body></html>")
	}))
	defer target.Close()
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL))))
	tc, cfg, _ := liveModelStack(t, model)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl, err := client.New(ctx, tc, client.Options{TaskQueue: cfg.TaskQueue, DatabaseURL: cfg.StoreURL(), ClientCredentialFile: itStarterFile,
		ApproverKeyFile: cfg.KeyFile(), CredentialFile: itCredentials["alice"]})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	conv := "client-" + cfg.TaskQueue
	turn, err := cl.StartTurn(ctx, client.TurnRequest{Conversation: conv, Principal: "bob", Message: "fetch the client page"})
	if err != nil {
		t.Fatal(err)
	}
	if turn.ID != workflows.TurnWorkflowID(conv, 1) {
		t.Fatalf("turn id %s", turn.ID)
	}

	var p client.PendingConfirmation
	eventually(t, 60*time.Second, "the confirmation listed as pending", func() bool {
		ps, err := cl.ListPending(ctx, client.ListFilter{Conversation: conv})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == 1 {
			p = ps[0]
		}
		return len(ps) == 1
	})
	if p.WorkflowID != turn.ID || p.ToolName != "web_fetch" || p.ArgsDigest == "" || !strings.Contains(string(p.Arguments), target.URL) {
		t.Fatalf("pending = %+v", p)
	}
	if direct, err := turn.Pending(ctx); err != nil || len(direct) != 1 || direct[0].ConfirmationID != p.ConfirmationID {
		t.Fatalf("turn.Pending = %+v, %v", direct, err)
	}

	// A decision on arguments other than the pending ones never approves them.
	err = cl.Decide(ctx, client.DecideRequest{ConfirmationID: p.ConfirmationID, Decision: client.Approve, ArgsDigest: "sha256:0000"})
	var de *client.DecisionError
	if !errors.Is(err, client.ErrStaleDigest) || !errors.As(err, &de) || de.Code != "stale_digest" {
		t.Fatalf("stale decision: %v", err)
	}
	if err := cl.Decide(ctx, client.DecideRequest{ConfirmationID: p.ConfirmationID, Decision: client.Approve, ArgsDigest: p.ArgsDigest}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	// The same confirmation cannot be decided twice; the loser learns who won.
	err = cl.Decide(ctx, client.DecideRequest{ConfirmationID: p.ConfirmationID, Decision: client.Deny, Reason: "late"})
	if !errors.Is(err, client.ErrNotPending) || !errors.As(err, &de) || de.DecidedBy != "alice" {
		t.Fatalf("second decision: %v (%+v)", err, de)
	}

	res, err := turn.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var usage client.Usage = res.Usage
	if res.Status != client.StatusCompleted || len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != client.OutcomeExecuted ||
		res.Outcomes[0].Approver != "alice" || hits.Load() != 1 || usage.InputTokens == 0 {
		t.Fatalf("result = %+v (hits %d)", res, hits.Load())
	}
	var cite client.Citation = res.Citations[0]
	if cite.Title != "client page" {
		t.Fatalf("citation = %+v", cite)
	}
	// A handle from the id alone reads the same result.
	if again, err := cl.Turn(turn.ID).Result(ctx); err != nil || again.WorkflowID != turn.ID {
		t.Fatalf("Turn(id).Result = %+v, %v", again, err)
	}
	// Without the decision options, Decide says which option is missing.
	bare, err := client.New(ctx, tc, client.Options{TaskQueue: cfg.TaskQueue})
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.Decide(ctx, client.DecideRequest{ConfirmationID: p.ConfirmationID, Decision: client.Approve}); !errors.Is(err, client.ErrNotConfigured) {
		t.Fatalf("unconfigured Decide: %v", err)
	}
}

// What an operator reads of a turn in Temporal is escaped and bounded: the memo preview of a
// hostile user message shows its bidi override and control characters as <U+XXXX> and is cut
// to workflows.PreviewLimit runes; the search attributes name the conversation, principal and
// status; no activity or timer summary in the history carries a raw control or bidi character
// of a hostile tool name, and each is bounded (workflows.SummaryLimit; the summaries' own
// escaping and cutting is unit-tested in internal/display, since the strict parser keeps
// hostile names from reaching an activity today).
func TestOperatorMemoAndSummariesAreEscaped(t *testing.T) {
	hostileTool := "web_fetch\u202e\x1b[2J" + strings.Repeat("x", 200)
	name, _ := json.Marshal(hostileTool)           // call's %q would write Go escapes, not JSON
	unknownTool := "zz_" + strings.Repeat("y", 61) // a valid name no capability has: rejected at resolve
	model := newFakeModel(t, calls(`{"id":"c1","type":"function","function":{"name":`+string(name)+`,"arguments":"{\"url\":\"https://example.com/\"}"}}`,
		call("c2", unknownTool, `{"url":"https://example.com/"}`)))
	tc, cfg, _ := liveModelStack(t, model)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.New(ctx, tc, client.Options{TaskQueue: cfg.TaskQueue, DatabaseURL: cfg.StoreURL(), ClientCredentialFile: itStarterFile})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	conv := "ops-" + cfg.TaskQueue
	msg := "pay \u202eevil\x1b[2J\r\x07 " + strings.Repeat("long ", 100)
	turn, err := cl.StartTurn(ctx, client.TurnRequest{Conversation: conv, Principal: "carol", Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	d, err := tc.DescribeWorkflow(ctx, turn.ID, "") // the DescribeWorkflowExecution RPC
	if err != nil {
		t.Fatal(err)
	}
	desc := d.RawResponse
	var preview string
	field := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[workflows.MemoPreview]
	if err := converter.GetDefaultDataConverter().FromPayload(field, &preview); err != nil {
		t.Fatalf("memo preview: %v", err)
	}
	if !strings.HasPrefix(preview, "pay <U+202E>evil<U+001B>[2J<U+000D><U+0007> long") || !strings.HasSuffix(preview, "…") {
		t.Fatalf("preview not escaped: %q", preview)
	}
	if n := utf8.RuneCountInString(preview); n > workflows.PreviewLimit {
		t.Fatalf("preview has %d runes, limit %d", n, workflows.PreviewLimit)
	}
	for _, raw := range []string{"\u202e", "\x1b", "\r", "\a"} {
		if strings.Contains(preview, raw) {
			t.Fatalf("preview holds raw %q", raw)
		}
	}
	sa := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	for name, want := range map[string]string{workflows.AttrConversation.GetName(): conv, workflows.AttrPrincipal.GetName(): "carol"} {
		var got string
		if err := converter.GetDefaultDataConverter().FromPayload(sa[name], &got); err != nil || got != want {
			t.Fatalf("search attribute %s = %q (%v), want %q", name, got, err, want)
		}
	}

	res, err := turn.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The strict parser refuses the hostile name before any activity names it (invalid_name);
	// the valid unknown one reaches admit and is rejected at resolve.
	if len(res.Outcomes) != 2 || res.Outcomes[0].Outcome != client.OutcomeParseFailed || res.Outcomes[1].Outcome != client.OutcomeRejected {
		t.Fatalf("outcomes = %s", outcomeList(res))
	}
	// Every summary in the history is escaped and bounded; the record summary of the rejected
	// call names the tool visibly.
	it := tc.GetWorkflowHistory(ctx, turn.ID, "", false, 0)
	var summaries []string
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if p := e.GetUserMetadata().GetSummary(); p != nil {
			var s string
			if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
				t.Fatal(err)
			}
			summaries = append(summaries, s)
		}
	}
	admit := ""
	for _, s := range summaries {
		if strings.ContainsAny(s, "\u202e\x1b") || utf8.RuneCountInString(s) > workflows.SummaryLimit {
			t.Errorf("summary %q is raw or too long", s)
		}
		if strings.HasPrefix(s, "record rejected #") {
			admit = s
		}
	}
	if want := display.Summary("record rejected #2 "+unknownTool, workflows.SummaryLimit); admit != want {
		t.Fatalf("record summary = %q, want %q; all: %q", admit, want, summaries)
	}
}

// The example client app (examples/client, built on client/ only) runs a turn end to end
// against a real worker: it starts the turn, shows the confirmation, approves it with the
// approver credential named by AIRLOCK_CREDENTIAL, and prints the result.
func TestExampleClientRunsATurn(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "<html><head><title>example page</title></head><body>hello</body></html>")
	}))
	defer target.Close()
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/x"}`, target.URL))))
	_, cfg, _ := liveModelStack(t, model)
	bin := filepath.Join(t.TempDir(), "example-client")
	build := exec.Command("go", "build", "-o", bin, "./examples/client")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the example: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-conversation", "example-"+cfg.TaskQueue, "-principal", "ops", "-decide", "approve", "-message", "fetch the example page")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace,
		"AIRLOCK_HOME="+cfg.Home, "AIRLOCK_DATABASE_URL="+cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE="+cfg.TaskQueue,
		"AIRLOCK_CREDENTIAL="+itCredentials["alice"], "AIRLOCK_APPROVER_KEY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example client: %v\n%s", err, out)
	}
	for _, want := range []string{"confirmation needed", "web_fetch", "approved", "#1 web_fetch: executed decided by alice", "assistant: all done"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("example output lacks %q:\n%s", want, out)
		}
	}
	if hits.Load() != 1 {
		t.Errorf("page fetched %d times", hits.Load())
	}
}
