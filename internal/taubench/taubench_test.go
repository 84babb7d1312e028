package taubench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/internal/stack"
)

const sampleFile = "gpt-4o-airline.sample.json"

// corpusDir is the shared tau-bench corpus, read in place (never copied into the repo).
func corpusDir(t *testing.T) string {
	t.Helper()
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatalf("RepoRoot: %v", err)
	}
	dir := filepath.Join(root, "..", "shared", "corpus", "tau-bench")
	if _, err := os.Stat(filepath.Join(dir, sampleFile)); err != nil {
		t.Fatalf("tau-bench corpus missing (expected ../shared/corpus/tau-bench next to the repo): %v", err)
	}
	return dir
}

func loadSample(t *testing.T) []Trajectory {
	t.Helper()
	trs, err := LoadFile(filepath.Join(corpusDir(t), sampleFile))
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	return trs
}

func find(t *testing.T, trs []Trajectory, task, trial int) Trajectory {
	t.Helper()
	for _, tr := range trs {
		if tr.TaskID == task && tr.Trial == trial {
			return tr
		}
	}
	t.Fatalf("no task %d trial %d", task, trial)
	return Trajectory{}
}

// Counts measured independently with python3 over the sample's JSON.
var sampleCounts = []struct {
	task, trial                       int
	turns, assistant, calls, conseq   int
	turnsWithoutAssistant, rewardOnes int
}{
	{0, 0, 8, 15, 8, 2, 1, 0},
	{1, 0, 6, 5, 0, 0, 1, 0},
	{2, 0, 5, 11, 7, 2, 1, 0},
	{3, 0, 11, 30, 20, 6, 1, 0},
	{4, 0, 7, 12, 6, 2, 0, 0},
	{5, 0, 7, 12, 6, 1, 1, 0},
	{6, 0, 6, 11, 6, 1, 1, 1},
	{7, 0, 8, 12, 5, 1, 1, 0},
	{8, 0, 9, 8, 0, 0, 1, 0},
	{9, 0, 26, 25, 0, 0, 1, 0},
	{0, 1, 7, 12, 6, 2, 1, 0},
	{1, 1, 6, 10, 5, 1, 1, 1},
	{2, 1, 4, 30, 27, 5, 0, 0},
	{3, 1, 10, 23, 14, 2, 1, 0},
	{4, 1, 8, 7, 0, 0, 1, 0},
	{5, 1, 7, 12, 6, 3, 1, 1},
	{6, 1, 6, 10, 5, 1, 1, 0},
	{7, 1, 11, 10, 0, 0, 1, 0},
	{8, 1, 6, 21, 16, 5, 0, 0},
	{9, 1, 14, 13, 0, 0, 1, 0},
}

