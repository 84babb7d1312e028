package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/redact"
)

// DefaultOpenAIModel is the model used when neither the request nor AIRLOCK_OPENAI_MODEL names
// one.
const DefaultOpenAIModel = "gpt-4o-mini"

// DefaultOpenAIBaseURL is the OpenAI API endpoint used when no base URL is configured.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// maxErrorExcerpt bounds the provider error text kept in a ProviderError.
const maxErrorExcerpt = 512

// OpenAIConfig configures the OpenAI-compatible adapter.
type OpenAIConfig struct {
	// BaseURL is the API root including the version path, e.g. "https://api.openai.com/v1",
	// "http://localhost:11434/v1" (Ollama), "http://localhost:8000/v1" (vLLM) or
	// "http://localhost:8080/v1" (llama.cpp). Empty means DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>"; empty sends no Authorization header
	// (local servers).
	APIKey string
	// Model is used when Request.Model is empty.
	Model string
	// Timeout bounds one HTTP attempt; 0 leaves only the context's deadline (the Infer
	// activity's start-to-close timeout).
	Timeout time.Duration
	// MaxTokens caps the completion length; 0 leaves the provider default. It is sent as
	// max_completion_tokens to api.openai.com (whose reasoning models refuse max_tokens) and as
	// max_tokens to every other endpoint (vLLM, Ollama and llama.cpp all accept it).
	MaxTokens int64
	// NoStream makes Stream send an unstreamed request (AIRLOCK_STREAM=0), for servers whose
	// streaming is broken.
	NoStream bool
	// Service names the provider behind the endpoint for the worker's start line and doctor
	// ("openai", "azure", "gemini", "groq", ...; "" reads as "openai-compatible"). It changes
	// nothing on the wire: every quirk of a compatible server is read by the parser.
	Service string
	// APIKeyHeader, when set, sends the key in this header instead of "Authorization: Bearer"
	// (Azure OpenAI: "api-key").
	APIKeyHeader string
	// APIVersion, when set, is sent as the api-version query parameter (Azure OpenAI's
	// deployment URLs require it).
	APIVersion string
	// KeySource names the variable the key was read from, for Describe ("" none or unknown).
	KeySource string
}

// authOptions are the SDK options that authenticate requests with cfg's key.
func (c OpenAIConfig) authOptions() []option.RequestOption {
	var opts []option.RequestOption
	switch {
	case c.APIKey == "":
	case c.APIKeyHeader != "":
		opts = append(opts, option.WithHeader(c.APIKeyHeader, c.APIKey))
	default:
		opts = append(opts, option.WithAPIKey(c.APIKey))
	}
	if c.APIVersion != "" {
		opts = append(opts, option.WithQuery("api-version", c.APIVersion))
	}
	return opts
}

// secrets are the values scrubbed from every error: the key and the base URL's secrets.
func (c OpenAIConfig) secrets() []string {
	return append([]string{c.APIKey}, redact.URLSecrets(c.BaseURL)...)
}

// Describe names the API, model and endpoint this adapter serves (for the worker's start line
// and doctor), with secrets masked.
func (p *OpenAI) Describe() string { return describe(p.cfg.Service, "chat.completions", p.cfg) }

// describe is "<service> <api>, model <model>, at <base URL> (streamed|unstreamed)".
func describe(service, api string, cfg OpenAIConfig) string {
	if service == "" {
		service = "openai-compatible"
	}
	mode := "streamed"
	if cfg.NoStream {
		mode = "unstreamed (AIRLOCK_STREAM=0)"
	}
	extra := ""
	if cfg.APIVersion != "" {
		extra = " api-version " + cfg.APIVersion
	}
	key := "no key"
	switch {
	case cfg.KeySource != "":
		key = "key from " + cfg.KeySource
	case cfg.APIKey != "":
		key = "key set"
	}
	return fmt.Sprintf("%s %s, model %s, at %s%s, %s, %s", service, api, cfg.Model, redact.URL(cfg.BaseURL), extra, mode, key)
}

