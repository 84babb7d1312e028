package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// run executes the CLI in process with args and stdin, returning stdout and the error.
func run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestParseCommandPrintsCandidatesAndFailures(t *testing.T) {
	in := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
	  {"id":"c1","type":"function","function":{"name":"web_fetch","arguments":"{\"url\":\"https://example.org/\",\"n\":12345678901234567890123}"}},
	  {"id":"c2","type":"function","function":{"name":"send_money","arguments":"\"{\\\"amount\\\":1}\""}},
	  {"id":"c3","type":"function","function":{"name":"list<|channel|>x","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	out, err := run(t, in, "parse")
	if err != nil {
		t.Fatal(err)
	}
	var got parseOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not the documented JSON: %v\n%s", err, out)
	}
	if len(got.Candidates) != 1 || got.Candidates[0].Name != "web_fetch" || got.Candidates[0].Version != 1 ||
		!strings.Contains(string(got.Candidates[0].Arguments), "12345678901234567890123") {
		t.Fatalf("candidates = %+v", got.Candidates)
	}
	if len(got.Failures) != 2 || got.Failures[0].Reason != "arguments_not_object" || got.Failures[1].Reason != "invalid_name" {
		t.Fatalf("failures = %+v", got.Failures)
	}
}

// A text-only message that did not end normally is not shown as a plain reply: the output
// names its finish reason and marks it incomplete.
func TestParseCommandShowsAnIncompleteMessage(t *testing.T) {
	in := `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"cut"},"finish_reason":"content_filter"}]}`
	out, err := run(t, in, "parse")
	if err != nil {
		t.Fatal(err)
	}
	var got parseOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.FinishReason != "content_filter" || got.Incomplete != "abnormal_finish" || len(got.Candidates)+len(got.Failures) != 0 {
		t.Fatalf("output = %s", out)
	}
}

func TestParseCommandRejectsNonResponses(t *testing.T) {
	if _, err := run(t, "not json", "parse"); err == nil || !strings.Contains(err.Error(), "unrecognized") {
		t.Fatalf("err = %v", err)
	}
}

func TestRegistryCommandFailsClosedWithDiagnostic(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "reg.json")
	doc := strings.Replace(string(registry.Embedded), `"tool/name": "web_fetch"`, `"tool/name": "web fetch!"`, 1)
	if err := os.WriteFile(bad, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	old := cfg
	t.Cleanup(func() { cfg = old })
	cfg.RegistryFile = bad
	_, err := run(t, "", "registry")
	if err == nil || !strings.Contains(err.Error(), "web.fetch@1: [tool-name]") {
		t.Fatalf("want a diagnostic naming the entry, got %v", err)
	}
	cfg.RegistryFile = filepath.Join(t.TempDir(), "missing.json")
	if _, err := run(t, "", "registry"); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("a missing registry must fail: %v", err)
	}
}

