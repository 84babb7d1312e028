package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/redact"
)

// DefaultAnthropicModel is the model used when neither the request nor AIRLOCK_ANTHROPIC_MODEL
// names one.
const DefaultAnthropicModel = "claude-sonnet-4-5"

// DefaultAnthropicBaseURL is the Anthropic API root used when no base URL is configured.
const DefaultAnthropicBaseURL = "https://api.anthropic.com"

// DefaultAnthropicMaxTokens is the completion cap sent when none is configured: the Messages
// API requires max_tokens on every request.
const DefaultAnthropicMaxTokens = 4096

// AnthropicConfig configures the Anthropic Messages adapter (issue 22 item 1).
type AnthropicConfig struct {
	// BaseURL is the API root without the version path, e.g. "https://api.anthropic.com" or a
	// local fake's URL. Empty means DefaultAnthropicBaseURL.
	BaseURL string
	// APIKey is sent as the SDK sends it (v2.15.0: "Authorization: Bearer <key>"); empty
	// sends none (a local fake or proxy).
	APIKey string
	// Model is used when Request.Model is empty.
	Model string
	// Timeout bounds one HTTP attempt; 0 leaves only the context's deadline.
	Timeout time.Duration
	// MaxTokens caps the completion length; 0 means DefaultAnthropicMaxTokens.
	MaxTokens int64
	// NoStream makes Stream send an unstreamed request (AIRLOCK_STREAM=0).
	NoStream bool
}

// String describes the configuration with the API key and URL secrets masked.
func (c AnthropicConfig) String() string {
	key := ""
	if c.APIKey != "" {
		key = redact.Mask
	}
	return fmt.Sprintf("{BaseURL:%s APIKey:%s Model:%s Timeout:%s MaxTokens:%d}", redact.URL(c.BaseURL), key, c.Model, c.Timeout, c.MaxTokens)
}

// AnthropicConfigFromEnv reads AIRLOCK_ANTHROPIC_BASE_URL, the API key from
// AIRLOCK_ANTHROPIC_API_KEY, else the file AIRLOCK_ANTHROPIC_API_KEY_FILE names (its content
// with surrounding white space trimmed), else ANTHROPIC_API_KEY, AIRLOCK_ANTHROPIC_MODEL
// (default DefaultAnthropicModel) and AIRLOCK_ANTHROPIC_MAX_TOKENS. configured reports that
// any of the AIRLOCK_ANTHROPIC_ settings is set (the worker then serves turns on Anthropic).
//
// Errors: an unreadable key file, an empty one, or a max tokens that is not a positive integer.
func AnthropicConfigFromEnv() (cfg AnthropicConfig, configured bool, err error) {
	cfg = AnthropicConfig{
		BaseURL: os.Getenv("AIRLOCK_ANTHROPIC_BASE_URL"),
		APIKey:  os.Getenv("AIRLOCK_ANTHROPIC_API_KEY"),
		Model:   os.Getenv("AIRLOCK_ANTHROPIC_MODEL"),
	}
	keyFile := os.Getenv("AIRLOCK_ANTHROPIC_API_KEY_FILE")
	configured = cfg.BaseURL != "" || cfg.APIKey != "" || keyFile != ""
	if cfg.APIKey == "" && keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return cfg, configured, fmt.Errorf("inference: anthropic: AIRLOCK_ANTHROPIC_API_KEY_FILE: %w", err)
		}
		if cfg.APIKey = strings.TrimSpace(string(b)); cfg.APIKey == "" {
			return cfg, configured, fmt.Errorf("inference: anthropic: AIRLOCK_ANTHROPIC_API_KEY_FILE %s is empty", keyFile)
		}
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("ANTHROPIC_API_KEY")
	}
	if cfg.Model == "" {
		cfg.Model = DefaultAnthropicModel
	}
	if s := os.Getenv("AIRLOCK_ANTHROPIC_MAX_TOKENS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return cfg, configured, fmt.Errorf("inference: anthropic: AIRLOCK_ANTHROPIC_MAX_TOKENS %q: want a positive integer", s)
		}
		cfg.MaxTokens = n
	}
	cfg.NoStream = os.Getenv("AIRLOCK_STREAM") == "0"
	return cfg, configured, nil
}

// Anthropic is a Provider (and Streamer) for the Anthropic Messages API on the official SDK
// (github.com/anthropics/anthropic-sdk-go/v2). The SDK's retries are disabled (the Infer
// activity is retried by Temporal) and its environment defaults are not applied. Response.Raw
// is the exact body (or, streamed, the body the events assemble to), read by the same strict
// parser as every provider (stop reasons and the part model included).
type Anthropic struct {
	cfg     AnthropicConfig
	secrets []string
	msgs    anthropic.MessageService
}

var _ Streamer = (*Anthropic)(nil)