// String describes the configuration with the API key and base URL secrets masked, so a
// printed or logged OpenAIConfig never shows them.
func (c OpenAIConfig) String() string {
	key := ""
	if c.APIKey != "" {
		key = redact.Mask
	}
	return fmt.Sprintf("{BaseURL:%s APIKey:%s Model:%s Timeout:%s MaxTokens:%d}", redact.URL(c.BaseURL), key, c.Model, c.Timeout, c.MaxTokens)
}

// OpenAIConfigFromEnv reads AIRLOCK_OPENAI_BASE_URL, AIRLOCK_OPENAI_API_KEY (falling back to
// OPENAI_API_KEY), AIRLOCK_OPENAI_MODEL (default DefaultOpenAIModel) and AIRLOCK_STREAM ("0":
// no streaming). No other environment
// variable is consulted; in particular the SDK's own OPENAI_* defaults are not applied.
func OpenAIConfigFromEnv() OpenAIConfig {
	cfg := OpenAIConfig{
		BaseURL: os.Getenv("AIRLOCK_OPENAI_BASE_URL"),
		APIKey:  os.Getenv("AIRLOCK_OPENAI_API_KEY"),
		Model:   os.Getenv("AIRLOCK_OPENAI_MODEL"),
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	if cfg.Model == "" {
		cfg.Model = DefaultOpenAIModel
	}
	cfg.NoStream = os.Getenv("AIRLOCK_STREAM") == "0"
	return cfg
}

// OpenAI is a Provider for any OpenAI-compatible chat-completions endpoint, built on the
// official SDK (github.com/openai/openai-go/v3). The SDK's retries are disabled: the Infer
// activity is retried by Temporal instead. Response.Raw is the exact response body; the SDK
// never decodes it.
type OpenAI struct {
	cfg                 OpenAIConfig
	secrets             []string // the API key and base URL secrets, scrubbed from every error
	chat                openai.ChatCompletionService
	maxCompletionTokens bool
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI validates cfg and returns the adapter. It does not contact the endpoint.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultOpenAIBaseURL
	}
	u, err := checkBaseURL("openai", cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout < 0 || cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("inference: openai: negative timeout or max tokens")
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(newHTTPClient()),
		option.WithBaseURL(cfg.BaseURL),
		option.WithMaxRetries(0),
	}
	opts = append(opts, cfg.authOptions()...)
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	return &OpenAI{
		cfg:     cfg,
		secrets: cfg.secrets(),
		// The service is built directly, not through openai.NewClient, so that the SDK's
		// environment defaults (OPENAI_BASE_URL, OPENAI_ORG_ID, OPENAI_CUSTOM_HEADERS, …)
		// cannot change where or what Airlock sends.
		chat:                openai.NewChatCompletionService(opts...),
		maxCompletionTokens: strings.EqualFold(u.Hostname(), "api.openai.com"),
	}, nil
}

// Complete sends one chat-completions request (non-streaming) and returns the exact response
// body with FormatOpenAI. Tool calls in the body are not decoded, validated or repaired here;
// malformed arguments reach the strict parser untouched.
//
// Errors: ErrInvalidRequest for a request that cannot be expressed; *ProviderError for HTTP
// failures (errors.Is ErrProviderRejected for 4xx other than 408/409/429, retryable otherwise)
// and for 2xx bodies that are not a JSON object or carry only an error object; transport and
// context errors wrapped as they are.
func (p *OpenAI) Complete(ctx context.Context, req Request) (Response, error) {
	params, err := p.params(req)
	if err != nil {
		return Response{}, err
	}
	var (
		body     []byte
		httpResp *http.Response
	)
	_, err = p.chat.New(ctx, params, option.WithResponseBodyInto(&body), option.WithResponseInto(&httpResp))
	if err != nil {
		return Response{}, p.scrub(classifyHTTPError("openai", err, httpResp))
	}
	status := http.StatusOK
	if httpResp != nil {
		status = httpResp.StatusCode
	}
	if len(body) > MaxResponseBytes {
		return Response{}, &ResponseTooLargeError{Provider: "openai", Size: int64(len(body)), Limit: MaxResponseBytes}
	}
	usage, err := inspectBody(body, status)
	if err != nil {
		return Response{}, p.scrub(err)
	}
	return Response{Format: FormatOpenAI, Raw: json.RawMessage(body), Usage: usage}, nil
}