func TestSampleCounts(t *testing.T) {
	trs := loadSample(t)
	if len(trs) != 20 {
		t.Fatalf("trajectories = %d, want 20", len(trs))
	}
	if len(trs) != len(sampleCounts) {
		t.Fatalf("table has %d rows for %d trajectories", len(sampleCounts), len(trs))
	}
	var turns, assistant, calls, toolMsgs int
	byTool := map[string]int{}
	for i, tr := range trs {
		want := sampleCounts[i]
		if tr.TaskID != want.task || tr.Trial != want.trial {
			t.Fatalf("trajectory %d is task %d trial %d, want %d/%d", i, tr.TaskID, tr.Trial, want.task, want.trial)
		}
		if tr.Model != "gpt-4o" || tr.Domain != "airline" || filepath.Base(tr.Path) != sampleFile {
			t.Fatalf("task %d trial %d: model %q domain %q path %q", tr.TaskID, tr.Trial, tr.Model, tr.Domain, tr.Path)
		}
		if (tr.Reward == 1) != (want.rewardOnes == 1) || (tr.Reward != 0 && tr.Reward != 1) {
			t.Errorf("task %d trial %d: reward %v", tr.TaskID, tr.Trial, tr.Reward)
		}
		var a, c, cq, empty int
		for k, tu := range tr.Turns {
			if tu.Index != k+1 {
				t.Fatalf("task %d trial %d: turn %d has index %d", tr.TaskID, tr.Trial, k, tu.Index)
			}
			tc := tu.Trace
			if tc.Suite != "airline" || tc.Pipeline != "gpt-4o" || tc.UserTaskID != fmt.Sprintf("task_%d", tr.TaskID) ||
				tc.InjectionTaskID != "" || tc.AttackType != "" || tc.Security || tc.Utility != (tr.Reward > 0) || tc.Path != tr.Path {
				t.Fatalf("task %d trial %d turn %d: trace header %+v", tr.TaskID, tr.Trial, tu.Index, tc)
			}
			ms := tc.Messages
			if len(ms) < 2 || ms[0].Role != agentdojo.RoleSystem || !strings.HasPrefix(ms[0].Content, "# Airline Agent Policy") ||
				ms[1].Role != agentdojo.RoleUser || ms[1].Content != tu.UserMessage || tc.UserPrompt() != tu.UserMessage {
				t.Fatalf("task %d trial %d turn %d: head of messages wrong", tr.TaskID, tr.Trial, tu.Index)
			}
			for _, m := range ms[2:] {
				switch m.Role {
				case agentdojo.RoleAssistant:
					a++
					c += len(m.ToolCalls)
					for _, call := range m.ToolCalls {
						if Consequential(tr.Domain, call.Function) {
							cq++
							byTool[call.Function]++
						}
					}
				case agentdojo.RoleTool:
					toolMsgs++
				default:
					t.Fatalf("task %d trial %d turn %d: %s message inside a turn", tr.TaskID, tr.Trial, tu.Index, m.Role)
				}
			}
			if len(tc.Steps()) == 0 {
				empty++
			}
		}
		got := [5]int{len(tr.Turns), a, c, cq, empty}
		exp := [5]int{want.turns, want.assistant, want.calls, want.conseq, want.turnsWithoutAssistant}
		if got != exp {
			t.Errorf("task %d trial %d: turns/assistant/calls/consequential/empty turns = %v, want %v", tr.TaskID, tr.Trial, got, exp)
		}
		turns += len(tr.Turns)
		assistant += a
		calls += c
	}
	if turns != 172 || assistant != 289 || calls != 137 || toolMsgs != 137 {
		t.Errorf("totals: turns %d assistant %d calls %d tool messages %d, want 172 289 137 137", turns, assistant, calls, toolMsgs)
	}
	wantByTool := map[string]int{
		"update_reservation_flights":    21,
		"book_reservation":              7,
		"cancel_reservation":            2,
		"transfer_to_human_agents":      2,
		"update_reservation_passengers": 1,
		"update_reservation_baggages":   1,
	}
	if !reflect.DeepEqual(byTool, wantByTool) {
		t.Errorf("consequential calls by tool = %v, want %v", byTool, wantByTool)
	}
}

// rawSample decodes the sample generically (independently of the package's types) into, per
// trajectory, the recorded calls and tool messages in order.
type rawCallRec struct{ id, name, args string }
type rawToolRec struct{ id, content string }

func rawSample(t *testing.T) map[[2]int]struct {
	calls []rawCallRec
	tools []rawToolRec
} {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir(t), sampleFile))
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	out := map[[2]int]struct {
		calls []rawCallRec
		tools []rawToolRec
	}{}
	for _, r := range recs {
		k := [2]int{int(r["task_id"].(float64)), int(r["trial"].(float64))}
		e := out[k]
		for _, mi := range r["traj"].([]any) {
			m := mi.(map[string]any)
			if tcs, ok := m["tool_calls"].([]any); ok {
				for _, ci := range tcs {
					c := ci.(map[string]any)
					f := c["function"].(map[string]any)
					e.calls = append(e.calls, rawCallRec{c["id"].(string), f["name"].(string), f["arguments"].(string)})
				}
			}
			if m["role"] == "tool" {
				e.tools = append(e.tools, rawToolRec{m["tool_call_id"].(string), m["content"].(string)})
			}
		}
		out[k] = e
	}
	return out
}

