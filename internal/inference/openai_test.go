package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorded is what the fake OpenAI-compatible server saw.
type recorded struct {
	method, path, auth string
	body               []byte
}

// fakeServer is a real HTTP server speaking the chat-completions wire format: it records each
// request and answers with the given status and body bytes.
func fakeServer(t *testing.T, status int, body string) (*httptest.Server, *[]recorded) {
	t.Helper()
	var reqs []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request: %v", err)
		}
		reqs = append(reqs, recorded{r.Method, r.URL.Path, r.Header.Get("Authorization"), b})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &reqs
}

func newTestOpenAI(t *testing.T, cfg OpenAIConfig) *OpenAI {
	t.Helper()
	p, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A real gpt-4o-style response with odd but legal whitespace and a trailing newline: Raw must
// keep all of it (the SDK's ChatCompletion.RawJSON() would drop the trailing newline, which is
// why the adapter captures the body bytes with option.WithResponseBodyInto).
const okBody = `{
  "id": "chatcmpl-AbC123",
  "object": "chat.completion",
  "created": 1715000000,
  "model": "gpt-4o-2024-05-13",
  "choices": [ {
      "index": 0,
      "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_UIxyFTg4BR87BCmnbk2A5cts", "type": "function",
          "function": {"name": "send_money", "arguments": "{\"recipient\": \"US133000000121212121212\", \"amount\": 50.0, \"subject\": \"Spotify Premium\", \"date\": \"2023-12-01\"}"}}],
        "refusal": null},
      "logprobs": null, "finish_reason": "tool_calls"} ],
  "usage": {"prompt_tokens": 812, "completion_tokens": 41, "total_tokens": 853},
  "system_fingerprint": "fp_abc"
}
`

func fullRequest() Request {
	return Request{
		Round: 2,
		Messages: []Message{
			{Role: RoleSystem, Content: "You are an assistant."},
			{Role: RoleUser, Content: "Pay the bill <bill-december-2023.txt> & thanks"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"file_path": "bill-december-2023.txt"}`}}},
			{Role: RoleTool, ToolCallID: "call_1", Content: `{"untrusted":true,"capability":"read_file","data":"Bill ..."}`},
			{Role: RoleAssistant, Content: "Reading done.", ToolCalls: []ToolCall{{ID: "call_2", Name: "get_iban", Arguments: `{}`}}},
			{Role: RoleTool, ToolCallID: "call_2", Content: "DE89370400440532013000"},
		},
		Tools: []Tool{
			{Name: "send_money", Description: "Sends a transaction to the recipient.",
				Parameters: json.RawMessage(`{"type": "object", "properties": {"recipient": {"type": "string"}, "amount": {"type": "number", "minimum": 0.0}}, "required": ["recipient", "amount"], "additionalProperties": false}`)},
			{Name: "get_iban", Description: "Get the IBAN of the current bank account.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		},
	}
}

func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		t.Fatalf("JSON differs\n got %s\nwant %s", gb, wb)
	}
}

func TestOpenAIRequestAndExactRaw(t *testing.T) {
	srv, reqs := fakeServer(t, http.StatusOK, okBody)
	p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: "sk-test-123", Model: "gpt-4o-mini"})

	resp, err := p.Complete(context.Background(), fullRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Format != FormatOpenAI {
		t.Fatalf("format %q", resp.Format)
	}
	if string(resp.Raw) != okBody {
		t.Fatalf("Raw is not the exact body\n got %q\nwant %q", resp.Raw, okBody)
	}
	if resp.Usage != (Usage{InputTokens: 812, OutputTokens: 41}) {
		t.Fatalf("usage %+v", resp.Usage)
	}

	if len(*reqs) != 1 {
		t.Fatalf("%d requests", len(*reqs))
	}
	r := (*reqs)[0]
	if r.method != http.MethodPost || r.path != "/v1/chat/completions" {
		t.Fatalf("%s %s", r.method, r.path)
	}
	if r.auth != "Bearer sk-test-123" {
		t.Fatalf("Authorization %q", r.auth)
	}

	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &top); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "messages,model,tools" {
		t.Fatalf("request fields %v (no extra fields expected)", keys)
	}
	jsonEqual(t, top["model"], `"gpt-4o-mini"`)
	jsonEqual(t, top["messages"], `[
	  {"role":"system","content":"You are an assistant."},
	  {"role":"user","content":"Pay the bill <bill-december-2023.txt> & thanks"},
	  {"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"file_path\": \"bill-december-2023.txt\"}"}}]},
	  {"role":"tool","tool_call_id":"call_1","content":"{\"untrusted\":true,\"capability\":\"read_file\",\"data\":\"Bill ...\"}"},
	  {"role":"assistant","content":"Reading done.","tool_calls":[{"id":"call_2","type":"function","function":{"name":"get_iban","arguments":"{}"}}]},
	  {"role":"tool","tool_call_id":"call_2","content":"DE89370400440532013000"}]`)
	jsonEqual(t, top["tools"], `[
	  {"type":"function","function":{"name":"send_money","description":"Sends a transaction to the recipient.",
	    "parameters":{"type":"object","properties":{"recipient":{"type":"string"},"amount":{"type":"number","minimum":0.0}},"required":["recipient","amount"],"additionalProperties":false}}},
	  {"type":"function","function":{"name":"get_iban","description":"Get the IBAN of the current bank account.","parameters":{"type":"object","properties":{}}}}]`)
	// The schema is passed through as written: key order and the 0.0 literal survive.
	if !strings.Contains(string(top["tools"]), `"parameters":{"type":"object","properties":{"recipient":{"type":"string"},"amount":{"type":"number","minimum":0.0}},"required":["recipient","amount"],"additionalProperties":false}`) {
		t.Fatalf("schema not passed through: %s", top["tools"])
	}
}

func TestOpenAIModelAndMaxTokens(t *testing.T) {
	srv, reqs := fakeServer(t, http.StatusOK, `{"choices":[]}`)
	p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "llama3.1:8b", MaxTokens: 256})
	req := Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: ""}}}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	req.Model = "qwen2.5:7b"
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, (*reqs)[0].body, `{"model":"llama3.1:8b","max_tokens":256,"messages":[{"role":"user","content":""}]}`)
	jsonEqual(t, (*reqs)[1].body, `{"model":"qwen2.5:7b","max_tokens":256,"messages":[{"role":"user","content":""}]}`)
	if (*reqs)[0].auth != "" {
		t.Fatalf("no API key configured but Authorization %q sent", (*reqs)[0].auth)
	}

	// api.openai.com gets max_completion_tokens (checked on the parameters; no network).
	o := newTestOpenAI(t, OpenAIConfig{Model: "gpt-4o-mini", MaxTokens: 100})
	params, err := o.params(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, b, `{"model":"qwen2.5:7b","max_completion_tokens":100,"messages":[{"role":"user","content":""}]}`)
}

// Malformed tool-call arguments are the parser's business: the adapter passes them through
// untouched and does not fail.
func TestOpenAIMalformedArgumentsPassThrough(t *testing.T) {
	bodies := []string{
		// truncated JSON inside the arguments string
		`{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_x","type":"function","function":{"name":"send_money","arguments":"{\"recipient\": \"US13300000012121212121"}}]},"finish_reason":"length"}]}`,
		// arguments as an object instead of a string (llama.cpp / some vLLM parsers), a
		// double-encoded string, an empty string and a lone surrogate escape
		`{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"<function=send_money>{\"amount\": AMOUNT}</function>","tool_calls":[` +
			`{"id":"a","type":"function","function":{"name":"f","arguments":{"x":1}}},` +
			`{"id":"a","type":"function","function":{"name":" f ","arguments":"\"{\\\"x\\\": 1}\""}},` +
			`{"id":"b","type":"function","function":{"name":"g","arguments":""}},` +
			`{"id":"c","type":"function","function":{"name":"h","arguments":"{\"s\": \"\ud800\"}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n",
	}
	for i, body := range bodies {
		srv, _ := fakeServer(t, http.StatusOK, body)
		p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
		resp, err := p.Complete(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "pay"}}})
		if err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		if string(resp.Raw) != body {
			t.Fatalf("body %d changed:\n got %q\nwant %q", i, resp.Raw, body)
		}
		if resp.Usage != (Usage{}) {
			t.Fatalf("body %d: usage %+v without usage in body", i, resp.Usage)
		}
	}
}