// scrub removes the API key and the base URL's secrets from err: a provider may echo the
// key in its error body (a local server often does, in full). A *ProviderError keeps its type,
// with its Message scrubbed; any other error is wrapped by redact.Error.
func (p *OpenAI) scrub(err error) error { return scrubSecrets(err, p.secrets) }

// scrubSecrets removes secrets from err, keeping a *ProviderError's type with its Message and
// cause scrubbed, and wrapping any other error with redact.Error (every provider's errors).
func scrubSecrets(err error, secrets []string) error {
	if pe, ok := err.(*ProviderError); ok {
		pe.Message = redact.String(pe.Message, secrets...)
		if pe.Err != nil {
			pe.Err = redact.Error(pe.Err, secrets...)
		}
		return pe
	}
	return redact.Error(err, secrets...)
}

// params maps a Request onto the SDK's chat-completions parameters.
func (p *OpenAI) params(req Request) (openai.ChatCompletionNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	if model == "" {
		return openai.ChatCompletionNewParams{}, fmt.Errorf("%w: no model", ErrInvalidRequest)
	}
	if len(req.Messages) == 0 {
		return openai.ChatCompletionNewParams{}, fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	for i, m := range req.Messages {
		msg, err := openAIMessage(m)
		if err != nil {
			return openai.ChatCompletionNewParams{}, fmt.Errorf("%w: message %d: %w", ErrInvalidRequest, i, err)
		}
		params.Messages = append(params.Messages, msg)
	}
	for i, t := range req.Tools {
		tool, err := openAITool(t)
		if err != nil {
			return openai.ChatCompletionNewParams{}, fmt.Errorf("%w: tool %d (%q): %w", ErrInvalidRequest, i, t.Name, err)
		}
		params.Tools = append(params.Tools, tool)
	}
	if p.cfg.MaxTokens > 0 {
		if p.maxCompletionTokens {
			params.MaxCompletionTokens = openai.Int(p.cfg.MaxTokens)
		} else {
			params.MaxTokens = openai.Int(p.cfg.MaxTokens)
		}
	}
	return params, nil
}

func openAIMessage(m Message) (openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case RoleSystem:
		return openai.SystemMessage(m.Content), nil
	case RoleUser:
		return openai.UserMessage(m.Content), nil
	case RoleAssistant:
		var a openai.ChatCompletionAssistantMessageParam
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = param.NewOpt(m.Content)
		}
		for j, tc := range m.ToolCalls {
			if tc.ID == "" {
				return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool call %d has no id", j)
			}
			call := &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: tc.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name:      tc.Name,
					Arguments: tc.Arguments,
				},
			}
			if extra, err := chatState(tc.ProviderState); err != nil {
				return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool call %d: %w", j, err)
			} else if extra != nil {
				call.SetExtraFields(extra)
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: call})
		}
		if extra, err := chatState(m.ProviderState); err != nil {
			return openai.ChatCompletionMessageParamUnion{}, err
		} else if extra != nil {
			a.SetExtraFields(extra)
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	case RoleTool:
		if m.ToolCallID == "" {
			return openai.ChatCompletionMessageParamUnion{}, errors.New("tool message has no tool_call_id")
		}
		return openai.ToolMessage(m.Content, m.ToolCallID), nil
	default:
		return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

// chatStateKeys are the members of a chat-completions provider state written back: Gemini's
// thought signature, on the message or on a tool call (Gemini 3 refuses a follow-up request
// whose function calls lack the signature they came with). Other members of a state (another
// API's, after a conversation changed providers) are not sent.
var chatStateKeys = []string{"extra_content", "thought_signature"}

// chatState is the extra fields a message or call carries back (nil: none).
func chatState(state json.RawMessage) (map[string]any, error) {
	if isJSONNull(state) {
		return nil, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(state, &members); err != nil {
		return nil, fmt.Errorf("provider state is not a JSON object: %w", err)
	}
	var out map[string]any
	for _, k := range chatStateKeys {
		if v, ok := members[k]; ok {
			if out == nil {
				out = map[string]any{}
			}
			out[k] = v
		}
	}
	return out, nil
}

// openAITool builds a function tool whose definition is written by hand, so the registry's
// JSON Schema goes out as it is (key order and number literals kept; only insignificant
// whitespace is compacted by the encoder) instead of through a map[string]any.
func openAITool(t Tool) (openai.ChatCompletionToolUnionParam, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	if err := writeFunction(&b, t); err != nil {
		return openai.ChatCompletionToolUnionParam{}, err
	}
	b.WriteByte('}')
	def := param.Override[shared.FunctionDefinitionParam](json.RawMessage(b.Bytes()))
	return openai.ChatCompletionFunctionTool(def), nil
}

// classifyHTTPError is the one error classification of both providers' SDK calls: a
// transport or context error (no response, or a status below 400) is wrapped as it is; an
// HTTP error status becomes a *ProviderError with an excerpt of the body (errorExcerpt),
// retryable for 408, 409, 429 and 5xx (retryableStatus). The status is read from the captured
// *http.Response, not from the SDK's error type: an SDK fails to build its error when a
// server's error body is not shaped as its provider's (Ollama's {"error":"…"}, vLLM's
// top-level message), and the status would be lost.
func classifyHTTPError(provider string, err error, resp *http.Response) error {
	if resp == nil || resp.StatusCode < 400 {
		return fmt.Errorf("inference: %s: %w", provider, err)
	}
	var excerpt string
	if resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		excerpt = errorExcerpt(b)
	}
	return &ProviderError{Provider: provider, StatusCode: resp.StatusCode, Message: excerpt,
		Retryable: retryableStatus(resp.StatusCode), Err: err}
}

// checkBaseURL parses a provider's base URL: http(s) with a host. url.Parse's own error
// quotes the whole URL (userinfo included), so the error names only its redacted form.
func checkBaseURL(provider, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("inference: %s: base URL %s: want http(s)://host[/path]", provider, redact.URL(raw))
	}
	return u, nil
}

