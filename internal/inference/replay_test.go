package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/recording"
)

// corpusDir is the shared AgentDojo corpus, read in place (never copied into the repo).
const corpusDir = "../../../shared/corpus/agentdojo"

const (
	gpt4oSession  = "gpt-4o-2024-05-13/banking/user_task_0/important_instructions/injection_task_0"
	llamaSession  = "meta-llama_Llama-3.3-70B-Instruct/banking/user_task_0/important_instructions/injection_task_0"
	llamaBadText  = "meta-llama_Llama-3.3-70B-Instruct/workspace/user_task_14/none/none"
	gpt4oParallel = "gpt-4o-2024-05-13/banking/user_task_15/none/none"
)

func requireCorpus(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(corpusDir, "runs")); err != nil {
		t.Fatalf("AgentDojo corpus missing (expected /work/shared/corpus/agentdojo): %v", err)
	}
}

// wireBody is the chat.completion shape the replay provider writes. Content and arguments are
// kept raw to check null and exact strings.
type wireBody struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

func decodeBody(t *testing.T, raw json.RawMessage) wireBody {
	t.Helper()
	var b wireBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("body %s: %v", raw, err)
	}
	if len(b.Choices) != 1 {
		t.Fatalf("choices: %s", raw)
	}
	return b
}

func complete(t *testing.T, p Provider, session string, round int) Response {
	t.Helper()
	resp, err := p.Complete(context.Background(), Request{Session: session, Round: round})
	if err != nil {
		t.Fatalf("%s round %d: %v", session, round, err)
	}
	if resp.Format != FormatOpenAI {
		t.Fatalf("format %q", resp.Format)
	}
	return resp
}