// NewAnthropic validates cfg and returns the adapter. It does not contact the endpoint.
func NewAnthropic(cfg AnthropicConfig) (*Anthropic, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultAnthropicBaseURL
	}
	if _, err := checkBaseURL("anthropic", cfg.BaseURL); err != nil {
		return nil, err
	}
	if cfg.Timeout < 0 || cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("inference: anthropic: negative timeout or max tokens")
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultAnthropicMaxTokens
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(newHTTPClient()),
		option.WithBaseURL(cfg.BaseURL),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	return &Anthropic{
		cfg:     cfg,
		secrets: append([]string{cfg.APIKey}, redact.URLSecrets(cfg.BaseURL)...),
		// Built directly, not through anthropic.NewClient, so ANTHROPIC_BASE_URL and the SDK's
		// other environment defaults cannot change where or what Airlock sends.
		msgs: anthropic.NewMessageService(opts...),
	}, nil
}

// Complete sends one Messages request (unstreamed) and returns the exact body with
// FormatAnthropic.
//
// Errors: ErrInvalidRequest for a request that cannot be expressed; *ProviderError for HTTP
// failures (retryable for 408, 409, 429, 5xx including 529 overloaded; ErrProviderRejected for
// other 4xx) and for 2xx bodies that are not a JSON object or are an error object.
func (p *Anthropic) Complete(ctx context.Context, req Request) (Response, error) {
	params, err := p.params(req)
	if err != nil {
		return Response{}, err
	}
	var body []byte
	var httpResp *http.Response
	_, err = p.msgs.New(ctx, params, option.WithResponseBodyInto(&body), option.WithResponseInto(&httpResp))
	if err != nil {
		return Response{}, p.scrub(classifyHTTPError("anthropic", err, httpResp))
	}
	if len(body) > MaxResponseBytes {
		return Response{}, &ResponseTooLargeError{Provider: "anthropic", Size: int64(len(body)), Limit: MaxResponseBytes}
	}
	usage, err := inspectAnthropicBody(body)
	if err != nil {
		return Response{}, p.scrub(err)
	}
	return Response{Format: FormatAnthropic, Raw: json.RawMessage(body), Usage: usage}, nil
}

// Stream sends the request with "stream": true and assembles the events into the body the
// same answer has unstreamed (parse.NewAssembler(FormatAnthropic)); deltas go to sink. An
// error event in the stream (overloaded_error, rate limits) is a retryable *ProviderError.
// With NoStream it is Complete.
func (p *Anthropic) Stream(ctx context.Context, req Request, sink Sink) (Response, error) {
	if p.cfg.NoStream {
		return p.Complete(ctx, req)
	}
	params, err := p.params(req)
	if err != nil {
		return Response{}, err
	}
	var httpResp *http.Response
	_, err = p.msgs.New(ctx, params, option.WithJSONSet("stream", true), option.WithResponseBodyInto(&httpResp))
	if err != nil {
		return Response{}, p.scrub(classifyHTTPError("anthropic", err, httpResp))
	}
	if httpResp == nil || httpResp.Body == nil {
		return Response{}, p.scrub(&ProviderError{Provider: "anthropic", StatusCode: http.StatusOK, Retryable: true, Message: "no response body"})
	}
	defer httpResp.Body.Close()
	if !isEventStream(httpResp) {
		body, err := readBody("anthropic", httpResp.Body)
		if errors.Is(err, ErrResponseTooLarge) {
			return Response{}, err
		}
		if err != nil {
			return Response{}, p.scrub(fmt.Errorf("inference: anthropic: read body: %w", err))
		}
		usage, err := inspectAnthropicBody(body)
		if err != nil {
			return Response{}, p.scrub(err)
		}
		return Response{Format: FormatAnthropic, Raw: json.RawMessage(body), Usage: usage}, nil
	}
	asm, err := parse.NewAssembler(parse.FormatAnthropic)
	if err != nil {
		return Response{}, err
	}
	body, err := assemble(limitBody("anthropic", httpResp.Body), true, asm, sink, func(data []byte) error { return streamErrorEvent("anthropic", data) })
	if err != nil {
		var pe *ProviderError
		if errors.As(err, &pe) {
			return Response{}, p.scrub(pe)
		}
		if errors.Is(err, ErrResponseTooLarge) {
			return Response{}, err
		}
		return Response{}, p.scrub(fmt.Errorf("inference: anthropic: stream: %w", err))
	}
	if err := checkAssembled("anthropic", body); err != nil {
		return Response{}, err
	}
	usage, _ := inspectAnthropicBody(body)
	return Response{Format: FormatAnthropic, Raw: json.RawMessage(body), Usage: usage}, nil
}

// scrub removes the API key and the base URL's secrets from err (scrubSecrets).
func (p *Anthropic) scrub(err error) error { return scrubSecrets(err, p.secrets) }