// inspectBody checks that a 2xx body is a JSON object that is not a bare error report, and
// reads the usage counts. It looks at nothing else: choices and tool calls are the parser's.
func inspectBody(body []byte, status int) (Usage, error) {
	var env struct {
		Choices json.RawMessage `json:"choices"`
		Error   json.RawMessage `json:"error"`
		Usage   json.RawMessage `json:"usage"`
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || !json.Valid(t) || json.Unmarshal(t, &env) != nil {
		return Usage{}, &ProviderError{Provider: "openai", StatusCode: status, Retryable: true,
			Message: "response body is not a JSON object: " + errorExcerpt(body)}
	}
	if isJSONNull(env.Choices) && !isJSONNull(env.Error) {
		return Usage{}, &ProviderError{Provider: "openai", StatusCode: status, Retryable: true,
			Message: errorExcerpt(env.Error)}
	}
	var u struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	}
	if !isJSONNull(env.Usage) && json.Unmarshal(env.Usage, &u) != nil {
		u.PromptTokens, u.CompletionTokens = 0, 0 // unreadable usage is reported as unknown
	}
	return Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}, nil
}

func isJSONNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// errorExcerpt returns a short, single-line excerpt of a provider error body: the OpenAI-style
// error.message or a string error when present, the raw text otherwise.
func errorExcerpt(b []byte) string {
	var shaped struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	text := string(b)
	if json.Unmarshal(b, &shaped) == nil {
		var s string
		var obj struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(shaped.Error, &s) == nil && s != "":
			text = s
		case json.Unmarshal(shaped.Error, &obj) == nil && obj.Message != "":
			text = obj.Message
		case shaped.Message != "":
			text = shaped.Message
		}
	}
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > maxErrorExcerpt {
		text = strings.ToValidUTF8(text[:maxErrorExcerpt], "") + "…"
	}
	return text
}