func TestOpenAIErrors(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		body      string
		rejected  bool
		wantInMsg string
	}{
		{"openai 400", 400, `{"error":{"message":"Invalid schema for function 'send_money'","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}`, true, "Invalid schema"},
		{"ollama 404", 404, `{"error":"model \"llama9\" not found, try pulling it first"}`, true, "not found"},
		{"vllm 400", 400, `{"object":"error","message":"This model's maximum context length is 8192 tokens","type":"BadRequestError","param":null,"code":400}`, true, "maximum context length"},
		{"401", 401, `{"error":{"message":"Incorrect API key provided: sk-test***","type":"invalid_request_error","code":"invalid_api_key"}}`, true, "Incorrect API key"},
		{"plain text 422", 422, `unprocessable`, true, "unprocessable"},
		{"500", 500, `{"error":{"message":"The server had an error","type":"server_error"}}`, false, "server had an error"},
		{"503 html", 503, `<html>upstream down</html>`, false, "upstream down"},
		{"429", 429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, false, "Rate limit"},
		{"408", 408, `{"error":{"message":"timeout"}}`, false, "timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, reqs := fakeServer(t, tc.status, tc.body)
			p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "m"})
			_, err := p.Complete(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "hi"}}})
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, ErrProviderRejected); got != tc.rejected {
				t.Fatalf("errors.Is(ErrProviderRejected) = %v, want %v (%v)", got, tc.rejected, err)
			}
			if Permanent(err) != tc.rejected {
				t.Fatalf("Permanent = %v", Permanent(err))
			}
			var pe *ProviderError
			if !errors.As(err, &pe) || pe.StatusCode != tc.status || pe.Retryable == tc.rejected {
				t.Fatalf("ProviderError: %#v", pe)
			}
			if !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Fatalf("message %q lacks %q", err.Error(), tc.wantInMsg)
			}
			if len(*reqs) != 1 {
				t.Fatalf("%d attempts: the SDK must not retry (Temporal retries the activity)", len(*reqs))
			}
		})
	}
}