// params maps a Request onto the Messages API: system messages become the system prompt (in
// order); user text a user message; an assistant message its text block and one tool_use
// block per call (input: the model's exact argument text when it is a JSON object, else {}:
// the API accepts only objects, and the call's tool result already says it failed to parse);
// tool messages become tool_result blocks, the untrusted-data envelope as their content, all
// results answering one assistant message in one user message (as the API requires). The
// catalog becomes client tools with the registry's JSON Schema sent as it is.
func (p *Anthropic) params(req Request) (anthropic.MessageNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	if model == "" {
		return anthropic.MessageNewParams{}, fmt.Errorf("%w: no model", ErrInvalidRequest)
	}
	if len(req.Messages) == 0 {
		return anthropic.MessageNewParams{}, fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: p.cfg.MaxTokens}
	var user []anthropic.ContentBlockParamUnion // the user turn being built
	flush := func() {
		if len(user) > 0 {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(user...))
			user = nil
		}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleSystem:
			params.System = append(params.System, anthropic.TextBlockParam{Text: m.Content})
		case RoleUser:
			user = append(user, anthropic.NewTextBlock(m.Content))
		case RoleTool:
			if m.ToolCallID == "" {
				return anthropic.MessageNewParams{}, fmt.Errorf("%w: message %d: tool message has no tool_call_id", ErrInvalidRequest, i)
			}
			user = append(user, anthropic.NewToolResultBlock(m.ToolCallID, m.Content, false))
		case RoleAssistant:
			flush()
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" {
					return anthropic.MessageNewParams{}, fmt.Errorf("%w: message %d: tool call %d has no id", ErrInvalidRequest, i, j)
				}
				input := json.RawMessage(`{}`)
				if t := bytes.TrimSpace([]byte(tc.Arguments)); len(t) > 0 && t[0] == '{' && json.Valid(t) {
					input = json.RawMessage(t)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, input, tc.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock(""))
			}
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		default:
			return anthropic.MessageNewParams{}, fmt.Errorf("%w: message %d: unknown role %q", ErrInvalidRequest, i, m.Role)
		}
	}
	flush()
	if len(params.Messages) == 0 {
		return anthropic.MessageNewParams{}, fmt.Errorf("%w: no user or assistant message (only a system prompt)", ErrInvalidRequest)
	}
	for i, t := range req.Tools {
		tool, err := anthropicTool(t)
		if err != nil {
			return anthropic.MessageNewParams{}, fmt.Errorf("%w: tool %d (%q): %w", ErrInvalidRequest, i, t.Name, err)
		}
		params.Tools = append(params.Tools, tool)
	}
	return params, nil
}

// anthropicTool writes the tool definition by hand so the registry's schema goes out as it is.
func anthropicTool(t Tool) (anthropic.ToolUnionParam, error) {
	if t.Name == "" {
		return anthropic.ToolUnionParam{}, errors.New("no name")
	}
	schema := bytes.TrimSpace(t.Parameters)
	if len(schema) == 0 {
		schema = []byte(`{"type":"object"}`)
	}
	if schema[0] != '{' || !json.Valid(schema) {
		return anthropic.ToolUnionParam{}, errors.New("parameters is not a JSON object")
	}
	var b bytes.Buffer
	b.WriteString(`{"name":`)
	writeJSONString(&b, t.Name)
	if t.Description != "" {
		b.WriteString(`,"description":`)
		writeJSONString(&b, t.Description)
	}
	b.WriteString(`,"input_schema":`)
	b.Write(schema)
	b.WriteByte('}')
	tp := param.Override[anthropic.ToolParam](json.RawMessage(b.Bytes()))
	return anthropic.ToolUnionParam{OfTool: &tp}, nil
}

// inspectAnthropicBody checks that a 2xx body is a JSON object that is not an error report
// ({"type":"error"}: retryable, like the OpenAI path's error bodies) and reads the usage.
func inspectAnthropicBody(body []byte) (Usage, error) {
	var env struct {
		Type  string          `json:"type"`
		Error json.RawMessage `json:"error"`
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return Usage{}, &ProviderError{Provider: "anthropic", StatusCode: http.StatusOK, Retryable: true,
			Message: "response body is not a JSON object: " + errorExcerpt(body)}
	}
	if err := json.Unmarshal(t, &env); err != nil {
		env.Usage.InputTokens, env.Usage.OutputTokens = 0, 0 // unreadable usage is unknown
	}
	if env.Type == "error" {
		return Usage{}, &ProviderError{Provider: "anthropic", StatusCode: http.StatusOK, Retryable: true, Message: errorExcerpt(body)}
	}
	return Usage{InputTokens: env.Usage.InputTokens, OutputTokens: env.Usage.OutputTokens}, nil
}

// Describe names the API, model and endpoint this adapter serves (for the worker's start line
// and doctor), with secrets masked.
func (p *Anthropic) Describe() string {
	base := p.cfg.BaseURL
	if base == "" {
		base = DefaultAnthropicBaseURL
	}
	mode := "streamed"
	if p.cfg.NoStream {
		mode = "unstreamed (AIRLOCK_STREAM=0)"
	}
	return fmt.Sprintf("anthropic messages, model %s, at %s, %s", p.cfg.Model, redact.URL(base), mode)
}