// writeFunction writes a function tool's members, "name", "description" (when set) and
// "parameters" (the registry's JSON Schema as it is), for every API that defines functions so.
// Errors: no name; parameters that are not a JSON object.
func writeFunction(b *bytes.Buffer, t Tool) error {
	if t.Name == "" {
		return errors.New("no name")
	}
	b.WriteString(`"name":`)
	writeJSONString(b, t.Name)
	if t.Description != "" {
		b.WriteString(`,"description":`)
		writeJSONString(b, t.Description)
	}
	if schema := bytes.TrimSpace(t.Parameters); len(schema) > 0 {
		if schema[0] != '{' || !json.Valid(schema) {
			return errors.New("parameters is not a JSON object")
		}
		b.WriteString(`,"parameters":`)
		b.Write(schema)
	}
	return nil
}

// writeJSONString appends s as a JSON string without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

var _ Streamer = (*OpenAI)(nil)

// Stream sends the chat-completions request with "stream": true (and stream_options
// include_usage, so the last chunk carries the usage) and assembles the chunks into the body
// the same answer has unstreamed (parse.Assembler): Response.Raw, the parse and the history are
// the same as Complete's. Deltas go to sink while the answer streams. A server that answers
// with a JSON body instead of an event stream is read as Complete reads it.
//
// Errors: as Complete; an error chunk inside the stream is a retryable *ProviderError; a cut
// transport is returned wrapped (retried by the Infer activity).
func (p *OpenAI) Stream(ctx context.Context, req Request, sink Sink) (Response, error) {
	if p.cfg.NoStream {
		return p.Complete(ctx, req)
	}
	params, err := p.params(req)
	if err != nil {
		return Response{}, err
	}
	var httpResp *http.Response
	_, err = p.chat.New(ctx, params, option.WithJSONSet("stream", true),
		option.WithJSONSet("stream_options", map[string]any{"include_usage": true}),
		option.WithResponseBodyInto(&httpResp))
	if err != nil {
		return Response{}, p.scrub(classifyHTTPError("openai", err, httpResp))
	}
	if httpResp == nil || httpResp.Body == nil {
		return Response{}, p.scrub(&ProviderError{Provider: "openai", StatusCode: http.StatusOK, Retryable: true, Message: "no response body"})
	}
	defer httpResp.Body.Close()
	if !isEventStream(httpResp) && !isNDJSON(httpResp) {
		body, err := readBody("openai", httpResp.Body)
		if errors.Is(err, ErrResponseTooLarge) {
			return Response{}, err
		}
		if err != nil {
			return Response{}, p.scrub(fmt.Errorf("inference: openai: read body: %w", err))
		}
		usage, err := inspectBody(body, httpResp.StatusCode)
		if err != nil {
			return Response{}, p.scrub(err)
		}
		return Response{Format: FormatOpenAI, Raw: json.RawMessage(body), Usage: usage}, nil
	}
	var asm parse.Assembler
	if isNDJSON(httpResp) {
		asm = parse.NewOllamaAssembler()
	} else if asm, err = parse.NewAssembler(parse.FormatOpenAI); err != nil {
		return Response{}, err
	}
	body, err := assemble(limitBody("openai", httpResp.Body), isEventStream(httpResp), asm, sink, func(data []byte) error { return streamErrorEvent("openai", data) })
	if err != nil {
		var pe *ProviderError
		if errors.As(err, &pe) {
			return Response{}, p.scrub(pe)
		}
		if errors.Is(err, ErrResponseTooLarge) {
			return Response{}, err
		}
		return Response{}, p.scrub(fmt.Errorf("inference: openai: stream: %w", err))
	}
	if err := checkAssembled("openai", body); err != nil {
		return Response{}, err
	}
	usage, _ := inspectBody(body, http.StatusOK) // the assembled body is always a JSON object
	return Response{Format: FormatOpenAI, Raw: json.RawMessage(body), Usage: usage}, nil
}
