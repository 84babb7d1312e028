package inference

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/internal/parse"
)

// fakeAnthropic is a real local HTTP server speaking the Messages API: for each request it
// answers the scenario's recorded-shape body, as JSON when the request did not ask to stream
// and as the server-sent events of the same body (parse.Disassemble, written in small flushed
// pieces so reads are cut anywhere) when it did.
type fakeAnthropic struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte      // request bodies seen
	heads  []http.Header // request headers seen
	status int
	answer string // the unstreamed body (or error body for status >= 400)
	events []string
	piece  int // bytes per write of the event stream
}

func newFakeAnthropic(t *testing.T, answer string) *fakeAnthropic {
	f := &fakeAnthropic{t: t, status: http.StatusOK, answer: answer, piece: 5}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAnthropic) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, b)
	f.heads = append(f.heads, r.Header.Clone())
	status, answer, events, piece := f.status, f.answer, f.events, f.piece
	f.mu.Unlock()
	if r.URL.Path != "/v1/messages" {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"no such path"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(b, &req)
	if status >= 400 || !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
		return
	}
	if events == nil {
		evs, err := parse.Disassemble(parse.FormatAnthropic, []byte(answer), 3)
		if err != nil {
			f.t.Errorf("disassemble: %v", err)
			return
		}
		for _, e := range evs {
			var typ struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(e, &typ)
			events = append(events, "event: "+typ.Type+"\ndata: "+string(e)+"\n\n")
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	all := strings.Join(events, "")
	fl, _ := w.(http.Flusher)
	for i := 0; i < len(all); i += piece {
		_, _ = io.WriteString(w, all[i:min(i+piece, len(all))])
		if fl != nil {
			fl.Flush()
		}
	}
}

func newTestAnthropic(t *testing.T, url string) *Anthropic {
	t.Helper()
	p, err := NewAnthropic(AnthropicConfig{BaseURL: url, APIKey: "sk-ant-test-secret", Model: "claude-test", MaxTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A turn's context as the Infer activity sends it: system prompt, user text, an assistant
// message with two parallel calls, their two results, then a new user message.
var anthropicReq = Request{Round: 2, Messages: []Message{
	{Role: RoleSystem, Content: "You are careful."},
	{Role: RoleUser, Content: "Weather in Paris and Oslo?"},
	{Role: RoleAssistant, Content: "Checking.", ToolCalls: []ToolCall{
		{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		{ID: "toolu_2", Name: "get_weather", Arguments: `{"city": "Oslo"}`},
	}},
	{Role: RoleTool, ToolCallID: "toolu_1", Content: `<untrusted-data capability="get_weather@1">{"c":12}</untrusted-data>`},
	{Role: RoleTool, ToolCallID: "toolu_2", Content: `<untrusted-data capability="get_weather@1">{"c":3}</untrusted-data>`},
}, Tools: []Tool{{Name: "get_weather", Description: "Weather now.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":64}},"required":["city"],"additionalProperties":false}`)}}}

const parallelToolUse = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Let me check both. Grüße 😀"},{"type":"tool_use","id":"toolu_a","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_b","name":"get_weather","input":{"city":"Tōkyō"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":40}}`

// TestAnthropicRequestShape: the request the SDK sends carries the system prompt, the calls
// as tool_use blocks with the model's input (the SDK compacts its white space), both results as tool_result blocks in one
// user message, the untrusted-data envelope as their content, and the catalog as tools with
// the registry's schema unchanged.
func TestAnthropicRequestShape(t *testing.T) {
	f := newFakeAnthropic(t, parallelToolUse)
	p := newTestAnthropic(t, f.srv.URL)
	if _, err := p.Complete(context.Background(), anthropicReq); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    []struct {
			Text string `json:"text"`
		} `json:"system"`
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Stream bool `json:"stream"`
	}
	if err := json.Unmarshal(f.bodies[0], &got); err != nil {
		t.Fatal(err)
	}
	if got.Model != "claude-test" || got.MaxTokens != 512 || got.Stream || len(got.System) != 1 || got.System[0].Text != "You are careful." {
		t.Fatalf("request %s", f.bodies[0])
	}
	// The SDK (v2.15.0) sends the API key as a bearer credential.
	if f.heads[0].Get("Authorization") != "Bearer sk-ant-test-secret" || f.heads[0].Get("Anthropic-Version") == "" {
		t.Errorf("headers %v", f.heads[0])
	}
	if len(got.Messages) != 3 || got.Messages[0].Role != "user" || got.Messages[1].Role != "assistant" || got.Messages[2].Role != "user" {
		t.Fatalf("messages %s", f.bodies[0])
	}
	asst := string(got.Messages[1].Content[1]) + string(got.Messages[1].Content[2])
	if !strings.Contains(asst, `"input":{"city":"Paris"}`) || !strings.Contains(asst, `"input":{"city":"Oslo"}`) || !strings.Contains(asst, `"id":"toolu_2"`) {
		t.Errorf("tool_use blocks %s", asst)
	}
	if len(got.Messages[2].Content) != 2 {
		t.Fatalf("tool results not in one user message: %s", f.bodies[0])
	}
	for i, c := range got.Messages[2].Content {
		var tr struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			Content   any    `json:"content"`
		}
		_ = json.Unmarshal(c, &tr)
		if tr.Type != "tool_result" || tr.ToolUseID != anthropicReq.Messages[3+i].ToolCallID || !strings.Contains(string(c), "untrusted-data") {
			t.Errorf("tool_result %d: %s", i, c)
		}
	}
	if len(got.Tools) != 1 || string(got.Tools[0].InputSchema) != string(anthropicReq.Tools[0].Parameters) {
		t.Errorf("tools %s", f.bodies[0])
	}
}

// TestAnthropicScenarios runs each recorded-shape answer unstreamed and streamed: both give
// the same Raw-parse (so the same history), with the expected outcome.
func TestAnthropicScenarios(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		want   func(t *testing.T, res parse.Result)
	}{
		{"parallel tool_use", parallelToolUse, func(t *testing.T, res parse.Result) {
			if len(res.Calls) != 2 || !res.Calls[0].Candidate() || !res.Calls[1].Candidate() || string(res.Calls[1].Arguments) != `{"city":"Tōkyō"}` || res.Incomplete != "" {
				t.Fatalf("got %+v", res)
			}
		}},
		{"refusal stop", `{"id":"msg_02","type":"message","role":"assistant","model":"claude-test","content":[{"type":"tool_use","id":"toolu_r","name":"get_weather","input":{"city":"x"}}],"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`, func(t *testing.T, res parse.Result) {
			if len(res.Calls) != 1 || res.Calls[0].Reason != parse.ReasonAbnormalFinish || res.Incomplete != parse.ReasonAbnormalFinish {
				t.Fatalf("got %+v", res)
			}
		}},
		{"refusal with stop_details", `{"id":"msg_03","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"I can't."}],"stop_reason":"refusal","stop_details":{"type":"refusal","category":"cyber","explanation":null},"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`, func(t *testing.T, res parse.Result) {
			if res.Incomplete != parse.ReasonRefusal || len(res.Calls) != 0 {
				t.Fatalf("got %+v", res)
			}
		}},
		{"max_tokens inside tool_use", `{"id":"msg_04","type":"message","role":"assistant","model":"claude-test","content":[{"type":"tool_use","id":"toolu_m","name":"get_weather","input":{"city":"Par"}}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":512}}`, func(t *testing.T, res parse.Result) {
			if len(res.Calls) != 1 || res.Calls[0].Reason != parse.ReasonTruncated {
				t.Fatalf("got %+v", res)
			}
		}},
		{"server tool block", `{"id":"msg_05","type":"message","role":"assistant","model":"claude-test","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}},{"type":"tool_use","id":"toolu_s","name":"get_weather","input":{"city":"x"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`, func(t *testing.T, res parse.Result) {
			if res.Incomplete != parse.ReasonUnreadPart || res.Calls[0].Candidate() {
				t.Fatalf("got %+v", res)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAnthropic(t, tc.answer)
			p := newTestAnthropic(t, f.srv.URL)
			plain, err := p.Complete(context.Background(), anthropicReq)
			if err != nil {
				t.Fatal(err)
			}
			if string(plain.Raw) != tc.answer || plain.Format != FormatAnthropic {
				t.Fatalf("Raw is not the exact body: %s", plain.Raw)
			}
			var deltas []parse.Delta
			streamed, err := p.Stream(context.Background(), anthropicReq, func(d parse.Delta) { deltas = append(deltas, d) })
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(f.bodies[1]), `"stream":true`) {
				t.Fatalf("streamed request did not ask to stream: %s", f.bodies[1])
			}
			a, err := parse.Parse(parse.FormatAnthropic, plain.Raw, parse.Options{Round: 1})
			if err != nil {
				t.Fatal(err)
			}
			b, err := parse.Parse(parse.FormatAnthropic, streamed.Raw, parse.Options{Round: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("streamed parse differs\n got %+v\nwant %+v\nassembled %s", b, a, streamed.Raw)
			}
			if plain.Usage != streamed.Usage {
				t.Errorf("usage %+v streamed %+v", plain.Usage, streamed.Usage)
			}
			tc.want(t, a)
			if len(deltas) == 0 {
				t.Error("no deltas while streaming")
			}
		})
	}
}

// TestAnthropicCutInsideToolUse: a stream cut by max_tokens in the middle of a tool_use's
// input (partial_json that is not one JSON value) fails the call as truncated, never a guess.
func TestAnthropicCutInsideToolUse(t *testing.T) {
	f := newFakeAnthropic(t, "")
	f.events = []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_c\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \\\"Par\"}}\n\n",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":512}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	}
	p := newTestAnthropic(t, f.srv.URL)
	resp, err := p.Stream(context.Background(), anthropicReq, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := parse.Parse(parse.FormatAnthropic, resp.Raw, parse.Options{Round: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 1 || res.Calls[0].Reason != parse.ReasonTruncated || res.Incomplete != parse.ReasonTruncated {
		t.Fatalf("got %+v\n%s", res, resp.Raw)
	}
}

// TestAnthropicErrors: overloaded (529), rate limits (429), server errors and error events in
// a stream or a 2xx body are retryable; other 4xx are rejections; no error shows the key.
func TestAnthropicErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		stream    bool
		events    []string
		retryable bool
	}{
		{"overloaded 529", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, false, nil, true},
		{"rate limit 429", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, false, nil, true},
		{"server 500", 500, `{"type":"error","error":{"type":"api_error","message":"boom"}}`, false, nil, true},
		{"invalid request 400", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"bad key sk-ant-test-secret"}}`, false, nil, false},
		{"auth 401", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, false, nil, false},
		{"error body in 200", 200, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, false, nil, true},
		{"error event in stream", 200, "", true, []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\",\"content\":[],\"stop_reason\":null}}\n\n",
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAnthropic(t, tc.body)
			f.status, f.events = tc.status, tc.events
			p := newTestAnthropic(t, f.srv.URL)
			var err error
			if tc.stream {
				_, err = p.Stream(context.Background(), anthropicReq, nil)
			} else {
				_, err = p.Complete(context.Background(), anthropicReq)
			}
			var pe *ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ProviderError", err)
			}
			if pe.Retryable != tc.retryable || errors.Is(err, ErrProviderRejected) == tc.retryable || Permanent(err) == tc.retryable {
				t.Fatalf("retryable %v (err %v), want %v", pe.Retryable, err, tc.retryable)
			}
			if strings.Contains(err.Error(), "sk-ant-test-secret") {
				t.Errorf("error shows the key: %v", err)
			}
		})
	}
}

// TestAnthropicStreamCutByTransport: a stream whose connection ends before message_stop is an
// error only if the transport failed; a clean end without message_stop assembles to a body
// the parser refuses (stream_fault), never to a complete message.
func TestAnthropicStreamCutByTransport(t *testing.T) {
	f := newFakeAnthropic(t, "")
	f.events = []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_x\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null}}\n\n",
	}
	p := newTestAnthropic(t, f.srv.URL)
	resp, err := p.Stream(context.Background(), anthropicReq, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := parse.Parse(parse.FormatAnthropic, resp.Raw, parse.Options{Round: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete != parse.ReasonStreamFault || res.Calls[0].Candidate() {
		t.Fatalf("got %+v", res)
	}
}

// TestAnthropicConfigFromEnv: the key comes from the environment or a key file; a missing or
// empty file and a bad max tokens are errors that say which setting.
func TestAnthropicConfigFromEnv(t *testing.T) {
	for _, k := range []string{"AIRLOCK_ANTHROPIC_BASE_URL", "AIRLOCK_ANTHROPIC_API_KEY", "AIRLOCK_ANTHROPIC_API_KEY_FILE", "ANTHROPIC_API_KEY", "AIRLOCK_ANTHROPIC_MODEL", "AIRLOCK_ANTHROPIC_MAX_TOKENS", "AIRLOCK_STREAM"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	if _, configured, err := AnthropicConfigFromEnv(); configured || err != nil {
		t.Fatalf("nothing set: configured %v err %v", configured, err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("  sk-ant-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AIRLOCK_ANTHROPIC_API_KEY_FILE", keyFile)
	t.Setenv("AIRLOCK_ANTHROPIC_MAX_TOKENS", "2048")
	cfg, configured, err := AnthropicConfigFromEnv()
	if err != nil || !configured || cfg.APIKey != "sk-ant-from-file" || cfg.MaxTokens != 2048 || cfg.Model != DefaultAnthropicModel {
		t.Fatalf("cfg %v configured %v err %v", cfg, configured, err)
	}
	if strings.Contains(cfg.String(), "sk-ant") {
		t.Errorf("String shows the key: %s", cfg)
	}
	t.Setenv("AIRLOCK_ANTHROPIC_API_KEY_FILE", filepath.Join(dir, "missing"))
	if _, _, err := AnthropicConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "AIRLOCK_ANTHROPIC_API_KEY_FILE") {
		t.Errorf("missing key file: %v", err)
	}
	t.Setenv("AIRLOCK_ANTHROPIC_API_KEY_FILE", keyFile)
	t.Setenv("AIRLOCK_ANTHROPIC_MAX_TOKENS", "lots")
	if _, _, err := AnthropicConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "AIRLOCK_ANTHROPIC_MAX_TOKENS") {
		t.Errorf("bad max tokens: %v", err)
	}
}