func TestRegistryCommandListsConfirmationClass(t *testing.T) {
	out, err := run(t, "", "registry")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"system.health@1", "automatic", "web.fetch@1", "required"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDenyRequiresReason(t *testing.T) {
	if _, err := run(t, "", "deny", "cf-x"); err == nil || !strings.Contains(err.Error(), "--reason is required") {
		t.Fatalf("err = %v", err)
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range newRoot().Commands() {
		if c.Short == "" {
			t.Errorf("command %s has no short help", c.Name())
		}
		for _, sub := range c.Commands() {
			if sub.Short == "" {
				t.Errorf("command %s %s has no short help", c.Name(), sub.Name())
			}
		}
	}
}

// Bad eval input is refused before any stack is started or any turn runs.
func TestEvalRefusesBadInput(t *testing.T) {
	shop := filepath.Join("..", "..", "internal", "eval", "testdata", "shop")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"eval"}, "name a benchmark"},
		{[]string{"eval", "nosuch"}, `unknown command "nosuch"`},
		{[]string{"eval", "agentdojo", "--corpus", shop, "--approver", "yes"}, "want deny-all or approve-all"},
		{[]string{"eval", "agentdojo", "--corpus", shop, "--concurrency", "0"}, "--concurrency must be at least 1"},
		{[]string{"eval", "agentdojo", "--corpus", shop, "--max-rounds", "-1"}, "must be positive"},
		{[]string{"eval", "agentdojo", "--corpus", shop, "--out", filepath.Join(t.TempDir(), "no", "such", "dir.txt")}, "report file"},
		{[]string{"eval", "agentdojo", "--corpus", shop, "--model", "gpt-4o"}, "the corpus has models: my-model"},
		{[]string{"eval", "agentdojo", "--corpus", shop, "--out", t.TempDir()}, "is a directory"},
		{[]string{"eval", "agentdojo", "--corpus", shop, "--out", "r", "--json-out", "./r"}, "the same file"},
		{[]string{"eval", "agentdojo", "--corpus", t.TempDir()}, "tools.json"},
		{[]string{"eval", "tau-bench", "--dir", filepath.Join(t.TempDir(), "nope")}, "tau-bench folder"},
	}
	for _, c := range cases {
		if _, err := run(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("airlock %s: %v, want an error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// A failed turn's error names its cause once, not once per Temporal wrapper.
func TestRootCauseIsTheInnermostApplicationError(t *testing.T) {
	inner := temporal.NewNonRetryableApplicationError("this worker is not configured for a live model", "BadInput", nil)
	err := fmt.Errorf("workflow failed: %w", temporal.NewApplicationErrorWithCause("inference round 1: "+inner.Error(), "Wrapper", inner))
	if got := rootCause(err); got != "this worker is not configured for a live model" {
		t.Fatalf("rootCause = %q", got)
	}
	if got := rootCause(errors.New("plain")); got != "plain" {
		t.Fatalf("rootCause of a plain error = %q", got)
	}
}

// What approvers and operators read in the terminal is shown faithfully: control characters
// (terminal escapes, bells) and bidi or invisible characters from a model, a recording or a
// signal sender are printed visibly, never acted on.
func TestTerminalSurfacesShowHostileTextVisibly(t *testing.T) {
	hostile := "m\x1b[31mallory\u202eTXT\a"
	var b bytes.Buffer
	printPending(&b, workflows.PendingConfirmation{ConfirmationID: "cf-1", WorkflowID: "turn/c/1", CallID: "c\u200b1",
		ToolName: "send\x1b]0;x\a", Arguments: json.RawMessage(`{"to":"` + "\u202e" + `NABI","note":"\u001b[2J"}`)})
	printResult(&b, workflows.TurnResult{WorkflowID: "turn/c/1", Status: "completed", EndReason: "answered", Prose: "done\x1b[0m\nnext",
		Outcomes: []workflows.ProposalOutcome{{Seq: 1, Name: "send_money", Outcome: "denied", Approver: hostile, Detail: "no\x1b[2J"}}})
	printPending(&b, workflows.PendingConfirmation{ConfirmationID: "cf-2", WorkflowID: "turn/c/1", ToolName: "web_fetch",
		Arguments: json.RawMessage(`{"url":"https://\u0430pple.example/login","body":"` + strings.Repeat("A", 500) + `TAIL"}`)})
	out := b.String()
	for _, raw := range []string{"\x1b", "\a", "\u202e", "\u200b", "TAIL"} {
		if strings.Contains(out, raw) {
			t.Fatalf("raw %q reached the terminal:\n%s", raw, out)
		}
	}
	for _, want := range []string{"m<U+001B>[31mallory<U+202E>TXT<U+0007> [flags: bidi_control, control]", "<U+202E>NABI [flags: bidi_control]",
		"done<U+001B>[0m\nnext", "c<U+200B>1 [flags: invisible]", "(tool send<U+001B>]0;x<U+0007> [flags: control])",
		"the answer above was altered to be shown: [flags: control]",
		"leaves:      url       url = https://\u0430pple.example/login [host xn--pple-43d.example] [flags: mixed_script_host, host_differs] (guessed from the argument's name)",
		"more characters; see all] [flags: truncated]", "pending --full shows them whole"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// airlock parse prints model-written ids, names and values with hidden runes as \u escapes:
// valid JSON with the same values, nothing that reorders or hides text on a terminal.
func TestParseOutputEscapesHiddenRunes(t *testing.T) {
	in := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
	  {"id":"c1` + "\u202e" + `","type":"function","function":{"name":"web_fetch","arguments":"{\"url\":\"https://example.org/a` + "\u200b" + `b\"}"}}]},"finish_reason":"tool_calls"}]}`
	out, err := run(t, in, "parse")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out, "\u202e\u200b") || !strings.Contains(out, `\u202e`) || !strings.Contains(out, `\u200b`) {
		t.Fatalf("parse output = %q", out)
	}
	var got struct {
		Candidates []struct {
			CallID string `json:"call_id"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Candidates) != 1 || got.Candidates[0].CallID != "c1\u202e" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
}