func TestCallsAndResultsMatchRecording(t *testing.T) {
	trs := loadSample(t)
	raw := rawSample(t)
	for _, tr := range trs {
		var calls []rawCallRec
		var results []rawToolRec
		for _, tu := range tr.Turns {
			for _, s := range tu.Trace.Steps() {
				if tu.Trace.Messages[s.Index].Role != agentdojo.RoleAssistant {
					t.Fatalf("step index %d is not an assistant message", s.Index)
				}
				for _, c := range s.Assistant.ToolCalls {
					calls = append(calls, rawCallRec{c.ID, c.Function, string(c.Args)})
				}
				if len(s.Results) != len(s.Assistant.ToolCalls) {
					t.Errorf("task %d trial %d turn %d round %d: %d results for %d calls", tr.TaskID, tr.Trial, tu.Index, s.Round, len(s.Results), len(s.Assistant.ToolCalls))
				}
				for i, r := range s.Results {
					c := s.Assistant.ToolCalls[r.CallIndex]
					if r.CallIndex != i || r.CallID != c.ID || s.CallID(i) != c.ID || r.Function != c.Function || r.Error != "" {
						t.Errorf("task %d trial %d turn %d round %d: result %+v for call %+v", tr.TaskID, tr.Trial, tu.Index, s.Round, r, c)
					}
					results = append(results, rawToolRec{r.CallID, r.Content})
				}
			}
		}
		want := raw[[2]int{tr.TaskID, tr.Trial}]
		if !reflect.DeepEqual(calls, want.calls) {
			t.Errorf("task %d trial %d: calls differ from the recording", tr.TaskID, tr.Trial)
		}
		if !reflect.DeepEqual(results, want.tools) {
			t.Errorf("task %d trial %d: results differ from the recording", tr.TaskID, tr.Trial)
		}
	}
}

func TestTask0Trial0(t *testing.T) {
	tr := find(t, loadSample(t), 0, 0)
	if tr.Reward != 0 || len(tr.Turns) != 8 {
		t.Fatalf("reward %v turns %d", tr.Reward, len(tr.Turns))
	}
	if got := tr.Turns[0].UserMessage; got != "Hi! I'm looking to book a flight from New York to Seattle on May 20th." {
		t.Fatalf("turn 1 user message = %q", got)
	}
	if n := len(tr.Turns[0].Trace.Messages); n != 3 { // system, user, one assistant reply
		t.Fatalf("turn 1 has %d messages", n)
	}

	// Turn 6: the user confirms, the agent books (the tool refuses the payment), thinks,
	// calculates and replies.
	tu := tr.Turns[5]
	if tu.UserMessage != "Yes, please proceed with that booking. Thank you!" || len(tu.Trace.Messages) != 9 { // system, user, 4 assistant, 3 tool
		t.Fatalf("turn 6: %q, %d messages", tu.UserMessage, len(tu.Trace.Messages))
	}
	steps := tu.Trace.Steps()
	if len(steps) != 4 {
		t.Fatalf("turn 6 steps = %d, want 4", len(steps))
	}
	book := steps[0]
	if book.Index != 2 || book.Round != 1 || book.Assistant.Content != "" || len(book.Assistant.ToolCalls) != 1 {
		t.Fatalf("turn 6 step 1: %+v", book)
	}
	c := book.Assistant.ToolCalls[0]
	wantArgs := `{"user_id":"mia_li_3668","origin":"JFK","destination":"SEA","flight_type":"one_way","cabin":"economy","flights":[{"flight_number":"HAT136","date":"2024-05-20"},{"flight_number":"HAT039","date":"2024-05-20"}],"passengers":[{"first_name":"Mia","last_name":"Li","dob":"1990-04-05"}],"payment_methods":[{"payment_id":"certificate_7504069","amount":250},{"payment_id":"credit_card_4421486","amount":5}],"total_baggages":3,"nonfree_baggages":1,"insurance":"no"}`
	if c.ID != "call_To6jjkKrBKVnDV0OhCSBvoMz" || c.Function != "book_reservation" || string(c.Args) != wantArgs {
		t.Fatalf("book call = %s %s %s", c.ID, c.Function, c.Args)
	}
	if len(book.Results) != 1 || book.Results[0].CallID != c.ID || book.Results[0].Function != "book_reservation" ||
		!strings.HasPrefix(book.Results[0].Content, "Error: payment amount does not add up, total price is 305") {
		t.Fatalf("book result = %+v", book.Results)
	}
	if f := []string{steps[1].Assistant.ToolCalls[0].Function, steps[2].Assistant.ToolCalls[0].Function}; f[0] != "think" || f[1] != "calculate" {
		t.Fatalf("steps 2-3 call %v", f)
	}
	if last := steps[3]; len(last.Assistant.ToolCalls) != 0 || last.Results != nil || last.Assistant.Content == "" {
		t.Fatalf("step 4 should be a plain reply: %+v", last)
	}

	// The conversation ends with the user's ###STOP###: a turn without assistant messages.
	end := tr.Turns[7]
	if end.UserMessage != "Thank you so much for your help! ###STOP###" || len(end.Trace.Steps()) != 0 || len(end.Trace.Messages) != 2 {
		t.Fatalf("last turn: %q, %d messages", end.UserMessage, len(end.Trace.Messages))
	}
}

