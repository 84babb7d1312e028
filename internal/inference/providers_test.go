package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/traffic"
)

// replayServer serves one recorded provider response (a file of ../shared/provider-traffic)
// as an HTTP answer of contentType and records every request body it was sent.
func replayServer(t *testing.T, file, contentType string, status int) (*httptest.Server, *[][]byte, *[]*http.Request) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(traffic.DefaultDir, file))
	if err != nil {
		t.Fatalf("the provider-traffic corpus is required: %v", err)
	}
	var bodies [][]byte
	var reqs []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, b)
		reqs = append(reqs, r.Clone(context.Background()))
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv, &bodies, &reqs
}

// TestResponsesStreamFromRecording: the Responses adapter reads OpenAI's recorded function-call
// stream into the response object the parser reads as the manifest says, shows the call's
// deltas while it streams, and sends a stateless request (store false, encrypted reasoning
// asked for, the registry's schema verbatim, not strict).
func TestResponsesStreamFromRecording(t *testing.T) {
	srv, bodies, reqs := replayServer(t, "openai-responses_stream_function-call.sse", "text/event-stream", 200)
	p, err := NewOpenAIResponses(OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	var deltas []parse.Delta
	resp, err := p.Stream(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleSystem, Content: "sys"}, {Role: RoleUser, Content: "capital of France?"}},
		Tools: []Tool{{Name: "get_capital", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"country":{"type":"string"}}}`)}}},
		func(d parse.Delta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Format != FormatResponses || resp.Usage.InputTokens != 255 || resp.Usage.OutputTokens != 16 {
		t.Fatalf("format %q usage %+v", resp.Format, resp.Usage)
	}
	res, err := parse.Parse(parse.Format(resp.Format), resp.Raw, parse.Options{Round: 1})
	if err != nil || res.Incomplete != "" || len(res.Calls) != 1 {
		t.Fatalf("parse: %v %+v", err, res)
	}
	if c := res.Calls[0]; c.CallID != "call_kL0PCQV7M2WMoVX8V8OtYSAL" || c.Name != "get_capital" || string(c.Arguments) != `{"country":"France"}` {
		t.Fatalf("call %+v", c)
	}
	var args strings.Builder
	for _, d := range deltas {
		if d.Kind == parse.DeltaCallArgs {
			args.WriteString(d.Text)
		}
	}
	if len(deltas) == 0 || deltas[0].Kind != parse.DeltaCallStart || deltas[0].Name != "get_capital" || args.String() != `{"country":"France"}` {
		t.Fatalf("deltas %+v", deltas)
	}
	if (*reqs)[0].URL.Path != "/v1/responses" || (*reqs)[0].Header.Get("Authorization") != "Bearer sk-test" {
		t.Fatalf("request %s %q", (*reqs)[0].URL.Path, (*reqs)[0].Header.Get("Authorization"))
	}
	jsonEqual(t, (*bodies)[0], `{"model":"gpt-4o","store":false,"include":["reasoning.encrypted_content"],"input":[{"role":"system","content":"sys"},{"role":"user","content":"capital of France?"}],`+
		`"tools":[{"type":"function","name":"get_capital","description":"d","parameters":{"type":"object","properties":{"country":{"type":"string"}}},"strict":false}],"stream":true}`)
}

// TestResponsesSendsReasoningAndCallsBack: an assistant message parsed from a Responses answer
// goes back as its reasoning items (verbatim, before the calls), its function_call items and
// the tool results as function_call_output items.
func TestResponsesSendsReasoningAndCallsBack(t *testing.T) {
	answer := `{"object":"response","status":"completed","output":[` +
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA=="},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_capital","arguments":"{\"country\":\"France\"}","status":"completed"}]}`
	res, err := parse.Parse(parse.FormatResponses, []byte(answer), parse.Options{Round: 1})
	if err != nil || len(res.Calls) != 1 || !res.Calls[0].Candidate() {
		t.Fatalf("parse: %v %+v", err, res)
	}
	if string(res.ProviderState) != `{"reasoning":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA=="}]}` {
		t.Fatalf("provider state %s", res.ProviderState)
	}
	srv, bodies, _ := replayServer(t, "openai-responses_stream_function-call.sse", "text/event-stream", 200)
	p, err := NewOpenAIResponses(OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "o4-mini", NoStream: true, MaxTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	assistant := Message{Role: RoleAssistant, ProviderState: res.ProviderState}
	for _, c := range res.Calls {
		assistant.ToolCalls = append(assistant.ToolCalls, ToolCall{ID: c.CallID, Name: c.Name, Arguments: string(c.Arguments), ProviderState: c.ProviderState})
	}
	_, err = p.Complete(context.Background(), Request{Round: 2, Messages: []Message{{Role: RoleUser, Content: "q"}, assistant, {Role: RoleTool, ToolCallID: "call_1", Content: `{"data":"Paris"}`}}})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, (*bodies)[0], `{"model":"o4-mini","store":false,"include":["reasoning.encrypted_content"],"input":[{"role":"user","content":"q"},`+
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA=="},`+
		`{"type":"function_call","call_id":"call_1","name":"get_capital","arguments":"{\"country\":\"France\"}"},`+
		`{"type":"function_call_output","call_id":"call_1","output":"{\"data\":\"Paris\"}"}],"max_output_tokens":100}`)
}

// TestResponsesErrorEvent: the recorded insufficient_quota error event is a provider error
// that is not retried (the same request cannot succeed).
func TestResponsesErrorEvent(t *testing.T) {
	srv, _, _ := replayServer(t, "openai-responses_stream_error-event.sse", "text/event-stream", 200)
	p, err := NewOpenAIResponses(OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "gpt-5-nano"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Stream(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "hi"}}}, nil)
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Retryable || !errors.Is(err, ErrProviderRejected) || !strings.Contains(pe.Message, "exceeded your current quota") {
		t.Fatalf("err %v", err)
	}
}