func TestReplayGPT4o(t *testing.T) {
	requireCorpus(t)
	r := NewReplay(agentdojo.Recorded(agentdojo.SessionLoader(corpusDir)))
	file, err := os.ReadFile(filepath.Join(corpusDir, "runs", gpt4oSession+".json"))
	if err != nil {
		t.Fatal(err)
	}

	b := decodeBody(t, complete(t, r, gpt4oSession, 1).Raw)
	c := b.Choices[0]
	if b.ID != "replay-1" || b.Object != "chat.completion" || b.Model != "gpt-4o-2024-05-13" ||
		c.Index != 0 || c.Message.Role != "assistant" || string(c.Message.Content) != "null" || c.FinishReason != "tool_calls" {
		t.Fatalf("round 1: %+v", b)
	}
	if len(c.Message.ToolCalls) != 1 {
		t.Fatalf("round 1 calls: %+v", c.Message.ToolCalls)
	}
	tc := c.Message.ToolCalls[0]
	if tc.ID != "call_gpfdLFjeJU2eX920udSV8OYL" || tc.Type != "function" || tc.Function.Name != "read_file" {
		t.Fatalf("round 1 call: %+v", tc)
	}
	// The arguments string is the file's args bytes, verbatim.
	if !bytes.Contains(file, []byte(`"args": `+tc.Function.Arguments)) {
		t.Fatalf("arguments %q are not the recorded bytes", tc.Function.Arguments)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil || args["file_path"] != "bill-december-2023.txt" {
		t.Fatalf("arguments %q: %v", tc.Function.Arguments, err)
	}

	b = decodeBody(t, complete(t, r, gpt4oSession, 3).Raw)
	tc = b.Choices[0].Message.ToolCalls[0]
	if b.ID != "replay-3" || tc.Function.Name != "send_money" || !strings.Contains(tc.Function.Arguments, `"amount": 50.0`) ||
		!strings.Contains(tc.Function.Arguments, `"recipient": "US133000000121212121212"`) {
		t.Fatalf("round 3: %+v", b)
	}

	b = decodeBody(t, complete(t, r, gpt4oSession, 6).Raw)
	c = b.Choices[0]
	var text string
	if err := json.Unmarshal(c.Message.Content, &text); err != nil || text == "" || c.FinishReason != "stop" || c.Message.ToolCalls != nil {
		t.Fatalf("final round: %+v", b)
	}
	if raw := complete(t, r, gpt4oSession, 6).Raw; bytes.Contains(raw, []byte("tool_calls\":")) {
		t.Fatalf("final round has a tool_calls key: %s", raw)
	}

	_, err = r.Complete(context.Background(), Request{Session: gpt4oSession, Round: 7})
	if !errors.Is(err, ErrSessionExhausted) || !Permanent(err) {
		t.Fatalf("round 7: %v", err)
	}
	for _, req := range []Request{{Session: gpt4oSession, Round: 0}, {Round: 1}} {
		if _, err := r.Complete(context.Background(), req); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	if _, err := r.Complete(context.Background(), Request{Session: "no/such/trace", Round: 1}); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing session: %v", err)
	}
}

func TestReplayLlama(t *testing.T) {
	requireCorpus(t)
	r := NewReplay(agentdojo.Recorded(agentdojo.SessionLoader(corpusDir)))

	b := decodeBody(t, complete(t, r, llamaSession, 1).Raw)
	c := b.Choices[0]
	var text string
	if err := json.Unmarshal(c.Message.Content, &text); err != nil {
		t.Fatal(err)
	}
	if b.Model != "local" || !strings.Contains(text, `<function=read_file>{"file_path": "bill-december-2023.txt"}</function>`) {
		t.Fatalf("round 1 content: %q", text)
	}
	// The model wrote its call as text; AgentDojo's own reading of it (recorded without an id)
	// is not served as a structured call, so the strict parser sees text only.
	if len(c.Message.ToolCalls) != 0 || c.FinishReason != "stop" {
		t.Fatalf("round 1 must carry no structured calls: %+v", c)
	}

	// AgentDojo could not read this text call: no tool_calls are served, the text stays text.
	b = decodeBody(t, complete(t, r, llamaBadText, 1).Raw)
	c = b.Choices[0]
	if err := json.Unmarshal(c.Message.Content, &text); err != nil {
		t.Fatal(err)
	}
	if c.Message.ToolCalls != nil || c.FinishReason != "stop" ||
		!strings.Contains(text, `<function=search_emails {"query": "family reunion"}</function>`) {
		t.Fatalf("malformed text call: %+v", c)
	}
}

func TestReplayParallelCalls(t *testing.T) {
	requireCorpus(t)
	tr, err := agentdojo.SessionLoader(corpusDir)(gpt4oParallel)
	if err != nil {
		t.Fatal(err)
	}
	step := tr.Steps()[0]
	b := decodeBody(t, complete(t, NewReplay(agentdojo.Recorded(agentdojo.SessionLoader(corpusDir))), gpt4oParallel, 1).Raw)
	calls := b.Choices[0].Message.ToolCalls
	if len(calls) != len(step.Assistant.ToolCalls) || len(calls) < 2 {
		t.Fatalf("calls: %+v", calls)
	}
	for i, c := range calls {
		rec := step.Assistant.ToolCalls[i]
		if c.ID != rec.ID || c.Function.Name != rec.Function || c.Function.Arguments != string(rec.Args) {
			t.Fatalf("call %d: %+v vs %+v", i, c, rec)
		}
	}
}

// Every step of every corpus trace replays into a valid body whose arguments decode to the
// recorded bytes exactly.
func TestReplayWholeCorpusRoundTrip(t *testing.T) {
	requireCorpus(t)
	paths, err := agentdojo.FindTraces(corpusDir)
	if err != nil || len(paths) == 0 {
		t.Fatalf("traces: %d, %v", len(paths), err)
	}
	byPath := map[string]*agentdojo.Trace{}
	r := NewReplay(agentdojo.Recorded(func(session string) (*agentdojo.Trace, error) {
		if tr, ok := byPath[session]; ok {
			return tr, nil
		}
		return agentdojo.LoadTrace(session)
	}))
	var calls int
	for _, p := range paths {
		tr, err := agentdojo.LoadTrace(p)
		if err != nil {
			t.Fatal(err)
		}
		byPath[p] = tr
		steps := tr.Steps()
		for _, s := range steps {
			resp := complete(t, r, p, s.Round)
			if !json.Valid(resp.Raw) {
				t.Fatalf("%s round %d: invalid JSON", p, s.Round)
			}
			b := decodeBody(t, resp.Raw)
			var content *string
			if err := json.Unmarshal(b.Choices[0].Message.Content, &content); err != nil {
				t.Fatal(err)
			}
			if (content == nil) != (s.Assistant.Content == "") || (content != nil && *content != s.Assistant.Content) {
				t.Fatalf("%s round %d: content differs", p, s.Round)
			}
			got := b.Choices[0].Message.ToolCalls
			want := len(s.Assistant.ToolCalls)
			if want > 0 && s.Assistant.ToolCalls[0].ID == "" {
				want = 0 // harness-parsed text calls are served as text
			}
			if len(got) != want {
				t.Fatalf("%s round %d: %d calls, want %d", p, s.Round, len(got), want)
			}
			for i, c := range got {
				calls++
				if c.Function.Arguments != string(s.Assistant.ToolCalls[i].Args) || c.ID != s.Assistant.ToolCalls[i].ID || c.ID == "" {
					t.Fatalf("%s round %d call %d: %+v", p, s.Round, i, c)
				}
			}
		}
		if _, err := r.Complete(context.Background(), Request{Session: p, Round: len(steps) + 1}); !errors.Is(err, ErrSessionExhausted) {
			t.Fatalf("%s: past the end: %v", p, err)
		}
	}
	// MANIFEST.json counts each trace's recorded calls; Llama's are written in the text (null
	// ids, corpus README) and served as text, every other model's as structured calls.
	b, err := os.ReadFile(filepath.Join(corpusDir, "MANIFEST.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest []struct {
		Model string `json:"model"`
		Calls int    `json:"n_tool_calls"`
	}
	if err := json.Unmarshal(b, &manifest); err != nil || len(manifest) != len(paths) {
		t.Fatalf("manifest lists %d traces, %d found: %v", len(manifest), len(paths), err)
	}
	want := 0
	for _, e := range manifest {
		if !strings.Contains(e.Model, "Llama") {
			want += e.Calls
		}
	}
	if calls != want {
		t.Fatalf("replayed %d structured calls, want the manifest's %d", calls, want)
	}
}

func TestReplayCachesSessions(t *testing.T) {
	requireCorpus(t)
	var loads atomic.Int32
	base := agentdojo.SessionLoader(corpusDir)
	r := NewReplay(agentdojo.Recorded(func(s string) (*agentdojo.Trace, error) {
		loads.Add(1)
		return base(s)
	}))
	complete(t, r, gpt4oSession, 1)
	var wg sync.WaitGroup
	for round := 1; round <= 6; round++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Complete(context.Background(), Request{Session: gpt4oSession, Round: round}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if loads.Load() != 1 {
		t.Fatalf("trace loaded %d times", loads.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Complete(ctx, Request{Session: gpt4oSession, Round: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

func TestReplayBodyHandBuilt(t *testing.T) {
	step := recording.Round{Number: 2, Assistant: recording.Message{
		Role:    "assistant",
		Content: "a <b> & \"c\"",
		Calls: []recording.Call{
			{Name: "f", Args: json.RawMessage("{\n    \"x\": 1.0,\n    \"s\": \"\\u00e9<\"\n}"), ID: "call_A", IDRecorded: true},
			{Name: "g", Args: json.RawMessage(`{"y":[1, 2]}`)},
			{Name: "h", Args: json.RawMessage(`{}`), IDRecorded: true},
		},
	}}
	got := string(ReplayBody("m", step))
	want := `{"id":"replay-2","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a <b> & \"c\"","tool_calls":[` +
		`{"id":"call_A","type":"function","function":{"name":"f","arguments":"{\n    \"x\": 1.0,\n    \"s\": \"\\u00e9<\"\n}"}},` +
		`{"type":"function","function":{"name":"g","arguments":"{\"y\":[1, 2]}"}},` +
		`{"id":"","type":"function","function":{"name":"h","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestScripted(t *testing.T) {
	first := json.RawMessage(`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{bad"}}]},"finish_reason":"tool_calls"}]}` + "\n")
	second := json.RawMessage(`{"choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`)
	s := NewScripted(first, second)
	first[1] = 'X' // the provider keeps its own copy

	for round, want := range []json.RawMessage{nil, first, second} {
		if round == 0 {
			continue
		}
		resp, err := s.Complete(context.Background(), Request{Round: round, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			want = append(json.RawMessage(`{"`), want[2:]...)
		}
		if resp.Format != FormatOpenAI || !bytes.Equal(resp.Raw, want) {
			t.Fatalf("round %d: %s", round, resp.Raw)
		}
	}
	if _, err := s.Complete(context.Background(), Request{Round: 3}); !errors.Is(err, ErrSessionExhausted) {
		t.Fatalf("round 3: %v", err)
	}
	if _, err := s.Complete(context.Background(), Request{Round: 0}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("round 0: %v", err)
	}
	if reqs := s.Requests(); len(reqs) != 4 || reqs[0].Model != "m" || reqs[1].Round != 2 {
		t.Fatalf("requests: %+v", reqs)
	}
}

// idlessDir and unsupportedDir are the recording package's synthetic AgentDojo-shaped
// recordings of structured calls without ids and of runs with extra exchanges.
const (
	idlessDir      = "../recording/testdata/idless"
	unsupportedDir = "../recording/testdata/unsupported"
)

// Structured calls recorded with id "", without an id key, and several id-less calls in one
// step are all served, as recorded (no id key or "id":""), and the strict parser turns every
// one of them into a candidate with the id Airlock assigns. Before, a step whose first call had
// no id was served without any call, so the turn ended "answered".
func TestReplayServesIDlessCalls(t *testing.T) {
	r := NewReplay(agentdojo.Recorded(agentdojo.SessionLoader(idlessDir)))
	for _, c := range []struct {
		session string
		names   []string
		idKeys  []string // the served call's raw id value; "" for no id key
	}{
		{"my-model/shop/user_task_0/none/none", []string{"get_item"}, []string{`""`}},
		{"my-model/shop/user_task_1/none/none", []string{"get_item"}, []string{""}},
		{"my-model/shop/user_task_2/none/none", []string{"get_item", "get_item", "buy_item"}, []string{"", `""`, ""}},
	} {
		resp := complete(t, r, c.session, 1)
		var raw struct {
			Choices []struct {
				Message struct {
					ToolCalls []map[string]json.RawMessage `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(resp.Raw, &raw); err != nil {
			t.Fatal(err)
		}
		served := raw.Choices[0].Message.ToolCalls
		if len(served) != len(c.names) || raw.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("%s: served %d calls (%s), want %d", c.session, len(served), raw.Choices[0].FinishReason, len(c.names))
		}
		for i, call := range served {
			if string(call["id"]) != c.idKeys[i] {
				t.Errorf("%s call %d: id %s, want %q", c.session, i, call["id"], c.idKeys[i])
			}
		}
		res, err := parse.Parse(parse.FormatOpenAI, resp.Raw, parse.Options{Round: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Calls) != len(c.names) {
			t.Fatalf("%s: parsed %+v", c.session, res.Calls)
		}
		for i, pc := range res.Calls {
			if !pc.Candidate() || !pc.IDAssigned || pc.CallID != parse.AssignedCallID("", 1, i) || pc.Name != c.names[i] {
				t.Errorf("%s call %d: %+v", c.session, i, pc)
			}
		}
	}
}

// A recording with an assistant message before the user's task (a defense pipeline's tool
// filter) or a second user message is refused as unsupported from round 1: it is never
// served as an answer.
func TestReplayRefusesExtraExchanges(t *testing.T) {
	r := NewReplay(agentdojo.Recorded(agentdojo.SessionLoader(unsupportedDir)))
	for _, s := range []string{"my-model/shop/user_task_0/none/none", "my-model/shop/user_task_1/none/none"} {
		for round := 1; round <= 2; round++ {
			resp, err := r.Complete(context.Background(), Request{Session: s, Round: round})
			if !errors.Is(err, recording.ErrUnsupported) || resp.Raw != nil {
				t.Errorf("%s round %d: %s, %v; want ErrUnsupported", s, round, resp.Raw, err)
			}
		}
	}
}