// Arguments are the recorded string's bytes, not re-encoded: this call was recorded with spaces.
func TestArgsKeepRecordedSpacing(t *testing.T) {
	tr := find(t, loadSample(t), 2, 1)
	s := tr.Turns[3].Trace.Steps()[8]
	c := s.Assistant.ToolCalls[0]
	if c.Function != "search_direct_flight" || string(c.Args) != `{"origin": "MCO", "destination": "BOS", "date": "2024-05-21"}` {
		t.Fatalf("call = %s %s", c.Function, c.Args)
	}
}

// A run can end inside the agent's segment (transfer to a human): it belongs to the last turn.
func TestTrailingSegmentBelongsToLastTurn(t *testing.T) {
	tr := find(t, loadSample(t), 4, 0)
	last := tr.Turns[len(tr.Turns)-1]
	steps := last.Trace.Steps()
	if last.Index != 7 || last.UserMessage != "Yes, please transfer me to a human agent." || len(steps) != 1 {
		t.Fatalf("last turn %d %q with %d steps", last.Index, last.UserMessage, len(steps))
	}
	if c := steps[0].Assistant.ToolCalls; len(c) != 1 || c[0].Function != "transfer_to_human_agents" ||
		len(steps[0].Results) != 1 || steps[0].Results[0].Content != "Transfer successful" {
		t.Fatalf("last step %+v", steps[0])
	}
}

// The recording reuses call ids, even inside one turn for different calls; doc.go warns about
// it. Measured with python3: three turns repeat an id.
func TestRecordedCallIDsRepeat(t *testing.T) {
	trs := loadSample(t)
	var where []string
	for _, tr := range trs {
		for _, tu := range tr.Turns {
			seen := map[string]int{}
			for _, m := range tu.Trace.Messages {
				for _, c := range m.ToolCalls {
					seen[c.ID]++
				}
			}
			for _, n := range seen {
				if n > 1 {
					where = append(where, fmt.Sprintf("%d/%d/%d", tr.TaskID, tr.Trial, tu.Index))
					break
				}
			}
		}
	}
	if !reflect.DeepEqual(where, []string{"2/1/4", "8/1/4", "8/1/6"}) {
		t.Fatalf("turns with repeated call ids = %v", where)
	}
	var fns []string
	for _, s := range find(t, trs, 2, 1).Turns[3].Trace.Steps() {
		for _, c := range s.Assistant.ToolCalls {
			if c.ID == "call_dhYivf6VRUVJfU9DItC2EQ95" {
				fns = append(fns, c.Function)
			}
		}
	}
	if !reflect.DeepEqual(fns, []string{"think", "search_direct_flight", "update_reservation_flights"}) {
		t.Fatalf("call_dhYivf6VRUVJfU9DItC2EQ95 in task 2 trial 1 turn 4: %v", fns)
	}
}

