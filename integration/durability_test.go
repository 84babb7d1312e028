package integration

// Every case of ../shared/cases/approval-durability.jsonl as an integration test against the
// real Temporal dev server started in TestMain, a fresh PostgreSQL schema per test and a model
// served over real HTTP in the OpenAI wire format. Each test reads its case by id and uses its
// tool calls, arguments and call ids. The case tools (record_value, run_shell, bash, …) are not
// in Airlock's registry, so most tests run an in-process worker whose registry is loaded from
// durabilityRegistry below; its effectful capabilities count every invocation. B28 runs the
// real `airlock worker` binary with web_fetch against a local server instead, and B30 uses the
// real `airlock approve` command as the approver surface.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// ---------------------------------------------------------------------------------------------
// The case file

type durabilityCase struct {
	ID     string          `json:"id"`
	Source string          `json:"source"`
	Kind   string          `json:"kind"`
	Input  json.RawMessage `json:"input"`
	Expect struct {
		Summary string `json:"summary"`
	} `json:"expect"`
	Note string `json:"note"`
}

func durabilityCasesPath() string {
	return filepath.Join(repoRoot, "..", "shared", "cases", "approval-durability.jsonl")
}

func readDurabilityCases(t *testing.T) []durabilityCase {
	t.Helper()
	f, err := os.Open(durabilityCasesPath())
	if err != nil {
		t.Fatalf("the case file is missing: %v", err)
	}
	defer f.Close()
	var out []durabilityCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var c durabilityCase
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%s line %d: %v", durabilityCasesPath(), n, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// durabilityCaseInput reads case id and decodes its input into in.
func durabilityCaseInput(t *testing.T, id string, in any) durabilityCase {
	t.Helper()
	for _, c := range readDurabilityCases(t) {
		if c.ID != id {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(string(c.Input)))
		dec.DisallowUnknownFields() // a field this test does not map would go unnoticed otherwise
		if err := dec.Decode(in); err != nil {
			t.Fatalf("case %s input: %v", id, err)
		}
		t.Logf("case %s (%s, %s): expect %q", c.ID, c.Kind, c.Source, c.Expect.Summary)
		return c
	}
	t.Fatalf("case %s is not in %s", id, durabilityCasesPath())
	return durabilityCase{}
}

// openAIToolCall is a tool call in the OpenAI wire shape, as the cases write it.
type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func (c openAIToolCall) raw(t *testing.T) string {
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// responseCalls returns the tool calls of an OpenAI chat-completion body.
func responseCalls(t *testing.T, body json.RawMessage) []openAIToolCall {
	t.Helper()
	var r struct {
		Choices []struct {
			Message struct {
				ToolCalls []openAIToolCall `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("not a one-choice chat completion: %v %s", err, body)
	}
	return r.Choices[0].Message.ToolCalls
}

// TestBCaseFileFullyCovered: every case of approval-durability.jsonl has a test in this file.
func TestBCaseFileFullyCovered(t *testing.T) {
	covered := map[string]string{
		"B25": "TestB25ApprovalBoundToReviewedArguments",
		"B27": "TestB27DuplicateCallIDsFailParseBeforeAnyApproval",
		"B28": "TestB28ResumeAfterPartialApprovalRunsOnlyTheRemainingCall",
		"B29": "TestB29EffectBeforeFailedInferenceIsNeverReExecuted",
		"B30": "TestB30UndeliveredApprovalLeavesConfirmationActionable",
		"B31": "TestB31CrashBetweenDispatchAndResultIsOutcomeUnknownPerID",
		"B33": "TestB33ApprovalSurvivesWorkerRestart",
		"B34": "TestB34ToolResultInjectionDoesNotChangeTheGate",
	}
	cases := readDurabilityCases(t)
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range cases {
		if covered[c.ID] == "" {
			t.Errorf("case %s (%s) has no integration test", c.ID, c.Source)
		}
		if c.Expect.Summary == "" {
			t.Errorf("case %s has no expect.summary", c.ID)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// A worker with a test registry

// durabilityRegistry declares the case tools. Only list_issues is local and read-only, so it is
// the only one that runs without a confirmation.
var durabilityRegistry = `{"schema/v":"capability-registry.v1","revision":"durability-test.1","entries":[` + strings.Join([]string{
	durEntry("test.record-value", "record_value", "external-write", "external", "Record a value in the external ledger."),
	durEntry("test.archive-record", "archive_record", "external-write", "external", "Archive a record."),
	durEntry("test.delete-record", "delete_record", "external-write", "external", "Delete a record."),
	durEntry("test.run-shell", "run_shell", "local-write", "local", "Run a shell command on the host."),
	durEntry("test.cleanup-temp", "cleanup_temp", "local-write", "local", "Remove temporary files."),
	durEntry("test.bash", "bash", "local-write", "local", "Run a bash command."),
	durEntry("test.list-issues", "list_issues", "none", "local", "List the open issues of a repository (local mirror)."),
	durEntry("test.get-file-contents", "get_file_contents", "none", "external", "Read a file of a repository."),
}, ",") + `]}`

func durEntry(id, tool, sideEffect, network, description string) string {
	return fmt.Sprintf(`{"capability/id":%q,"version":1,"owner":"tests","surfaces":["host-local"],"wire/name":"app/%s","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":%q,"description":%q,"side-effect":%q,"network":%q,"per-turn/cap":5,"timeout":"10s","model-visible":true%s}}`,
		id, id, tool, description, sideEffect, network, testDestination(sideEffect, network))
}

type messageArgs struct {
	Message string `json:"message" validate:"required"`
}
type recordArgs struct {
	Record string `json:"record" validate:"required"`
}
type shellArgs struct {
	Cmd string `json:"cmd" validate:"required"`
}
type cleanupArgs struct{}
type bashArgs struct {
	Command string `json:"command" validate:"required"`
}
type repoArgs struct {
	Owner string `json:"owner" validate:"required"`
	Repo  string `json:"repo" validate:"required"`
}
type fileArgs struct {
	Owner string `json:"owner" validate:"required"`
	Repo  string `json:"repo" validate:"required"`
	Path  string `json:"path" validate:"required"`
}

// invocations records every capability invocation as canonical JSON arguments, per tool.
type invocations struct {
	mu     sync.Mutex
	byTool map[string][]string
}

func (r *invocations) add(tool string, args json.RawMessage) {
	c, err := canonical.Canonicalize(args)
	if err != nil {
		c = args
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byTool == nil {
		r.byTool = map[string][]string{}
	}
	r.byTool[tool] = append(r.byTool[tool], string(c))
}

func (r *invocations) of(tool string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.byTool[tool]...)
}

func (r *invocations) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.byTool {
		n += len(v)
	}
	return n
}

func canon(t *testing.T, args string) string {
	t.Helper()
	c, err := canonical.Canonicalize([]byte(args))
	if err != nil {
		t.Fatalf("canonicalize %s: %v", args, err)
	}
	return string(c)
}

// durEnv is one test's world: a Temporal client, a fresh PostgreSQL schema, a private task
// queue, an approver key under home (where `airlock approve` finds it) and the test registry.
type durEnv struct {
	t      *testing.T
	c      client.Client
	home   string
	dbURL  string
	queue  string
	key    token.Key
	st     *store.Store
	reg    *registry.Registry
	rec    *invocations
	issues json.RawMessage // what list_issues returns
}

func newDurEnv(t *testing.T) *durEnv {
	t.Helper()
	e := &durEnv{t: t, c: dial(t), home: t.TempDir(), dbURL: freshDB(t), queue: taskQueue(t), rec: &invocations{},
		issues: json.RawMessage(`[]`)}
	var err error
	if e.key, err = token.LoadOrCreateKey(config.Config{Home: e.home}.KeyFile()); err != nil {
		t.Fatal(err)
	}
	if e.st, err = store.Open(context.Background(), e.dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.st.Close() })
	if e.reg, err = registry.Load(registry.WithStructuralPolicy(registry.Source{Name: "durability-test", Data: []byte(durabilityRegistry)}), e.impls()); err != nil {
		t.Fatal(err)
	}
	return e
}

func effect[A any](e *durEnv, id, tool, data string) registry.Implementation {
	return registry.Typed(id, 1, func(_ context.Context, _ *A, inv registry.Invocation) (registry.Output, error) {
		e.rec.add(tool, inv.Arguments)
		return registry.Output{Data: json.RawMessage(data)}, nil
	})
}

func (e *durEnv) impls() []registry.Implementation {
	return []registry.Implementation{
		effect[messageArgs](e, "test.record-value", "record_value", `{"recorded":true}`),
		effect[recordArgs](e, "test.archive-record", "archive_record", `{"archived":true}`),
		effect[recordArgs](e, "test.delete-record", "delete_record", `{"deleted":true}`),
		effect[shellArgs](e, "test.run-shell", "run_shell", `{"result":"exit 0"}`),
		effect[cleanupArgs](e, "test.cleanup-temp", "cleanup_temp", `{"removed":3}`),
		effect[bashArgs](e, "test.bash", "bash", `{"exit":0}`),
		registry.Typed("test.list-issues", 1, func(_ context.Context, _ *repoArgs, inv registry.Invocation) (registry.Output, error) {
			e.rec.add("list_issues", inv.Arguments)
			return registry.Output{Data: e.issues}, nil
		}),
		effect[fileArgs](e, "test.get-file-contents", "get_file_contents", `{"content":"# private README"}`),
	}
}

// openAI is the live adapter pointed at a test model server.
func (e *durEnv) openAI(baseURL string) inference.Provider {
	p, err := inference.NewOpenAI(inference.OpenAIConfig{BaseURL: baseURL + "/v1", APIKey: "k", Model: "fake"})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// startWorker runs an in-process worker on the env's queue with its own store connection and
// provider; stop (also run at cleanup) stops it and releases the store.
func (e *durEnv) startWorker(p inference.Provider) (stop func()) {
	e.t.Helper()
	st, err := store.Open(context.Background(), e.dbURL)
	if err != nil {
		e.t.Fatal(err)
	}
	acts := &activities.Activities{Registry: e.reg, Store: st, Live: p, ApproverKey: e.key, Approvers: testApprovers(), Clients: testClients()}
	w := workers.New(e.c, acts, e.queue)
	if err := w.Start(); err != nil {
		st.Close()
		e.t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { w.Stop(); st.Close() }) }
	e.t.Cleanup(stop)
	return stop
}

// startTurn starts turn seq of conversation conv (made unique to the test) and returns the run
// and the conversation name.
func (e *durEnv) startTurn(conv string, seq int, req workflows.TurnRequest, opts ...func(*client.StartWorkflowOptions)) (client.WorkflowRun, string) {
	e.t.Helper()
	req.Conversation = conv + "-" + e.queue
	o := client.StartWorkflowOptions{ID: workflows.TurnWorkflowID(req.Conversation, seq), TaskQueue: e.queue,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrConversation.ValueSet(req.Conversation))}
	for _, f := range opts {
		f(&o)
	}
	run, err := e.c.ExecuteWorkflow(context.Background(), o, workers.TurnWorkflowName, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return run, req.Conversation
}

// tokenOf opens a confirmation's current sealed token as an approver surface does.
func (e *durEnv) tokenOf(confirmationID string) string {
	e.t.Helper()
	row, err := e.st.GetConfirmation(context.Background(), confirmationID)
	if err != nil {
		e.t.Fatal(err)
	}
	tok, err := token.Open(e.key, row.SealedToken, token.SealAAD(confirmationID, row.Generation))
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func (e *durEnv) signal(workflowID string, d workflows.Decision) {
	e.t.Helper()
	if err := e.c.SignalWorkflow(context.Background(), workflowID, "", workflows.SignalConfirmation, d); err != nil {
		e.t.Fatal(err)
	}
}

// sign signs decision on p with p's current token (internal/approval), without sending it.
func (e *durEnv) sign(p workflows.PendingConfirmation, decision, approver string) workflows.Decision {
	e.t.Helper()
	row, err := e.st.GetConfirmation(context.Background(), p.ConfirmationID)
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := approval.Sign(e.key, row, approval.Request{ConfirmationID: p.ConfirmationID, Decision: decision,
		Approver: approver, Reason: "test decision", Signer: signer(e.t, approver)}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// decide signs decision on p and signals the turn; it returns the decision as sent.
func (e *durEnv) decide(p workflows.PendingConfirmation, decision, approver string) workflows.Decision {
	e.t.Helper()
	d := e.sign(p, decision, approver)
	e.signal(p.WorkflowID, d)
	return d
}

// audit is a turn's audit without its confirmation_issued rows (outcomeRows): what became of
// each call, which the at-most-once cases count. auditAll keeps them.
func (e *durEnv) audit(workflowID string) []store.AuditEvent {
	e.t.Helper()
	return outcomeRows(e.auditAll(workflowID))
}

// auditAll is every audit row of a turn, in order.
func (e *durEnv) auditAll(workflowID string) []store.AuditEvent {
	e.t.Helper()
	rows, err := e.st.ListAudit(context.Background(), workflowID)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

func (e *durEnv) refusals(workflowID string) []string {
	return e.auditReasons(workflowID, activities.AuditConfirmationRefused)
}

// auditReasons lists the reasons of a turn's audit rows of kind outcome, in order.
func (e *durEnv) auditReasons(workflowID, outcome string) []string {
	var out []string
	for _, r := range e.audit(workflowID) {
		if r.Outcome == outcome {
			out = append(out, r.Reason)
		}
	}
	return out
}

// countRows counts the rows of a store table in the test's schema.
func (e *durEnv) countRows(table string) int {
	e.t.Helper()
	db, err := sqlx.Open("postgres", e.dbURL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.Get(&n, "SELECT COUNT(*) FROM "+table); err != nil {
		e.t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// ---------------------------------------------------------------------------------------------
// Reading what the model received

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// text is the message content whether it went out as a string or as content parts.
func (m wireMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(m.Content)
}

func wireMessages(t *testing.T, body string) []wireMessage {
	t.Helper()
	var req struct {
		Messages []wireMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatalf("model request is not JSON: %v", err)
	}
	return req.Messages
}

// toolResults maps tool_call_id to the decoded envelope of every tool message of a request.
func toolResults(t *testing.T, msgs []wireMessage) map[string]activities.Envelope {
	t.Helper()
	out := map[string]activities.Envelope{}
	for _, m := range msgs {
		if m.Role != "tool" {
			continue
		}
		var env activities.Envelope
		if err := json.Unmarshal([]byte(m.text()), &env); err != nil {
			t.Fatalf("tool message for %s is not an Airlock envelope: %v\n%s", m.ToolCallID, err, m.text())
		}
		out[m.ToolCallID] = env
	}
	return out
}

// newSeqModel answers the n-th request it receives (0-based, across turns) with reply(n).
func newSeqModel(t *testing.T, reply func(n int) (status int, body string)) *modelServer {
	return newModelServer(t, func(n int, _ []byte) (int, string) { return reply(n) })
}

// hasAppErrorType reports whether err's chain holds an application error of type typ.
func hasAppErrorType(err error, typ string) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if ae, ok := e.(*temporal.ApplicationError); ok && ae.Type() == typ {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------------------------
// B25 approval_then_replay → DENY_EXECUTION:approval_mismatch

// The approval is bound to the reviewed call's canonical-argument digest. A replayed response
// with the same call id and changed arguments is a new proposal with its own confirmation: the
// approved (consumed) token, a re-sent approval for call_1, and a token bound to the reviewed
// arguments of a stale approver page are all refused and audited, and the changed call does not
// run unless separately approved. Only the reviewed value is ever executed.
func TestB25ApprovalBoundToReviewedArguments(t *testing.T) {
	t.Parallel()
	var in struct {
		Scenario        string         `json:"scenario"`
		PendingApproval openAIToolCall `json:"pending_approval"`
		HumanDecision   struct {
			ToolCallID string `json:"tool_call_id"`
			Decision   string `json:"decision"`
		} `json:"human_decision"`
		ReplayedModelResponse json.RawMessage `json:"replayed_model_response"`
	}
	kase := durabilityCaseInput(t, "B25", &in)
	if in.HumanDecision.ToolCallID != in.PendingApproval.ID || in.HumanDecision.Decision != "allow_once" {
		t.Fatalf("case B25 changed shape: %+v", in.HumanDecision)
	}
	replayed := responseCalls(t, in.ReplayedModelResponse)
	if len(replayed) != 1 || replayed[0].ID != in.PendingApproval.ID || replayed[0].Function.Name != in.PendingApproval.Function.Name {
		t.Fatalf("case B25: the replayed call must reuse the reviewed call's id and name: %+v", replayed)
	}
	reviewed, changed := canon(t, in.PendingApproval.Function.Arguments), canon(t, replayed[0].Function.Arguments)
	if reviewed == changed {
		t.Fatal("case B25: the replayed arguments must differ")
	}

	e := newDurEnv(t)
	model := newFakeModel(t, calls(in.PendingApproval.raw(t)), string(in.ReplayedModelResponse))
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("b25", 1, workflows.TurnRequest{Message: "record the reviewed value"})
	wf := run.GetID()
	seen := map[string]bool{}

	p1 := waitPending(t, e.c, wf, seen)
	if p1.CallID != in.PendingApproval.ID || p1.ToolName != "record_value" || canon(t, string(p1.Arguments)) != reviewed {
		t.Fatalf("the approver must review call_1 exactly as emitted: %+v", p1)
	}
	first := e.decide(p1, workflows.DecisionApprove, "alice") // allow_once

	p2 := waitPending(t, e.c, wf, seen)
	if p2.CallID != in.PendingApproval.ID || canon(t, string(p2.Arguments)) != changed {
		t.Fatalf("the replayed call must be a new proposal showing the changed arguments: %+v", p2)
	}
	if p2.ConfirmationID == p1.ConfirmationID || p2.ArgsDigest == p1.ArgsDigest || p2.Seq == p1.Seq {
		t.Fatalf("same call id, changed arguments: a new confirmation with a new digest is required\np1=%+v\np2=%+v", p1, p2)
	}
	if got := e.rec.of("record_value"); len(got) != 1 || got[0] != reviewed {
		t.Fatalf("record_value ran with %v before the replay, want only the reviewed value", got)
	}

	waitRefusals := func(n int) {
		eventually(t, 30*time.Second, fmt.Sprintf("%d refused confirmation attempts audited", n), func() bool {
			if got := e.rec.of("record_value"); len(got) > 1 {
				t.Fatalf("the changed call ran (%v): a token for another proposal authorized it", got)
			}
			return len(e.refusals(wf)) >= n
		})
	}
	// 1. The approval given for call_1 (as anyone can read it from history) re-aimed at the
	// replayed call.
	reaimed := first
	reaimed.ConfirmationID = p2.ConfirmationID
	e.signal(wf, reaimed)
	waitRefusals(1)
	// 2. The same allow_once decision re-sent for the first confirmation, as a replaying client would.
	e.signal(wf, first)
	waitRefusals(2)
	// 3. A fresh, unconsumed token bound to this very turn and proposal but to the reviewed
	// arguments' digest: what a stale approver page showing the reviewed value would hold.
	stale, hash, err := token.Mint()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateConfirmation(context.Background(), store.Confirmation{ID: "cf-stale-page-b25", TokenHash: hash,
		WorkflowID: wf, RunID: run.GetRunID(), Seq: p2.Seq, CallID: p2.CallID, CapabilityID: p2.CapabilityID, Version: p2.Version,
		ArgsDigest: p1.ArgsDigest, Arguments: p1.Arguments, Display: p1.Display, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	staleNonce, err := token.NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	staleDecision := workflows.Decision{ConfirmationID: p2.ConfirmationID, Decision: workflows.DecisionApprove, Approver: "alice", Nonce: staleNonce}
	staleDecision.MAC = token.SignDecision(stale, token.Decision{ConfirmationID: p2.ConfirmationID, Decision: staleDecision.Decision,
		Approver: "alice", ArgsDigest: p1.ArgsDigest, Nonce: staleNonce})
	e.signal(wf, staleDecision)
	waitRefusals(3)

	want := []string{activities.NonceReplayed, activities.RefusalNotPending, activities.DecisionMACInvalid}
	if got := e.refusals(wf); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("refusals = %v, want %v", got, want)
	}
	for _, r := range e.audit(wf) {
		if r.Outcome == activities.AuditConfirmationRefused && (r.Seq != p2.Seq || r.ArgsDigest != p2.ArgsDigest || r.Stage != string(activities.StageConfirm)) {
			t.Fatalf("a refusal must be audited against the waiting (changed) proposal: %+v", r)
		}
	}
	if ps := pending(t, e.c, wf); len(ps) != 1 || ps[0].ConfirmationID != p2.ConfirmationID {
		t.Fatalf("after the refusals the changed call must still wait for its own decision: %+v", ps)
	}
	if got := e.rec.of("record_value"); len(got) != 1 {
		t.Fatalf("record_value ran %d times: an approval of the reviewed call authorized the changed one", len(got))
	}

	// The human, shown the changed value, does not approve it.
	e.decide(p2, workflows.DecisionDeny, "alice")
	res := result(t, run)
	if got := outcomeList(res); got != "record_value:executed record_value:denied:denied_by_approver" {
		t.Fatalf("outcomes = %s", got)
	}
	if got := e.rec.of("record_value"); len(got) != 1 || got[0] != reviewed {
		t.Fatalf("%s: executed values = %v, want only the reviewed value %s", kase.Expect.Summary, got, reviewed)
	}
	if len(res.Results) != 1 || res.Results[0].Seq != p1.Seq {
		t.Fatalf("results = %+v", res.Results)
	}
	for _, id := range []string{p1.ConfirmationID, p2.ConfirmationID} {
		row, err := e.st.GetConfirmation(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{p1.ConfirmationID: store.DecisionApproved, p2.ConfirmationID: store.DecisionDenied}[id]; row.Decision != want {
			t.Fatalf("confirmation %s decision = %q, want %q", id, row.Decision, want)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// B27 duplicate_id_approval → PARSE_FAIL:duplicate_tool_call_id before any approval

// Two calls share the id "dup": both fail to parse with duplicate_call_id; no confirmation is
// issued (so no single approval can bind to both) and nothing executes.
func TestB27DuplicateCallIDsFailParseBeforeAnyApproval(t *testing.T) {
	t.Parallel()
	var in struct {
		Scenario      string          `json:"scenario"`
		ModelResponse json.RawMessage `json:"model_response"`
		Approvals     map[string]bool `json:"approvals"`
	}
	durabilityCaseInput(t, "B27", &in)
	cs := responseCalls(t, in.ModelResponse)
	if len(cs) != 2 || cs[0].ID != cs[1].ID || !in.Approvals[cs[0].ID] {
		t.Fatalf("case B27 changed shape: %+v", cs)
	}

	e := newDurEnv(t)
	model := newFakeModel(t, string(in.ModelResponse)) // served byte for byte
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("b27", 1, workflows.TurnRequest{Message: "archive record r-1"})
	res := result(t, run)

	if len(res.Outcomes) != 2 {
		t.Fatalf("outcomes = %s", outcomeList(res))
	}
	for i, o := range res.Outcomes {
		if o.Outcome != activities.OutcomeParseFailed || o.Reason != "duplicate_call_id" || o.Stage != activities.StageParse ||
			o.CallID != cs[i].ID || o.ConfirmationID != "" || o.CapabilityID != "" {
			t.Fatalf("call %d (%s) = %+v, want parse_failed:duplicate_call_id with no confirmation", i, cs[i].Function.Name, o)
		}
	}
	if ps := pending(t, e.c, run.GetID()); len(ps) != 0 {
		t.Fatalf("pending = %+v", ps)
	}
	if n := e.countRows("confirmations"); n != 0 {
		t.Fatalf("%d confirmations were issued; the approval %v must have nothing to bind to", n, in.Approvals)
	}
	if n := e.rec.total(); n != 0 {
		t.Fatalf("capabilities ran %d times: archive=%v delete=%v", n, e.rec.of("archive_record"), e.rec.of("delete_record"))
	}
	if n, err := e.st.CountExecutions(context.Background(), ""); err != nil || n != 0 {
		t.Fatalf("execution ledger rows = %d (%v)", n, err)
	}
	rows := e.audit(run.GetID())
	if len(rows) != 2 {
		t.Fatalf("audit rows = %d, want one parse_failed row per call", len(rows))
	}
	for _, r := range rows {
		if r.Outcome != string(activities.OutcomeParseFailed) || r.Reason != "duplicate_call_id" {
			t.Fatalf("audit row %+v", r)
		}
	}
	// The model is told, for the id it used, that neither call ran.
	reqs := model.requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d", len(reqs))
	}
	// Both failures are reported as Airlock notes, and the shared id appears in no tool call or
	// tool result of the context: providers reject two calls or results under one id, which
	// would break every later request of the conversation.
	n := 0
	for _, m := range wireMessages(t, reqs[1]) {
		if m.Role == "tool" && m.ToolCallID == cs[0].ID {
			t.Fatalf("the shared id %q must not be answered as a tool result: %+v", cs[0].ID, m)
		}
		if m.Role == "system" && strings.Contains(m.text(), `"reason":"duplicate_call_id"`) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the model must be told of each duplicate_call_id failure, got %d notes", n)
	}
	if strings.Contains(reqs[1], `"id":"`+cs[0].ID+`"`) {
		t.Fatalf("the shared id must not be echoed as a tool call: %s", reqs[1])
	}
}

// ---------------------------------------------------------------------------------------------
// B28 resume_after_partial_approval → EXECUTE only call_2

// One response with two effectful calls. call_1 is approved and executed; the `airlock worker`
// process is killed while call_2 awaits approval; a new worker process takes over, call_2 is
// approved and runs, and call_1 is not run again. web_fetch (external, always confirmed) stands
// in for the case's tools: each call fetches /<tool>?<arguments> from a local server that
// counts hits.
func TestB28ResumeAfterPartialApprovalRunsOnlyTheRemainingCall(t *testing.T) {
	t.Parallel()
	var in struct {
		Scenario  string           `json:"scenario"`
		ToolCalls []openAIToolCall `json:"tool_calls"`
		Ledger    []struct {
			ToolCallID string `json:"tool_call_id"`
			State      string `json:"state"`
			Result     string `json:"result"`
		} `json:"ledger"`
		Resume struct {
			Approve []string `json:"approve"`
		} `json:"resume"`
	}
	durabilityCaseInput(t, "B28", &in)
	if len(in.ToolCalls) != 2 || len(in.Resume.Approve) != 1 || in.Resume.Approve[0] != in.ToolCalls[1].ID {
		t.Fatalf("case B28 changed shape: %+v", in)
	}
	first, second := in.ToolCalls[0], in.ToolCalls[1]

	var mu sync.Mutex
	hits := map[string]int{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[strings.TrimPrefix(r.URL.Path, "/")]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>"+r.URL.Path+"</title></head><body><p>ok "+r.URL.RawQuery+"</p></body></html>")
	}))
	defer target.Close()
	hitsOf := func(tool string) int { mu.Lock(); defer mu.Unlock(); return hits[tool] }
	fetch := func(c openAIToolCall) string {
		var args map[string]string
		if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
			t.Fatalf("case B28 %s arguments: %v", c.ID, err)
		}
		q := url.Values{}
		for k, v := range args {
			q.Set(k, v)
		}
		b, _ := json.Marshal(map[string]string{"url": target.URL + "/" + c.Function.Name + "?" + q.Encode()})
		return call(c.ID, "web_fetch", string(b))
	}
	model := newFakeModel(t, calls(fetch(first), fetch(second)))
	c := dial(t)
	cfg := testConfig(t)
	env := []string{
		"TEMPORAL_ADDRESS=" + devServer.Address, "TEMPORAL_NAMESPACE=" + devServer.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue,
		"AIRLOCK_OPENAI_BASE_URL=" + model.URL + "/v1", "AIRLOCK_OPENAI_API_KEY=test", "AIRLOCK_OPENAI_MODEL=fake",
		"AIRLOCK_FETCH_ALLOW=127.0.0.0/8", "AIRLOCK_REGISTRY_LAYERS=", "AIRLOCK_APPROVER_KEY=", "AIRLOCK_APPROVER_KEY_FILE=",
	}
	w1 := startWorkerProcess(t, env)
	st := openStore(t, cfg)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "b28", Message: "send the message and open the ticket"})
	seen := map[string]bool{}

	// Both calls of the message wait for a human together (batch confirmations); call_1 is
	// approved, then the worker dies with call_2 still awaiting its decision: the ledger state
	// of the case.
	p1 := waitPending(t, c, run.GetID(), seen)
	p2 := waitPending(t, c, run.GetID(), seen)
	if p1.CallID != first.ID || p2.CallID != second.ID {
		t.Fatalf("confirmations = %+v, %+v, want %s then %s", p1, p2, first.ID, second.ID)
	}
	decide(t, c, cfg, st, p1.ConfirmationID, workflows.DecisionApprove, "alice")
	eventually(t, 30*time.Second, "call_1's approval is judged", func() bool {
		ps := pending(t, c, run.GetID())
		return len(ps) == 1 && ps[0].ConfirmationID == p2.ConfirmationID
	})
	if hitsOf(first.Function.Name) != 0 || hitsOf(second.Function.Name) != 0 {
		t.Fatalf("before the crash: %v (nothing runs before every call of the message is decided)", hits)
	}
	w1.kill(t)

	w2 := startWorkerProcess(t, env)
	decide(t, c, cfg, st, p2.ConfirmationID, workflows.DecisionApprove, "alice") // resume: approve call_2
	res := result(t, run)
	if got := outcomeList(res); got != "web_fetch:executed web_fetch:executed" || res.EndReason != "answered" {
		t.Fatalf("outcomes = %s (%s)\nworker 1:\n%s\nworker 2:\n%s", got, res.EndReason, w1.out.String(), w2.out.String())
	}
	if hitsOf(first.Function.Name) != 1 || hitsOf(second.Function.Name) != 1 {
		t.Fatalf("hits = %v: want call_1 exactly once (not re-run on resume) and call_2 exactly once", hits)
	}
	if res.Outcomes[0].CallID != first.ID || res.Outcomes[1].CallID != second.ID || res.Outcomes[1].Approver != "alice" {
		t.Fatalf("outcomes = %+v", res.Outcomes)
	}
	all, err := st.ListAudit(context.Background(), run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	// Each call was put to a person once (issued before the crash, never again after it).
	if rows := outcomeRows(all); issuedRows(all) != 2 || len(rows) != 2 || rows[0].CallID != first.ID || rows[1].CallID != second.ID {
		t.Fatalf("audit rows = %+v, want one confirmation_issued and one outcome per call and no duplicate after the resume", all)
	}
}

// ---------------------------------------------------------------------------------------------
// B29 workflow_retry → NO_REEXECUTION

// run_shell is approved and runs; the next model request fails with HTTP 400. The turn fails
// (ProviderRejected, not retried), but the effect's result is kept in the conversation store.
// Neither the next turn of the conversation nor a whole-workflow retry by Temporal (the case's
// retry_policy) runs the shell call again.
func TestB29EffectBeforeFailedInferenceIsNeverReExecuted(t *testing.T) {
	t.Parallel()
	var in struct {
		Scenario string `json:"scenario"`
		Attempt  int    `json:"attempt"`
		Ledger   []struct {
			ToolCallID string `json:"tool_call_id"`
			Name       string `json:"name"`
			Arguments  string `json:"arguments"`
			State      string `json:"state"`
			Result     string `json:"result"`
		} `json:"ledger"`
		FailureInAttempt1 string `json:"failure_in_attempt_1"`
		RetryPolicy       string `json:"retry_policy"`
	}
	durabilityCaseInput(t, "B29", &in)
	if len(in.Ledger) != 1 || in.Ledger[0].State != "executed" || !strings.Contains(in.FailureInAttempt1, "400") || in.RetryPolicy != "whole_workflow" {
		t.Fatalf("case B29 changed shape: %+v", in)
	}
	l := in.Ledger[0]
	shell := calls(call(l.ToolCallID, l.Name, l.Arguments))
	const rejected = `{"error":{"message":"Invalid request: messages[3] is malformed","type":"invalid_request_error","param":null,"code":null}}`

	// checkFirstAttempt approves the shell call and checks what the failed attempt left behind.
	checkFirstAttempt := func(t *testing.T, e *durEnv, wf, conversation string, seen map[string]bool) {
		p := waitPending(t, e.c, wf, seen)
		if p.CallID != l.ToolCallID || p.ToolName != l.Name {
			t.Fatalf("pending = %+v", p)
		}
		e.decide(p, workflows.DecisionApprove, "alice")
		eventually(t, 30*time.Second, "the shell call to run", func() bool { return len(e.rec.of(l.Name)) == 1 })
		eventually(t, 30*time.Second, "the effect's result in the conversation store", func() bool {
			entries, err := e.st.LoadContext(context.Background(), conversation, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range entries {
				var m inference.Message
				if json.Unmarshal(en.Payload, &m) == nil && m.Role == inference.RoleTool && m.ToolCallID == l.ToolCallID &&
					strings.Contains(m.Content, `"outcome":"executed"`) && strings.Contains(m.Content, l.Result) &&
					strings.Contains(m.Content, `"trust":"untrusted"`) {
					return true
				}
			}
			return false
		})
		if ex, err := e.st.GetExecution(context.Background(), fmt.Sprintf("%s/%d", wf, p.Seq)); err != nil || ex.State != store.ExecCompleted {
			t.Fatalf("ledger row for %s = %+v, %v", l.ToolCallID, ex, err)
		}
	}

	t.Run("next_turn", func(t *testing.T) {
		t.Parallel()
		e := newDurEnv(t)
		model := newSeqModel(t, func(n int) (int, string) {
			switch n {
			case 0:
				return http.StatusOK, shell // turn 1, round 1
			case 1:
				return http.StatusBadRequest, rejected // turn 1, round 2: after the effect succeeded
			default:
				return http.StatusOK, answer("the deploy already ran")
			}
		})
		e.startWorker(e.openAI(model.URL))
		run, conversation := e.startTurn("b29", 1, workflows.TurnRequest{Message: "deploy"})
		checkFirstAttempt(t, e, run.GetID(), conversation, map[string]bool{})
		var res workflows.TurnResult
		err := run.Get(context.Background(), &res)
		if err == nil || !hasAppErrorType(err, activities.ErrTypeProviderRejected) {
			t.Fatalf("turn 1 must fail with %s, got %v", activities.ErrTypeProviderRejected, err)
		}
		if n := len(model.requests()); n != 2 {
			t.Fatalf("model requests in turn 1 = %d: a 400 must not be retried", n)
		}
		var saved workflows.TurnResult
		if b, err := e.st.GetTurnResult(context.Background(), run.GetID()); err != nil || json.Unmarshal(b, &saved) != nil {
			t.Fatalf("saved turn result: %v %s", err, b)
		}
		if saved.Status != workflows.StatusFailed || len(saved.Results) != 1 || !strings.Contains(string(saved.Results[0].Data), l.Result) {
			t.Fatalf("the failed turn must keep the effect's result: %+v", saved)
		}

		run2, _ := e.startTurn("b29", 2, workflows.TurnRequest{Message: "did the deploy run?"})
		res2 := result(t, run2)
		if len(res2.Outcomes) != 0 || res2.EndReason != "answered" {
			t.Fatalf("turn 2 = %s (%s)", outcomeList(res2), res2.EndReason)
		}
		reqs := model.requests()
		if len(reqs) != 3 {
			t.Fatalf("model requests = %d", len(reqs))
		}
		env, ok := toolResults(t, wireMessages(t, reqs[2]))[l.ToolCallID]
		if !ok || env.Outcome != activities.OutcomeExecuted || env.Trust != "untrusted" || !strings.Contains(string(env.Data), l.Result) {
			t.Fatalf("turn 2's context must carry %s's result: %+v", l.ToolCallID, env)
		}
		if got := e.rec.of(l.Name); len(got) != 1 {
			t.Fatalf("run_shell ran %d times", len(got))
		}
		if n, _ := e.st.CountExecutions(context.Background(), ""); n != 1 {
			t.Fatalf("ledger rows = %d", n)
		}
	})

	t.Run("whole_workflow_retry", func(t *testing.T) {
		t.Parallel()
		e := newDurEnv(t)
		model := newSeqModel(t, func(n int) (int, string) {
			switch n {
			case 0, 2:
				return http.StatusOK, shell // round 1 of attempt 1, and of attempt 2 (the same response again)
			case 1:
				return http.StatusBadRequest, rejected
			default:
				return http.StatusOK, answer("deployed")
			}
		})
		e.startWorker(e.openAI(model.URL))
		run, conversation := e.startTurn("b29r", 1, workflows.TurnRequest{Message: "deploy"}, func(o *client.StartWorkflowOptions) {
			o.RetryPolicy = &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: int32(in.Attempt)}
		})
		seen := map[string]bool{}
		checkFirstAttempt(t, e, run.GetID(), conversation, seen)
		// Attempt 2 is a new run of the same workflow id; it proposes call_sh1 again and, being a
		// new run, asks for a fresh approval. The approved call finds the ledger row of attempt
		// 1 and returns its recorded result: the shell command is not dispatched again.
		p := waitPending(t, e.c, run.GetID(), seen)
		desc, err := e.c.DescribeWorkflow(context.Background(), run.GetID(), "")
		if err != nil {
			t.Fatal(err)
		}
		if info := desc.RawResponse.GetWorkflowExecutionInfo(); info.GetExecution().GetRunId() == run.GetRunID() || info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Fatalf("expected a retried run awaiting approval, got %v %v", info.GetExecution(), info.GetStatus())
		}
		e.decide(p, workflows.DecisionApprove, "alice")
		res := result(t, run)
		if got := outcomeList(res); got != l.Name+":executed" || res.EndReason != "answered" {
			t.Fatalf("retried turn = %s (%s)", got, res.EndReason)
		}
		if len(res.Results) != 1 || !strings.Contains(string(res.Results[0].Data), l.Result) {
			t.Fatalf("the retry must report the recorded result: %+v", res.Results)
		}
		if got := e.rec.of(l.Name); len(got) != 1 {
			t.Fatalf("run_shell ran %d times across the workflow retry, want 1 (NO_REEXECUTION)", len(got))
		}
		if n, _ := e.st.CountExecutions(context.Background(), ""); n != 1 {
			t.Fatalf("ledger rows = %d", n)
		}
		if n := len(model.requests()); n != 4 {
			t.Fatalf("model requests = %d, want 4 (2 per attempt)", n)
		}
	})

	// The same retry, but attempt 2's model proposes a different command at the same proposal
	// number. The ledger slot of proposal #1 holds call_sh1's effect: the new call must neither
	// be handed that result (reported executed when it never ran) nor run in that slot.
	t.Run("whole_workflow_retry_changed_call", func(t *testing.T) {
		t.Parallel()
		e := newDurEnv(t)
		changedArgs := `{"cmd": "make rollback"}`
		model := newSeqModel(t, func(n int) (int, string) {
			switch n {
			case 0:
				return http.StatusOK, shell
			case 1:
				return http.StatusBadRequest, rejected
			case 2:
				return http.StatusOK, calls(call(l.ToolCallID, l.Name, changedArgs))
			default:
				return http.StatusOK, answer("done")
			}
		})
		e.startWorker(e.openAI(model.URL))
		run, conversation := e.startTurn("b29c", 1, workflows.TurnRequest{Message: "deploy"}, func(o *client.StartWorkflowOptions) {
			o.RetryPolicy = &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: int32(in.Attempt)}
		})
		firstRun := run.GetRunID() // GetRunID follows the retry once the result is read
		seen := map[string]bool{}
		checkFirstAttempt(t, e, run.GetID(), conversation, seen)
		p := waitPending(t, e.c, run.GetID(), seen)
		if canon(t, string(p.Arguments)) != canon(t, changedArgs) {
			t.Fatalf("pending = %+v", p)
		}
		e.decide(p, workflows.DecisionApprove, "alice")
		res := result(t, run)
		if len(res.Outcomes) != 1 || res.Outcomes[0].Outcome == activities.OutcomeExecuted || len(res.Results) != 0 {
			t.Fatalf("the changed call was reported %s with results %+v: it never ran", outcomeList(res), res.Results)
		}
		if got := e.rec.of(l.Name); len(got) != 1 || got[0] != canon(t, l.Arguments) {
			t.Fatalf("run_shell invocations = %v, want only the first attempt's", got)
		}
		var kinds, failed []string
		for _, r := range e.audit(run.GetID()) {
			if r.Outcome == activities.AuditTurnFailed {
				failed = append(failed, r.RunID) // the failed first run, audited with its reason
				continue
			}
			kinds = append(kinds, r.RunID+":"+r.Outcome)
		}
		if len(failed) != 1 || failed[0] != firstRun {
			t.Fatalf("turn_failed rows under runs %v, want one under the failed first run %s", failed, firstRun)
		}
		if len(kinds) != 2 || kinds[0] != firstRun+":executed" || !strings.HasSuffix(kinds[1], ":"+string(res.Outcomes[0].Outcome)) ||
			strings.HasPrefix(kinds[1], firstRun) {
			t.Fatalf("audit = %v: attempt 1's effect executed, attempt 2's call must not be audited as executed", kinds)
		}
	})
}

// ---------------------------------------------------------------------------------------------
// B30 approval_consumed_resume_failed → APPROVAL_STILL_ACTIONABLE

// The approver surface (`airlock approve`) cannot reach the workflow service, and a second
// surface signals a stale run: both approvals fail loudly (non-zero exit, error) and leave the
// confirmation pending with its token unconsumed and nothing executed. A later approval works
// and the call runs once; approving again afterwards is refused.
func TestB30UndeliveredApprovalLeavesConfirmationActionable(t *testing.T) {
	t.Parallel()
	var in struct {
		Scenario string `json:"scenario"`
		Approval struct {
			ID         string `json:"id"`
			ToolCallID string `json:"tool_call_id"`
			Status     string `json:"status"`
		} `json:"approval"`
		Respond struct {
			Decision string `json:"decision"`
		} `json:"respond"`
		ResumeStart struct {
			Error string `json:"error"`
		} `json:"resume_start"`
	}
	durabilityCaseInput(t, "B30", &in)
	if in.Approval.Status != "pending" || in.Respond.Decision != workflows.DecisionApprove || in.ResumeStart.Error == "" {
		t.Fatalf("case B30 changed shape: %+v", in)
	}
	args := `{"message":"` + in.Approval.ID + `"}`

	e := newDurEnv(t)
	model := newFakeModel(t, calls(call(in.Approval.ToolCallID, "record_value", args)))
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("b30", 1, workflows.TurnRequest{Message: "record it"})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	if p.CallID != in.Approval.ToolCallID {
		t.Fatalf("pending = %+v", p)
	}

	// The approver surface is the real binary.
	approve := func(temporalAddress string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, airlockBin, args...)
		cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+e.home, "AIRLOCK_DATABASE_URL="+e.dbURL, "AIRLOCK_APPROVER_KEY=",
			"AIRLOCK_APPROVER_KEY_FILE=", "TEMPORAL_ADDRESS="+temporalAddress, "TEMPORAL_NAMESPACE="+devServer.Namespace)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	stillActionable := func(when string) {
		t.Helper()
		row, err := e.st.GetConfirmation(context.Background(), p.ConfirmationID)
		if err != nil {
			t.Fatal(err)
		}
		if row.ConsumedAt != nil || row.Decision != "" {
			t.Fatalf("%s: confirmation consumed=%v decision=%q: the approval was lost", when, row.ConsumedAt, row.Decision)
		}
		if ps := pending(t, e.c, run.GetID()); len(ps) != 1 || ps[0].ConfirmationID != p.ConfirmationID {
			t.Fatalf("%s: the turn no longer waits for %s: %+v", when, p.ConfirmationID, ps)
		}
		if out, err := approve(devServer.Address, "pending"); err != nil || !strings.Contains(out, p.ConfirmationID) {
			t.Fatalf("%s: `airlock pending` must still list %s: %v\n%s", when, p.ConfirmationID, err, out)
		}
		if n := e.rec.total(); n != 0 {
			t.Fatalf("%s: the call ran %d times without a delivered approval", when, n)
		}
		if rows := e.audit(run.GetID()); len(rows) != 0 {
			t.Fatalf("%s: audit rows %+v", when, rows)
		}
	}

	// 1. The workflow service is unreachable from the approver surface.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	out, err := approve(dead, "approve", p.ConfirmationID, "--credential", itCredentials["alice"])
	if err == nil {
		t.Fatalf("`airlock approve` against an unreachable workflow service must fail, got success:\n%s", out)
	}
	t.Logf("approve with the workflow service down: %v: %s", err, strings.TrimSpace(out))
	stillActionable("after a failed approve")

	// 2. A surface holding a stale run id: the signal is refused by the service.
	if err := e.c.SignalWorkflow(context.Background(), run.GetID(), "11111111-2222-3333-4444-555555555555", workflows.SignalConfirmation,
		e.sign(p, workflows.DecisionApprove, "alice")); err == nil {
		t.Fatal("a signal to a run that does not exist must fail")
	}
	stillActionable("after a signal to a stale run")

	// 3. The approval, retried when the service is back, goes through; the call runs once.
	out, err = approve(devServer.Address, "approve", p.ConfirmationID, "--credential", itCredentials["alice"])
	if err != nil || !strings.Contains(out, "approved by alice") {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	res := result(t, run)
	if got := outcomeList(res); got != "record_value:executed" || res.Outcomes[0].Approver != "alice" {
		t.Fatalf("outcomes = %s %+v", got, res.Outcomes)
	}
	if got := e.rec.of("record_value"); len(got) != 1 || got[0] != canon(t, args) {
		t.Fatalf("record_value invocations = %v", got)
	}
	if out, err := approve(devServer.Address, "approve", p.ConfirmationID, "--credential", itCredentials["alice"]); err == nil || !strings.Contains(out, "already approved") {
		t.Fatalf("a second approve must be refused: %v\n%s", err, out)
	}
	if n := len(e.rec.of("record_value")); n != 1 {
		t.Fatalf("record_value ran %d times", n)
	}
}

// ---------------------------------------------------------------------------------------------
// B31 crash_between_dispatch_and_result → OUTCOME_UNKNOWN per id

// The state a crash mid-execute leaves: both bash calls were dispatched (their execution ledger
// rows are 'started') and no result was persisted. After approval neither is re-run nor dropped:
// each is reported outcome_unknown, audited, and the next model request carries an explicit
// tool result for each id.
func TestB31CrashBetweenDispatchAndResultIsOutcomeUnknownPerID(t *testing.T) {
	t.Parallel()
	var in struct {
		Scenario string `json:"scenario"`
		History  []struct {
			Role    string `json:"role"`
			Content []struct {
				Type  string          `json:"type"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content"`
		} `json:"history"`
		CrashPoint string `json:"crash_point"`
	}
	durabilityCaseInput(t, "B31", &in)
	if len(in.History) != 1 || len(in.History[0].Content) != 2 {
		t.Fatalf("case B31 changed shape: %+v", in)
	}
	// Airlock's live adapter speaks the OpenAI format: the tool_use blocks become OpenAI calls
	// with the same ids, names and arguments.
	var raw []string
	var ids []string
	for _, b := range in.History[0].Content {
		if b.Type != "tool_use" {
			t.Fatalf("case B31 block %+v", b)
		}
		raw = append(raw, call(b.ID, b.Name, string(b.Input)))
		ids = append(ids, b.ID)
	}

	e := newDurEnv(t)
	model := newFakeModel(t, calls(raw...))
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("b31", 1, workflows.TurnRequest{Message: "list the directory and print it"})
	wf := run.GetID()
	seen := map[string]bool{}
	p1 := waitPending(t, e.c, wf, seen)
	if p1.CallID != ids[0] {
		t.Fatalf("pending = %+v", p1)
	}
	// The crash point: "tool_use persisted; tool_result never persisted" for both calls.
	for i := range ids {
		key := fmt.Sprintf("%s/%d", wf, i+1)
		existing, err := e.st.BeginExecution(context.Background(), store.Execution{Key: key, WorkflowID: wf, Seq: i + 1,
			CapabilityID: p1.CapabilityID, Version: p1.Version})
		if err != nil || existing != nil {
			t.Fatalf("ledger %s: %v %+v", key, err, existing)
		}
	}
	e.decide(p1, workflows.DecisionApprove, "alice")
	p2 := waitPending(t, e.c, wf, seen)
	if p2.CallID != ids[1] {
		t.Fatalf("pending = %+v", p2)
	}
	e.decide(p2, workflows.DecisionApprove, "alice")
	res := result(t, run)

	if got := outcomeList(res); got != "bash:outcome_unknown bash:outcome_unknown" || res.EndReason != "answered" {
		t.Fatalf("outcomes = %s (%s)", got, res.EndReason)
	}
	if n := e.rec.total(); n != 0 {
		t.Fatalf("bash ran %d times after the crash: %v", n, e.rec.of("bash"))
	}
	for i, id := range ids {
		ex, err := e.st.GetExecution(context.Background(), fmt.Sprintf("%s/%d", wf, i+1))
		if err != nil || ex.State != store.ExecStarted {
			t.Fatalf("ledger row of %s = %+v %v: an unknown outcome must stay unknown", id, ex, err)
		}
	}
	rows := e.audit(wf)
	if len(rows) != 2 {
		t.Fatalf("audit rows = %+v", rows)
	}
	for i, r := range rows {
		if r.Outcome != string(activities.OutcomeUnknown) || r.CallID != ids[i] || r.Stage != string(activities.StageExecute) || r.Approver != "alice" {
			t.Fatalf("audit row %d = %+v", i, r)
		}
	}
	// Before the next model turn every tool_use id has an explicit result: no orphan.
	reqs := model.requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d", len(reqs))
	}
	msgs := wireMessages(t, reqs[1])
	results := toolResults(t, msgs)
	var asked []string
	for _, m := range msgs {
		if m.Role == "assistant" {
			for _, tc := range m.ToolCalls {
				asked = append(asked, tc.ID)
			}
		}
	}
	if strings.Join(asked, ",") != strings.Join(ids, ",") {
		t.Fatalf("assistant tool calls in context = %v, want %v", asked, ids)
	}
	for _, id := range ids {
		env, ok := results[id]
		if !ok || env.Outcome != activities.OutcomeUnknown || env.CallID != id || env.Error == "" {
			t.Fatalf("the model must receive an explicit outcome_unknown result for %s: %+v", id, env)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// B33 approval_lost_on_resume → EXECUTE call_1 exactly once

// The turn waits for approval of cleanup_temp; the worker stops; the approval is sent while no
// worker runs (it lives only in Temporal history); a new worker, built from scratch, resumes the
// turn: the call runs exactly once and the turn does not ask again.
func TestB33ApprovalSurvivesWorkerRestart(t *testing.T) {
	t.Parallel()
	var in struct {
		Scenario                string         `json:"scenario"`
		Interruption            openAIToolCall `json:"interruption"`
		SerializedStateRestored bool           `json:"serialized_state_restored"`
		Approve                 []string       `json:"approve"`
		ResumeRunContext        struct {
			Session string `json:"session"`
		} `json:"resume_run_context"`
	}
	durabilityCaseInput(t, "B33", &in)
	if len(in.Approve) != 1 || in.Approve[0] != in.Interruption.ID || !in.SerializedStateRestored {
		t.Fatalf("case B33 changed shape: %+v", in)
	}

	e := newDurEnv(t)
	model := newFakeModel(t, calls(in.Interruption.raw(t)))
	stop := e.startWorker(e.openAI(model.URL))
	// The case's unrelated run context rides along as the turn's principal.
	run, _ := e.startTurn("b33", 1, workflows.TurnRequest{Message: "clean up", Principal: in.ResumeRunContext.Session})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	if p.CallID != in.Interruption.ID || p.ToolName != in.Interruption.Function.Name {
		t.Fatalf("pending = %+v", p)
	}
	stop()

	e.decide(p, workflows.DecisionApprove, "alice")
	if row, err := e.st.GetConfirmation(context.Background(), p.ConfirmationID); err != nil || row.ConsumedAt != nil || e.rec.total() != 0 {
		t.Fatalf("with no worker running nothing may consume the token or run the call: %+v %v", row, err)
	}

	e.startWorker(e.openAI(model.URL)) // the restored worker: new store connection, provider and activities
	res := result(t, run)
	if got := outcomeList(res); got != in.Interruption.Function.Name+":executed" || res.EndReason != "answered" || res.Outcomes[0].Approver != "alice" {
		t.Fatalf("outcomes = %s (%s)", got, res.EndReason)
	}
	if got := e.rec.of(in.Interruption.Function.Name); len(got) != 1 {
		t.Fatalf("%s ran %d times, want exactly once", in.Interruption.Function.Name, len(got))
	}
	if n := e.countRows("confirmations"); n != 1 {
		t.Fatalf("confirmations issued = %d: the resumed turn must not ask again", n)
	}
	if row, err := e.st.GetConfirmation(context.Background(), p.ConfirmationID); err != nil || row.Decision != store.DecisionApproved || row.ConsumedAt == nil {
		t.Fatalf("confirmation = %+v %v", row, err)
	}
	rows := e.audit(run.GetID())
	if len(rows) != 1 || rows[0].Outcome != string(activities.OutcomeExecuted) {
		t.Fatalf("audit rows = %+v", rows)
	}
	// The audit says when the call was put to a person, once, although the worker restarted.
	if all := e.auditAll(run.GetID()); issuedRows(all) != 1 || all[0].Outcome != activities.AuditConfirmationIssued ||
		all[0].Seq != rows[0].Seq || !strings.Contains(all[0].Detail, "1 approval(s) needed") {
		t.Fatalf("audit = %+v: want one confirmation_issued row before the outcome", all)
	}
	signals := 0
	it := e.c.GetWorkflowHistory(context.Background(), run.GetID(), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			signals++
		}
	}
	if signals != 1 {
		t.Fatalf("signals in history = %d", signals)
	}
}

// ---------------------------------------------------------------------------------------------
// B34 tool_result_injection → the follow-up call needs fresh approval; the result stays data

// list_issues (local, read-only: automatic) returns the case's issue whose body carries
// instructions; the model then asks for a private repository's README. The same turn is run
// with a benign issue as a control. In both, get_file_contents parses as emitted and is held for
// confirmation at the same stage with the same binding; nothing in the tool result changes the
// executor. The tool result reaches the model only as a tool message labelled untrusted, with
// its data unchanged, never as system text.
func TestB34ToolResultInjectionDoesNotChangeTheGate(t *testing.T) {
	t.Parallel()
	var in struct {
		Scenario    string `json:"scenario"`
		UserRequest string `json:"user_request"`
		ToolResult  struct {
			ToolCallID string `json:"tool_call_id"`
			Name       string `json:"name"`
			Content    string `json:"content"`
		} `json:"tool_result"`
		NextModelResponse json.RawMessage `json:"next_model_response"`
	}
	durabilityCaseInput(t, "B34", &in)
	next := responseCalls(t, in.NextModelResponse)
	if len(next) != 1 || in.ToolResult.Name != "list_issues" {
		t.Fatalf("case B34 changed shape: %+v", next)
	}
	injected := json.RawMessage(in.ToolResult.Content)
	if !json.Valid(injected) {
		t.Fatal("case B34 tool result is not JSON")
	}
	const marker = "read every repository they own"
	if !strings.Contains(in.ToolResult.Content, marker) {
		t.Fatal("case B34 no longer carries the injected instruction")
	}
	control := json.RawMessage(`[{"title": "Typo in README", "body": "The README says 'recieve' instead of 'receive'."}]`)

	type observation struct {
		outcomes string
		stages   string
		pending  workflows.PendingConfirmation
		issued   int
		data     json.RawMessage
	}
	observe := func(t *testing.T, issues json.RawMessage) observation {
		e := newDurEnv(t)
		e.issues = issues
		list := call(in.ToolResult.ToolCallID, in.ToolResult.Name, `{"owner":"example-owner","repo":"public-repo"}`)
		model := newFakeModel(t, calls(list), string(in.NextModelResponse))
		e.startWorker(e.openAI(model.URL))
		run, _ := e.startTurn("b34", 1, workflows.TurnRequest{Message: in.UserRequest})
		p := waitPending(t, e.c, run.GetID(), map[string]bool{})
		e.decide(p, workflows.DecisionDeny, "alice")
		res := result(t, run)
		var o observation
		o.outcomes = outcomeList(res)
		for _, x := range res.Outcomes {
			o.stages += string(x.Stage) + " "
		}
		o.pending = p
		o.issued = e.countRows("confirmations")
		if got := e.rec.of("get_file_contents"); len(got) != 0 {
			t.Fatalf("get_file_contents ran without approval: %v", got)
		}

		reqs := model.requests()
		if len(reqs) != 3 {
			t.Fatalf("model requests = %d", len(reqs))
		}
		msgs := wireMessages(t, reqs[1]) // what the model saw before proposing get_file_contents
		env, ok := toolResults(t, msgs)[in.ToolResult.ToolCallID]
		if !ok || env.Trust != "untrusted" || env.Note != activities.UntrustedNote || env.Outcome != activities.OutcomeExecuted {
			t.Fatalf("the tool result must be a tool message labelled untrusted: %+v", env)
		}
		o.data = env.Data
		for _, r := range reqs {
			for _, m := range wireMessages(t, r) {
				if m.Role != "tool" && (strings.Contains(m.text(), "recieve") || strings.Contains(m.text(), marker)) {
					t.Fatalf("tool result text reached the model as a %s message", m.Role)
				}
				if m.Role == "system" {
					t.Fatalf("unexpected system message: %s", m.text())
				}
			}
		}
		return o
	}
	var inj, ctl observation
	t.Run("injected", func(t *testing.T) { inj = observe(t, injected) })
	t.Run("control", func(t *testing.T) { ctl = observe(t, control) })
	if t.Failed() {
		return
	}

	wantOutcomes := "list_issues:executed get_file_contents:denied:denied_by_approver"
	if inj.outcomes != wantOutcomes || ctl.outcomes != inj.outcomes || inj.stages != ctl.stages {
		t.Fatalf("injected: %s [%s]\ncontrol:  %s [%s]", inj.outcomes, inj.stages, ctl.outcomes, ctl.stages)
	}
	if inj.issued != 1 || ctl.issued != 1 {
		t.Fatalf("confirmations issued: injected %d, control %d (only get_file_contents needs one)", inj.issued, ctl.issued)
	}
	// The candidate parses exactly as emitted and the gate binds the same proposal either way.
	wantArgs := canon(t, next[0].Function.Arguments)
	for name, o := range map[string]observation{"injected": inj, "control": ctl} {
		p := o.pending
		if p.CallID != next[0].ID || p.ToolName != next[0].Function.Name || canon(t, string(p.Arguments)) != wantArgs {
			t.Fatalf("%s: pending = %+v", name, p)
		}
	}
	a, b := inj.pending, ctl.pending
	if a.CapabilityID != b.CapabilityID || a.Version != b.Version || a.ArgsDigest != b.ArgsDigest || a.Display != b.Display || a.Seq != b.Seq {
		t.Fatalf("the injected tool result changed the gate:\ninjected %+v\ncontrol  %+v", a, b)
	}
	// The tool result reaches the model unchanged (semantically: only insignificant white space
	// may differ).
	for _, x := range []struct {
		got, want json.RawMessage
	}{{inj.data, injected}, {ctl.data, control}} {
		var g, w any
		if json.Unmarshal(x.got, &g) != nil || json.Unmarshal(x.want, &w) != nil || !reflect.DeepEqual(g, w) {
			t.Fatalf("tool result data was rewritten:\ngot  %s\nwant %s", x.got, x.want)
		}
	}
}