func TestOpenAIBadSuccessBodies(t *testing.T) {
	for name, body := range map[string]string{
		"error object": `{"error":{"message":"upstream provider failed","code":502}}`,
		"not json":     `<html>gateway</html>`,
		"truncated":    `{"id":"x","choices":[{"index":0,"message":{"role":"assis`,
		"array":        `[]`,
		"empty":        ``,
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := fakeServer(t, http.StatusOK, body)
			p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
			_, err := p.Complete(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "hi"}}})
			var pe *ProviderError
			if !errors.As(err, &pe) || !pe.Retryable || errors.Is(err, ErrProviderRejected) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestOpenAITransportErrors(t *testing.T) {
	var hits atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	p := newTestOpenAI(t, OpenAIConfig{BaseURL: slow.URL, Model: "m", Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := p.Complete(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if err == nil || Permanent(err) || time.Since(start) > time.Second {
		t.Fatalf("timeout: err=%v after %v", err, time.Since(start))
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout not wrapped: %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("%d attempts", hits.Load())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p = newTestOpenAI(t, OpenAIConfig{BaseURL: slow.URL, Model: "m"})
	if _, err := p.Complete(ctx, Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "hi"}}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	p = newTestOpenAI(t, OpenAIConfig{BaseURL: url, Model: "m"})
	if _, err := p.Complete(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "hi"}}}); err == nil || Permanent(err) {
		t.Fatalf("connection refused: %v", err)
	}
}

func TestOpenAIInvalidRequests(t *testing.T) {
	srv, reqs := fakeServer(t, http.StatusOK, okBody)
	p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
	user := Message{Role: RoleUser, Content: "hi"}
	for name, req := range map[string]Request{
		"no messages":       {Round: 1},
		"unknown role":      {Round: 1, Messages: []Message{{Role: "developer", Content: "x"}}},
		"tool without id":   {Round: 1, Messages: []Message{user, {Role: RoleTool, Content: "r"}}},
		"call without id":   {Round: 1, Messages: []Message{user, {Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f", Arguments: "{}"}}}}},
		"schema not object": {Round: 1, Messages: []Message{user}, Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`["x"]`)}}},
		"schema not json":   {Round: 1, Messages: []Message{user}, Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`{"type":`)}}},
		"tool without name": {Round: 1, Messages: []Message{user}, Tools: []Tool{{Description: "d"}}},
	} {
		if _, err := p.Complete(context.Background(), req); !errors.Is(err, ErrInvalidRequest) || !Permanent(err) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	noModel := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL})
	if _, err := noModel.Complete(context.Background(), Request{Round: 1, Messages: []Message{user}}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("no model: %v", err)
	}
	if len(*reqs) != 0 {
		t.Fatalf("invalid requests reached the server: %d", len(*reqs))
	}
}