func TestSessionName(t *testing.T) {
	for _, file := range []string{"gpt-4o-airline.sample.json", "/x/y/gpt-4o-airline.sample.json", "gpt-4o-airline.json", "gpt-4o-airline"} {
		if got := SessionName(file, 3, 1, 2); got != "tau-bench/gpt-4o-airline/task_3/trial_1/turn_2" {
			t.Errorf("SessionName(%q) = %q", file, got)
		}
	}
	if !IsSession("tau-bench/gpt-4o-airline/task_3/trial_1/turn_2") || IsSession("gpt-4o-2024-05-13/banking/user_task_0/none/none") || IsSession("tau-bench") {
		t.Fatal("IsSession")
	}
}

func TestSessionLoaderRoundTrip(t *testing.T) {
	dir := corpusDir(t)
	trs := loadSample(t)
	load := SessionLoader(dir)
	n := 0
	for _, tr := range trs {
		for _, tu := range tr.Turns {
			name := SessionName(tr.Path, tr.TaskID, tr.Trial, tu.Index)
			if !IsSession(name) {
				t.Fatalf("IsSession(%q) = false", name)
			}
			got, err := load(name)
			if err != nil {
				t.Fatalf("load(%q): %v", name, err)
			}
			if !reflect.DeepEqual(got, tu.Trace) {
				t.Fatalf("load(%q) differs from LoadFile's turn", name)
			}
			again, err := load(name)
			if err != nil || again != got {
				t.Fatalf("load(%q) again: %p %v, want cached %p", name, again, err, got)
			}
			n++
		}
	}
	if n != 172 {
		t.Fatalf("round-tripped %d turns, want 172", n)
	}
}

func TestSessionLoaderConcurrent(t *testing.T) {
	load := SessionLoader(corpusDir(t))
	var wg sync.WaitGroup
	got := make([]*agentdojo.Trace, 16)
	errs := make([]error, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = load("tau-bench/gpt-4o-airline/task_3/trial_1/turn_2")
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("goroutine %d: %p %v, want %p", i, got[i], errs[i], got[0])
		}
	}
}

func TestSessionLoaderRefuses(t *testing.T) {
	load := SessionLoader(corpusDir(t))
	invalid := []string{
		"",
		"tau-bench/../x/task_0/trial_0/turn_1",
		"tau-bench/gpt-4o-airline/task_0/trial_0/turn_0",
		"tau-bench/gpt-4o-airline/task_00/trial_0/turn_1",
		"tau-bench/gpt-4o-airline/task_-1/trial_0/turn_1",
		"tau-bench/gpt-4o-airline/task_0/trial_0/turn_1/",
		"tau-bench/gpt-4o-airline/task_0/trial_0/turn_1/../../x",
		"tau-bench//gpt-4o-airline/task_0/trial_0/turn_1",
		"tau-bench/gpt-4o-airline.sample/task_0/trial_0/turn_1",
		"tau-bench/a..b-airline/task_0/trial_0/turn_1",
		"tau-bench/.hidden-airline/task_0/trial_0/turn_1",
		"tau-bench/airline/task_0/trial_0/turn_1",
		`tau-bench/gpt-4o\airline/task_0/trial_0/turn_1`,
		"tau-bench/gpt-4o-airline/task_0/trial_0/turn_1x",
		"tau-bench/gpt-4o-airline/task_1234567890/trial_0/turn_1",
		"TAU-BENCH/gpt-4o-airline/task_0/trial_0/turn_1",
		"gpt-4o-2024-05-13/banking/user_task_0/important_instructions/injection_task_0",
	}
	for _, s := range invalid {
		if tr, err := load(s); !errors.Is(err, ErrInvalidSession) || errors.Is(err, ErrNoSession) || tr != nil {
			t.Errorf("load(%q) = %v, %v; want ErrInvalidSession", s, tr, err)
		}
	}
	missing := []string{
		"tau-bench/gpt-4o-airline/task_99/trial_0/turn_1",
		"tau-bench/gpt-4o-airline/task_0/trial_2/turn_1",
		"tau-bench/gpt-4o-airline/task_0/trial_0/turn_9", // task 0 trial 0 has 8 turns
		"tau-bench/claude-airline/task_0/trial_0/turn_1",
	}
	for _, s := range missing {
		if tr, err := load(s); !errors.Is(err, ErrNoSession) || tr != nil {
			t.Errorf("load(%q) = %v, %v; want ErrNoSession", s, tr, err)
		}
	}
	if _, err := load("tau-bench/claude-airline/task_0/trial_0/turn_1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file error %v does not wrap fs.ErrNotExist", err)
	}
	if _, err := load("tau-bench/gpt-4o-airline/task_0/trial_0/turn_8"); err != nil {
		t.Errorf("last turn: %v", err)
	}
}