// TestGeminiThoughtSignatureSentBack: Gemini's recorded tool call carries its thought signature
// in extra_content; the turn keeps it (parse → context message) and the next request sends it
// back on the message, where it came from (Gemini 3 refuses a follow-up without it).
func TestGeminiThoughtSignatureSentBack(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(traffic.DefaultDir, "gemini-openai-compat_json_tool-call_no-id.json"))
	if err != nil {
		t.Fatalf("the provider-traffic corpus is required: %v", err)
	}
	res, err := parse.Parse(parse.FormatOpenAI, data, parse.Options{Round: 1})
	if err != nil || len(res.Calls) != 1 || !res.Calls[0].Candidate() {
		t.Fatalf("parse: %v %+v", err, res)
	}
	var state struct {
		Extra struct {
			Google struct {
				Sig string `json:"thought_signature"`
			} `json:"google"`
		} `json:"extra_content"`
		Sig string `json:"thought_signature"`
	}
	if err := json.Unmarshal(res.ProviderState, &state); err != nil || !strings.HasPrefix(state.Extra.Google.Sig, "AVSoXO4A") || state.Sig != state.Extra.Google.Sig {
		t.Fatalf("provider state %s: %v", res.ProviderState, err)
	}
	// A per-call signature (Gemini 3 puts it on each tool call) goes back on that call.
	callState := json.RawMessage(`{"extra_content":{"google":{"thought_signature":"SIG-CALL"}}}`)
	srv, bodies, _ := replayServer(t, "gemini-openai-compat_json_tool-call_no-id.json", "application/json", 200)
	p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "gemini-3-pro", NoStream: true})
	c := res.Calls[0]
	_, err = p.Complete(context.Background(), Request{Round: 2, Messages: []Message{{Role: RoleUser, Content: "time?"},
		{Role: RoleAssistant, ProviderState: res.ProviderState, ToolCalls: []ToolCall{{ID: c.CallID, Name: c.Name, Arguments: string(c.Arguments), ProviderState: callState}}},
		{Role: RoleTool, ToolCallID: c.CallID, Content: "noon"}}})
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Messages []struct {
			Role      string          `json:"role"`
			Extra     json.RawMessage `json:"extra_content"`
			Sig       string          `json:"thought_signature"`
			ToolCalls []struct {
				Extra json.RawMessage `json:"extra_content"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal((*bodies)[0], &sent); err != nil {
		t.Fatal(err)
	}
	a := sent.Messages[1]
	if a.Role != "assistant" || !bytes.Contains(a.Extra, []byte(state.Sig)) || a.Sig != state.Sig || len(a.ToolCalls) != 1 || string(a.ToolCalls[0].Extra) != `{"google":{"thought_signature":"SIG-CALL"}}` {
		t.Fatalf("the assistant message sent back lost its signatures: %s", (*bodies)[0])
	}
}

// TestAzureDeploymentRequest: AIRLOCK_PROVIDER=azure sends to the deployment URL with
// api-version and the key in the api-key header (never as a bearer token), and reads Azure's
// recorded stream (its prompt-filter first chunk) as the manifest says.
func TestAzureDeploymentRequest(t *testing.T) {
	srv, _, reqs := replayServer(t, "azure-openai-chat_stream_text_filters.sse", "text/event-stream", 200)
	t.Setenv("AIRLOCK_AZURE_OPENAI_ENDPOINT", srv.URL+"/")
	t.Setenv("AIRLOCK_AZURE_OPENAI_DEPLOYMENT", "gpt-5-nano-prod")
	t.Setenv("AIRLOCK_AZURE_OPENAI_API_KEY", "azure-secret")
	t.Setenv("AIRLOCK_AZURE_OPENAI_API_VERSION", "")
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", "")
	t.Setenv("AIRLOCK_OPENAI_MODEL", "")
	svc, _ := ServiceNamed("azure")
	cfg, err := ServiceConfigFromEnv(svc)
	if err != nil {
		t.Fatal(err)
	}
	p := newTestOpenAI(t, cfg)
	resp, err := p.Stream(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "capital of Denmark?"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := (*reqs)[0]
	if r.URL.Path != "/openai/deployments/gpt-5-nano-prod/chat/completions" || r.URL.Query().Get("api-version") != DefaultAzureAPIVersion ||
		r.Header.Get("api-key") != "azure-secret" || r.Header.Get("Authorization") != "" {
		t.Fatalf("request %s?%s api-key %q authorization %q", r.URL.Path, r.URL.RawQuery, r.Header.Get("api-key"), r.Header.Get("Authorization"))
	}
	res, err := parse.Parse(parse.FormatOpenAI, resp.Raw, parse.Options{})
	if err != nil || res.Incomplete != "" || res.Text != "Capital of Denmark." {
		t.Fatalf("parse: %v %+v", err, res)
	}
	if d := p.Describe(); !strings.Contains(d, "azure chat.completions") || strings.Contains(d, "azure-secret") {
		t.Fatalf("describe %q", d)
	}
}

// TestServicesNeverSendAnotherProvidersKey: a named service reads its own key variable, never
// OPENAI_API_KEY, and one without a default model says which variable to set.
func TestServicesNeverSendAnotherProvidersKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-openai")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "")
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", "")
	t.Setenv("GROQ_API_KEY", "gsk-groq")
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("AIRLOCK_OPENAI_MODEL", "openai/gpt-oss-120b")
	groq, _ := ServiceNamed("groq")
	cfg, err := ServiceConfigFromEnv(groq)
	if err != nil || cfg.APIKey != "gsk-groq" || cfg.BaseURL != "https://api.groq.com/openai/v1" || cfg.Model != "openai/gpt-oss-120b" {
		t.Fatalf("groq: %v %+v", err, cfg)
	}
	gemini, _ := ServiceNamed("gemini")
	if cfg, err := ServiceConfigFromEnv(gemini); err != nil || cfg.APIKey != "" {
		t.Fatalf("gemini got key %q (%v): OPENAI_API_KEY must never go to another provider", cfg.APIKey, err)
	}
	// AIRLOCK_OPENAI_API_KEY is OpenAI's (and local servers'), never a hosted provider's.
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "sk-airlock-openai")
	if cfg, err := ServiceConfigFromEnv(gemini); err != nil || cfg.APIKey != "" {
		t.Fatalf("gemini got key %q (%v) from AIRLOCK_OPENAI_API_KEY", cfg.APIKey, err)
	}
	if cfg, err := ServiceConfigFromEnv(groq); err != nil || cfg.APIKey != "gsk-groq" || cfg.KeySource != "GROQ_API_KEY" {
		t.Fatalf("groq: key %q from %q (%v)", cfg.APIKey, cfg.KeySource, err)
	}
	t.Setenv("AIRLOCK_GROQ_API_KEY", "gsk-airlock")
	if cfg, err := ServiceConfigFromEnv(groq); err != nil || cfg.APIKey != "gsk-airlock" || cfg.KeySource != "AIRLOCK_GROQ_API_KEY" {
		t.Fatalf("groq: key %q from %q (%v)", cfg.APIKey, cfg.KeySource, err)
	}
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "")
	openai, _ := ServiceNamed("openai")
	if cfg, err := ServiceConfigFromEnv(openai); err != nil || cfg.APIKey != "sk-openai" {
		t.Fatalf("openai: %v %+v", err, cfg)
	}
	t.Setenv("AIRLOCK_OPENAI_MODEL", "")
	if _, err := ServiceConfigFromEnv(groq); err == nil || !strings.Contains(err.Error(), "AIRLOCK_OPENAI_MODEL") {
		t.Fatalf("groq without a model: %v", err)
	}
	azure, _ := ServiceNamed("azure")
	t.Setenv("AIRLOCK_AZURE_OPENAI_ENDPOINT", "")
	if _, err := ServiceConfigFromEnv(azure); err == nil || !strings.Contains(err.Error(), "AIRLOCK_AZURE_OPENAI_ENDPOINT") {
		t.Fatalf("azure without an endpoint: %v", err)
	}
	t.Setenv("AIRLOCK_AZURE_OPENAI_ENDPOINT", "http://myres.openai.azure.com")
	t.Setenv("AIRLOCK_AZURE_OPENAI_DEPLOYMENT", "d")
	if _, err := ServiceConfigFromEnv(azure); err == nil || !strings.Contains(err.Error(), "use https") {
		t.Fatalf("azure over plain http: %v", err)
	}
}

// TestAnswerTooLargeIsRefusedOnce: an answer over MaxResponseBytes, unstreamed or streamed, is
// ErrResponseTooLarge naming its size and the limit, and Permanent (never asked again).
func TestAnswerTooLargeIsRefusedOnce(t *testing.T) {
	big := strings.Repeat("x", MaxResponseBytes+100)
	body := `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + big + `"},"finish_reason":"stop"}]}`
	var sse strings.Builder
	for i := 0; i < len(big); i += 4096 {
		piece := big[i:min(i+4096, len(big))]
		sse.WriteString(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + piece + `"},"finish_reason":null}]}` + "\n\n")
	}
	sse.WriteString(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	for _, tc := range []struct {
		name, ctype, body string
		stream            bool
	}{{"unstreamed", "application/json", body, false}, {"streamed", "text/event-stream", sse.String(), true}, {"stream answered with a body", "application/json", body, true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n++
				w.Header().Set("Content-Type", tc.ctype)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
			req := Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "essay"}}}
			var err error
			if tc.stream {
				_, err = p.Stream(context.Background(), req, nil)
			} else {
				_, err = p.Complete(context.Background(), req)
			}
			var tl *ResponseTooLargeError
			if !errors.As(err, &tl) || !errors.Is(err, ErrResponseTooLarge) || !Permanent(err) || tl.Limit != MaxResponseBytes ||
				!strings.Contains(err.Error(), "524288 bytes") {
				t.Fatalf("err %v", err)
			}
			if n != 1 {
				t.Fatalf("asked %d times", n)
			}
		})
	}
}