func TestNewOpenAIConfig(t *testing.T) {
	for _, bad := range []OpenAIConfig{{BaseURL: "localhost:11434"}, {BaseURL: "ftp://x/v1"}, {BaseURL: "http://"}, {Timeout: -1}, {MaxTokens: -1}} {
		if _, err := NewOpenAI(bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
	if _, err := NewOpenAI(OpenAIConfig{BaseURL: "http://127.0.0.1:11434/v1"}); err != nil {
		t.Fatal(err)
	}

	t.Setenv("AIRLOCK_OPENAI_BASE_URL", "http://ollama:11434/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "")
	t.Setenv("OPENAI_API_KEY", "sk-fallback")
	t.Setenv("AIRLOCK_OPENAI_MODEL", "")
	cfg := OpenAIConfigFromEnv()
	if cfg.BaseURL != "http://ollama:11434/v1" || cfg.APIKey != "sk-fallback" || cfg.Model != DefaultOpenAIModel {
		t.Fatalf("%+v", cfg)
	}
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "sk-airlock")
	t.Setenv("AIRLOCK_OPENAI_MODEL", "qwen2.5:7b")
	cfg = OpenAIConfigFromEnv()
	if cfg.APIKey != "sk-airlock" || cfg.Model != "qwen2.5:7b" {
		t.Fatalf("%+v", cfg)
	}
}

// The SDK's own environment defaults must not redirect or decorate requests.
func TestOpenAIIgnoresSDKEnvironment(t *testing.T) {
	var gotOrg, gotCustom string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotOrg, gotCustom = r.Header.Get("OpenAI-Organization"), r.Header.Get("X-Custom")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[]}`)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Custom: yes")
	p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
	if _, err := p.Complete(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if gotOrg != "" || gotCustom != "" {
		t.Fatalf("SDK environment leaked into the request: org %q custom %q", gotOrg, gotCustom)
	}
}

// No error shows the API key, even when the provider echoes it in full (as local servers
// do), nor the password of a base URL that does not parse.
func TestOpenAIErrorsNeverShowTheAPIKey(t *testing.T) {
	const key = "sk-live-Hunter2secretKey"
	for _, status := range []int{http.StatusUnauthorized, http.StatusOK, http.StatusInternalServerError} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			msg, _ := json.Marshal("Incorrect API key provided: " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			_, _ = io.WriteString(w, `{"error":{"message":`+string(msg)+`,"code":"invalid_api_key"}}`)
		}))
		t.Cleanup(srv.Close)
		p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: key, Model: "m"})
		_, err := p.Complete(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "hi"}}})
		var pe *ProviderError
		if !errors.As(err, &pe) || pe.StatusCode != status {
			t.Fatalf("HTTP %d: err = %v", status, err)
		}
		if strings.Contains(err.Error(), "Hunter2secret") || strings.Contains(pe.Message, "Hunter2secret") {
			t.Errorf("HTTP %d: error shows the API key: %v", status, err)
		}
		if !strings.Contains(err.Error(), "Incorrect API key provided") {
			t.Errorf("HTTP %d: the provider's message is lost: %v", status, err)
		}
	}
	for _, base := range []string{"https://user:Hunter2secret@api.example:bad/v1", "https://user:Hunter2/secret@api.example/v1", "ftp://user:Hunter2secret@x/v1", "user:Hunter2secret@host"} {
		_, err := NewOpenAI(OpenAIConfig{BaseURL: base, APIKey: key})
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("NewOpenAI(%q) = %v: want an error without the secret", base, err)
		}
	}
	if s := fmt.Sprintf("%+v", OpenAIConfig{BaseURL: "https://u:Hunter2secret@h/v1", APIKey: key}); strings.Contains(s, "secret") {
		t.Errorf("OpenAIConfig prints a secret: %s", s)
	}
}

// A provider keeps its connections: 16 rounds in flight at once, three times over, open at
// most 16 connections to the endpoint (net/http's default transport keeps 2 idle per host,
// and would open about 40).
func TestProviderKeepsConnectionsAcrossConcurrentRounds(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, okBody)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "gpt-4o"})
	const inFlight = 16
	for range 3 {
		var wg sync.WaitGroup
		errs := make(chan error, inFlight)
		for range inFlight {
			wg.Go(func() {
				if _, err := p.Complete(context.Background(), fullRequest()); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// Not exactly 16: net/http hands a connection back to its pool from its own goroutine
	// after the body is closed, so a round of the next batch can find the pool one short and
	// dial (2 runs in 100 did). Half as many again still tells a kept pool from the default's
	// (about 40).
	if n, most := opened.Load(), int64(inFlight+inFlight/2); n > most {
		t.Fatalf("48 rounds, %d at once, opened %d connections: want at most %d (idle ones reused)", inFlight, n, most)
	}
}