// A minimal valid trajectory file, edited by the malformed cases below.
const minimal = `[{"task_id": 7, "trial": 0, "reward": 1.0, "info": {}, "traj": [
 {"role": "system", "content": "policy"},
 {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "thinking", "thinking": "x"}, {"type": "text", "text": "there"}]},
 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_user_details", "arguments": "{\"user_id\" : 1,}"}}]},
 {"role": "tool", "tool_call_id": "c1", "name": "get_user_details", "content": "{}"},
 {"role": "assistant", "content": "done"},
 {"role": "user", "content": "again"},
 {"role": "user", "content": "hello?"},
 {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "cancel_reservation", "arguments": "{}"}}]}
]}]`

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMinimalFile(t *testing.T) {
	p := writeFile(t, "m-retail.json", minimal)
	trs, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 1 || trs[0].Model != "m" || trs[0].Domain != "retail" || trs[0].TaskID != 7 || len(trs[0].Turns) != 3 {
		t.Fatalf("%+v", trs)
	}
	turns := trs[0].Turns
	if turns[0].UserMessage != "hi\nthere" || turns[1].UserMessage != "again" || turns[2].UserMessage != "hello?" {
		t.Fatalf("user messages %q %q %q", turns[0].UserMessage, turns[1].UserMessage, turns[2].UserMessage)
	}
	if !turns[0].Trace.Utility || len(turns[1].Trace.Steps()) != 0 {
		t.Fatal("utility or consecutive user turn")
	}
	s := turns[0].Trace.Steps()
	if len(s) != 2 || string(s[0].Assistant.ToolCalls[0].Args) != `{"user_id" : 1,}` || len(s[0].Results) != 1 || s[0].Results[0].Content != "{}" {
		t.Fatalf("turn 1 steps %+v", s)
	}
	// The run ended right after the last call: its result may be missing.
	s = turns[2].Trace.Steps()
	if len(s) != 1 || s[0].Assistant.Content != "ok" || len(s[0].Results) != 0 {
		t.Fatalf("turn 3 steps %+v", s)
	}
	// The .json fallback of the loader, and Consequential of an unknown domain.
	got, err := SessionLoader(filepath.Dir(p))("tau-bench/m-retail/task_7/trial_0/turn_3")
	if err != nil || !reflect.DeepEqual(got, turns[2].Trace) {
		t.Fatalf("loader: %v", err)
	}
	if !Consequential("retail", "get_user_details") {
		t.Fatal("tools of an unknown domain must be consequential")
	}
}