// TestOllamaNativeFromRecordings: the native adapter posts to /api/chat and reads Ollama's
// recorded NDJSON stream and its recorded tool-call body (no id: one is assigned; done:true
// without done_reason is a normal end); a call goes back as its argument object and its
// result with the tool's name.
func TestOllamaNativeFromRecordings(t *testing.T) {
	srv, bodies, reqs := replayServer(t, "ollama-native_stream_text_docs-example.ndjson", "application/x-ndjson", 200)
	p, err := NewOllama(OpenAIConfig{BaseURL: srv.URL, Model: "llama3.2", MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	resp, err := p.Stream(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "why is the sky blue?"}}},
		func(d parse.Delta) { text.WriteString(d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	res, err := parse.Parse(parse.Format(resp.Format), resp.Raw, parse.Options{})
	if err != nil || res.Incomplete != "" || res.Text != "The" || text.String() != "The" {
		t.Fatalf("parse: %v %+v (shown %q)", err, res, text.String())
	}
	if (*reqs)[0].URL.Path != "/api/chat" {
		t.Fatalf("path %s", (*reqs)[0].URL.Path)
	}
	jsonEqual(t, (*bodies)[0], `{"model":"llama3.2","messages":[{"role":"user","content":"why is the sky blue?"}],"options":{"num_predict":64},"stream":true}`)

	srv2, bodies2, _ := replayServer(t, "ollama-native_json_tool-call_thinking.json", "application/json", 200)
	p2, err := NewOllama(OpenAIConfig{BaseURL: srv2.URL, Model: "qwen3", NoStream: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err = p2.Stream(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "search"}},
		Tools: []Tool{{Name: "search", Parameters: json.RawMessage(`{"type":"object"}`)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = parse.Parse(parse.Format(resp.Format), resp.Raw, parse.Options{Round: 1})
	if err != nil || len(res.Calls) != 1 || !res.Calls[0].Candidate() || !res.Calls[0].IDAssigned || res.Calls[0].Name != "search" {
		t.Fatalf("parse: %v %+v", err, res)
	}
	c := res.Calls[0]
	if _, err := p2.Complete(context.Background(), Request{Round: 2, Messages: []Message{{Role: RoleUser, Content: "search"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: c.CallID, Name: c.Name, Arguments: string(c.Arguments)}}},
		{Role: RoleTool, ToolCallID: c.CallID, Content: "results"}}}); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, (*bodies2)[1], `{"model":"qwen3","messages":[{"role":"user","content":"search"},`+
		`{"role":"assistant","content":"","tool_calls":[{"function":{"name":"search","arguments":{"query":"ollama bash lib"}}}]},`+
		`{"role":"tool","content":"results","tool_name":"search"}],"stream":false}`)
	if _, err := NewOllama(OpenAIConfig{BaseURL: "http://localhost:11434/v1", Model: "m"}); err == nil || !strings.Contains(err.Error(), "server root") {
		t.Fatalf("a /v1 base URL: %v", err)
	}
}

// TestOllamaNativeErrorBody: the recorded 502 error body is a retryable provider error naming
// Ollama's message.
func TestOllamaNativeErrorBody(t *testing.T) {
	srv, _, _ := replayServer(t, "ollama-native_error_502_upstream.json", "application/json", 502)
	p, err := NewOllama(OpenAIConfig{BaseURL: srv.URL, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Complete(context.Background(), Request{Round: 1, Messages: []Message{{Role: RoleUser, Content: "x"}}})
	var pe *ProviderError
	if !errors.As(err, &pe) || !pe.Retryable || pe.StatusCode != 502 || !strings.Contains(pe.Message, "upstream error") {
		t.Fatalf("err %v", err)
	}
}