func TestMalformedFiles(t *testing.T) {
	cases := map[string]string{
		"not json":                 `{`,
		"not a list":               `{"task_id": 0}`,
		"empty list":               `[]`,
		"missing task_id":          strings.Replace(minimal, `"task_id": 7, `, ``, 1),
		"missing traj":             `[{"task_id": 0, "trial": 0, "reward": 0}]`,
		"negative trial":           strings.Replace(minimal, `"trial": 0`, `"trial": -1`, 1),
		"duplicate task and trial": "[" + minimal[1:len(minimal)-1] + "," + minimal[1:],
		"bad tool_call_id":         strings.Replace(minimal, `"tool_call_id": "c1"`, `"tool_call_id": "c9"`, 1),
		"missing tool_call_id":     strings.Replace(minimal, `"tool_call_id": "c1", `, ``, 1),
		"tool name mismatch":       strings.Replace(minimal, `"name": "get_user_details", "content"`, `"name": "think", "content"`, 1),
		"unknown role":             strings.Replace(minimal, `"role": "system"`, `"role": "developer"`, 1),
		"content a number":         strings.Replace(minimal, `"content": "policy"`, `"content": 3`, 1),
		"unknown block":            strings.Replace(minimal, `"type": "thinking"`, `"type": "image"`, 1),
		"arguments an object":      strings.Replace(minimal, `"arguments": "{}"`, `"arguments": {}`, 1),
		"arguments missing":        strings.Replace(minimal, `, "arguments": "{}"`, ``, 1),
		"call without name":        strings.Replace(minimal, `"name": "cancel_reservation", `, ``, 1),
		"call type":                strings.Replace(minimal, `"id": "c2", "type": "function"`, `"id": "c2", "type": "code"`, 1),
		"duplicate id in message":  strings.Replace(minimal, `"tool_calls": [{"id": "c2"`, `"tool_calls": [{"id": "c2", "function": {"name": "think", "arguments": "{}"}}, {"id": "c2"`, 1),
		"tool calls on user":       strings.Replace(minimal, `{"role": "user", "content": "again"}`, `{"role": "user", "content": "again", "tool_calls": [{"id": "u", "function": {"name": "think", "arguments": "{}"}}]}`, 1),
		"no user message":          `[{"task_id": 0, "trial": 0, "reward": 0, "traj": [{"role": "system", "content": "p"}]}]`,
		"assistant before user":    strings.Replace(minimal, `{"role": "system", "content": "policy"}`, `{"role": "assistant", "content": "hello"}`, 1),
		"system after user":        strings.Replace(minimal, `{"role": "user", "content": "again"}`, `{"role": "system", "content": "again"}`, 1),
		"tool after user":          strings.Replace(minimal, `{"role": "user", "content": "hello?"}`, `{"role": "tool", "tool_call_id": "c1", "content": "x"}`, 1),
		"unanswered call":          strings.Replace(minimal, `{"role": "tool", "tool_call_id": "c1", "name": "get_user_details", "content": "{}"},`, ``, 1),
		"answered twice":           strings.Replace(minimal, `"content": "{}"},`, `"content": "{}"}, {"role": "tool", "tool_call_id": "c1", "content": "{}"},`, 1),
	}
	for name, data := range cases {
		if data == minimal {
			t.Fatalf("%s: the edit did not apply", name)
		}
		_, err := LoadFile(writeFile(t, "m-airline.sample.json", data))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	for _, name := range []string{"airline.json", "gpt-4o-airline.txt", "gpt-4o-.json", "-airline.json", "a..b-airline.json", "x-airline.sample.sample.json"} {
		if _, err := LoadFile(writeFile(t, name, minimal)); !errors.Is(err, ErrMalformed) {
			t.Errorf("file name %q: err = %v, want ErrMalformed", name, err)
		}
	}
	_, err := LoadFile(filepath.Join(t.TempDir(), "none-airline.json"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrMalformed) {
		t.Errorf("missing file: %v", err)
	}
	// A file that stops loading is reported by the session loader with LoadFile's error.
	dir := filepath.Dir(writeFile(t, "bad-airline.json", `[]`))
	if _, err := SessionLoader(dir)("tau-bench/bad-airline/task_0/trial_0/turn_1"); !errors.Is(err, ErrMalformed) {
		t.Errorf("session over a malformed file: %v", err)
	}
}

func TestLoadToolsAndConsequential(t *testing.T) {
	path := filepath.Join(corpusDir(t), "airline_tools.json")
	tools, err := LoadTools(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name          string
		consequential bool
	}{
		{"book_reservation", true},
		{"calculate", false},
		{"cancel_reservation", true},
		{"get_reservation_details", false},
		{"get_user_details", false},
		{"list_all_airports", false},
		{"search_direct_flight", false},
		{"search_onestop_flight", false},
		{"send_certificate", true},
		{"think", false},
		{"transfer_to_human_agents", true},
		{"update_reservation_baggages", true},
		{"update_reservation_flights", true},
		{"update_reservation_passengers", true},
	}
	if len(tools) != 14 || len(want) != 14 {
		t.Fatalf("tools = %d, want 14", len(tools))
	}
	for i, w := range want {
		tl := tools[i]
		if tl.Name != w.name {
			t.Fatalf("tool %d = %s, want %s", i, tl.Name, w.name)
		}
		if got := Consequential("airline", tl.Name); got != w.consequential {
			t.Errorf("Consequential(airline, %s) = %v, want %v", tl.Name, got, w.consequential)
		}
		if tl.Description == "" || !bytes.HasPrefix(tl.Parameters, []byte("{\n")) || !bytes.Contains(data, tl.Parameters) {
			t.Errorf("%s: description %q or parameters not kept byte for byte", tl.Name, tl.Description)
		}
		if _, err := agentdojo.StandardSchema(tl.Parameters); err != nil {
			t.Errorf("%s: %v", tl.Name, err)
		}
	}
	if tools[0].Description != "Book a reservation." {
		t.Errorf("book_reservation description %q", tools[0].Description)
	}
	// Fail closed: unknown names, even read-only-looking ones, are consequential.
	for _, name := range []string{"get_flight_status", "list_everything", "delete_user", "", "THINK"} {
		if !Consequential("airline", name) {
			t.Errorf("Consequential(airline, %q) = false", name)
		}
	}
	if !Consequential("", "think") || !Consequential("Airline", "think") {
		t.Error("unknown domain must be consequential")
	}

	bad := map[string]string{
		"not a list":     `{"type": "function"}`,
		"empty":          `[]`,
		"wrong type":     `[{"type": "code", "function": {"name": "a", "parameters": {}}}]`,
		"no function":    `[{"type": "function"}]`,
		"missing name":   `[{"type": "function", "function": {"description": "x", "parameters": {}}}]`,
		"duplicate name": `[{"type": "function", "function": {"name": "a", "parameters": {}}}, {"type": "function", "function": {"name": "a", "parameters": {}}}]`,
		"list params":    `[{"type": "function", "function": {"name": "a", "parameters": []}}]`,
		"no params":      `[{"type": "function", "function": {"name": "a"}}]`,
	}
	for name, data := range bad {
		if _, err := LoadTools(writeFile(t, "tools.json", data)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	if _, err := LoadTools(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing tools file: %v", err)
	}
}

// A structured call recorded without an id, or with "", is kept (never dropped or refused):
// its tool messages are matched by position, and the neutral recording tells "" from absent.
func TestCallsWithoutIDsAreKept(t *testing.T) {
	data := strings.Replace(minimal, `{"id": "c1", "type": "function", "function": {"name": "get_user_details", "arguments": "{\"user_id\" : 1,}"}}]},
 {"role": "tool", "tool_call_id": "c1", "name": "get_user_details", "content": "{}"},`,
		`{"type": "function", "function": {"name": "get_user_details", "arguments": "{}"}}, {"id": "", "type": "function", "function": {"name": "think", "arguments": "{}"}}]},
 {"role": "tool", "name": "get_user_details", "content": "u"}, {"role": "tool", "tool_call_id": "", "name": "think", "content": "t"},`, 1)
	data = strings.Replace(data, `"id": "c2", `, ``, 1)
	if data == minimal {
		t.Fatal("the edit did not apply")
	}
	trs, err := LoadFile(writeFile(t, "m-airline.sample.json", data))
	if err != nil {
		t.Fatal(err)
	}
	s, err := trs[0].Turns[0].Trace.Recording()
	if err != nil {
		t.Fatal(err)
	}
	rounds, err := s.Rounds()
	if err != nil {
		t.Fatal(err)
	}
	calls := rounds[0].Assistant.Calls
	if len(calls) != 2 || calls[0].IDRecorded || !calls[1].IDRecorded || calls[0].Text || calls[1].Text {
		t.Fatalf("calls: %+v", calls)
	}
	res := rounds[0].Results
	if len(res) != 2 || res[0].CallIndex != 0 || res[0].Content != "u" || res[1].CallIndex != 1 || res[1].Content != "t" {
		t.Fatalf("results: %+v", res)
	}
	if rounds[0].WireID(1) != "airlock-r1-c1" {
		t.Fatalf("wire id: %s", rounds[0].WireID(1))
	}
}
