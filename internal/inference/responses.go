package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/airlock-dev/airlock/internal/parse"
)

// OpenAIResponses is a Provider for the OpenAI Responses API (POST /v1/responses), built on
// the official SDK's response service with its retries disabled (the Infer activity retries).
// It is stateless: store is false and every request carries the whole bounded context, so a
// turn replayed or retried on another worker asks the same thing; reasoning items come back
// with their encrypted content (include "reasoning.encrypted_content") and are sent back
// verbatim before the calls they preceded, as the API requires of a stateless conversation.
// Response.Raw is the exact response object (streamed: assembled by parse's Responses
// assembler), with FormatResponses.
type OpenAIResponses struct {
	cfg     OpenAIConfig
	secrets []string
	svc     responses.ResponseService
}

var _ Streamer = (*OpenAIResponses)(nil)

// NewOpenAIResponses validates cfg (as NewOpenAI: the base URL is the API root with its
// version, e.g. https://api.openai.com/v1) and returns the adapter. It does not contact the
// endpoint.
func NewOpenAIResponses(cfg OpenAIConfig) (*OpenAIResponses, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultOpenAIBaseURL
	}
	if _, err := checkBaseURL("openai-responses", cfg.BaseURL); err != nil {
		return nil, err
	}
	if cfg.Timeout < 0 || cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("inference: openai-responses: negative timeout or max tokens")
	}
	opts := []option.RequestOption{option.WithHTTPClient(newHTTPClient()), option.WithBaseURL(cfg.BaseURL), option.WithMaxRetries(0)}
	opts = append(opts, cfg.authOptions()...)
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	return &OpenAIResponses{cfg: cfg, secrets: cfg.secrets(), svc: responses.NewResponseService(opts...)}, nil
}

// Describe names the API, model and endpoint this adapter serves (for the worker's start line
// and doctor), with secrets masked.
func (p *OpenAIResponses) Describe() string {
	return describe("openai", "responses", p.cfg)
}

// Complete sends one unstreamed Responses request and returns the response object.
//
// Errors: as OpenAI.Complete; a response body over parse.MaxBodyBytes is ErrResponseTooLarge.
func (p *OpenAIResponses) Complete(ctx context.Context, req Request) (Response, error) {
	return p.send(ctx, req, nil, false)
}

// Stream sends the request with "stream": true and assembles the events into the response
// object the same answer has unstreamed; deltas go to sink while it streams. An error event
// is a *ProviderError (retryable unless its code says the request cannot succeed).
func (p *OpenAIResponses) Stream(ctx context.Context, req Request, sink Sink) (Response, error) {
	if p.cfg.NoStream {
		return p.Complete(ctx, req)
	}
	return p.send(ctx, req, sink, true)
}

func (p *OpenAIResponses) send(ctx context.Context, req Request, sink Sink, stream bool) (Response, error) {
	body, err := p.body(req, stream)
	if err != nil {
		return Response{}, err
	}
	var httpResp *http.Response
	_, err = p.svc.New(ctx, responses.ResponseNewParams{}, option.WithRequestBody("application/json", body), option.WithResponseBodyInto(&httpResp))
	if err != nil {
		return Response{}, scrubSecrets(classifyHTTPError("openai-responses", err, httpResp), p.secrets)
	}
	if httpResp == nil || httpResp.Body == nil {
		return Response{}, scrubSecrets(&ProviderError{Provider: "openai-responses", StatusCode: http.StatusOK, Retryable: true, Message: "no response body"}, p.secrets)
	}
	defer httpResp.Body.Close()
	var raw []byte
	if isEventStream(httpResp) {
		raw, err = parse.AssembleStream(limitBody("openai-responses", httpResp.Body), parse.FramingSSE, parse.NewResponsesAssembler(), sinkFunc(sink), responsesErrorEvent)
	} else {
		raw, err = readBody("openai-responses", httpResp.Body)
	}
	if err != nil {
		var pe *ProviderError
		if errors.As(err, &pe) {
			return Response{}, scrubSecrets(pe, p.secrets)
		}
		if errors.Is(err, ErrResponseTooLarge) {
			return Response{}, err
		}
		return Response{}, scrubSecrets(fmt.Errorf("inference: openai-responses: %w", err), p.secrets)
	}
	if err := checkAssembled("openai-responses", raw); err != nil {
		return Response{}, err
	}
	usage, err := responsesUsage(raw, httpResp.StatusCode)
	if err != nil {
		return Response{}, scrubSecrets(err, p.secrets)
	}
	return Response{Format: FormatResponses, Raw: json.RawMessage(raw), Usage: usage}, nil
}

// body writes the request by hand, so the registry's schemas and the reasoning items go out
// exactly as they are.
func (p *OpenAIResponses) body(req Request, stream bool) ([]byte, error) {
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	if model == "" {
		return nil, fmt.Errorf("%w: no model", ErrInvalidRequest)
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	var b bytes.Buffer
	b.WriteString(`{"model":`)
	writeJSONString(&b, model)
	b.WriteString(`,"store":false,"include":["reasoning.encrypted_content"],"input":[`)
	n := 0
	item := func() {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleSystem, RoleUser:
			item()
			b.WriteString(`{"role":`)
			writeJSONString(&b, string(m.Role))
			b.WriteString(`,"content":`)
			writeJSONString(&b, m.Content)
			b.WriteByte('}')
		case RoleAssistant:
			reasoning, err := responsesReasoning(m.ProviderState)
			if err != nil {
				return nil, fmt.Errorf("%w: message %d: %w", ErrInvalidRequest, i, err)
			}
			for _, r := range reasoning {
				item()
				b.Write(r)
			}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				item()
				b.WriteString(`{"role":"assistant","content":`)
				writeJSONString(&b, m.Content)
				b.WriteByte('}')
			}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" {
					return nil, fmt.Errorf("%w: message %d: tool call %d has no id", ErrInvalidRequest, i, j)
				}
				item()
				b.WriteString(`{"type":"function_call","call_id":`)
				writeJSONString(&b, tc.ID)
				b.WriteString(`,"name":`)
				writeJSONString(&b, tc.Name)
				b.WriteString(`,"arguments":`)
				writeJSONString(&b, tc.Arguments)
				b.WriteByte('}')
			}
		case RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("%w: message %d: tool message has no tool_call_id", ErrInvalidRequest, i)
			}
			item()
			b.WriteString(`{"type":"function_call_output","call_id":`)
			writeJSONString(&b, m.ToolCallID)
			b.WriteString(`,"output":`)
			writeJSONString(&b, m.Content)
			b.WriteByte('}')
		default:
			return nil, fmt.Errorf("%w: message %d: unknown role %q", ErrInvalidRequest, i, m.Role)
		}
	}
	b.WriteByte(']')
	if len(req.Tools) > 0 {
		b.WriteString(`,"tools":[`)
		for i, t := range req.Tools {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"type":"function",`)
			if err := writeFunction(&b, t); err != nil {
				return nil, fmt.Errorf("%w: tool %d (%q): %w", ErrInvalidRequest, i, t.Name, err)
			}
			// Not strict: strict mode rewrites what the schema accepts (every property
			// required, no additional ones), and the registry's schema is the contract.
			b.WriteString(`,"strict":false}`)
		}
		b.WriteByte(']')
	}
	if p.cfg.MaxTokens > 0 {
		fmt.Fprintf(&b, `,"max_output_tokens":%d`, p.cfg.MaxTokens)
	}
	if stream {
		b.WriteString(`,"stream":true`)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// responsesReasoning is the reasoning items of a Responses provider state ({"reasoning":[…]});
// none for another provider's state.
func responsesReasoning(state json.RawMessage) ([]json.RawMessage, error) {
	if isJSONNull(state) {
		return nil, nil
	}
	var s struct {
		Reasoning []json.RawMessage `json:"reasoning"`
	}
	if err := json.Unmarshal(state, &s); err != nil {
		return nil, fmt.Errorf("provider state: %w", err)
	}
	return s.Reasoning, nil
}

// responsesErrorEvent turns a stream's error event into a *ProviderError: retryable unless
// its code says the same request cannot succeed (quota, an invalid request or prompt, a
// context too long).
func responsesErrorEvent(data []byte) error {
	var ev struct {
		Type  string `json:"type"`
		Code  string `json:"code"`
		Error *struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Type != "error" {
		return nil // the assembler judges it
	}
	code := ev.Code
	if ev.Error != nil {
		code = ev.Error.Code
		if code == "" {
			code = ev.Error.Type
		}
	}
	retry := true
	switch code {
	case "insufficient_quota", "invalid_request_error", "invalid_prompt", "context_length_exceeded", "invalid_api_key", "model_not_found":
		retry = false
	}
	return &ProviderError{Provider: "openai-responses", StatusCode: http.StatusOK, Retryable: retry, Message: "error event in the stream: " + errorExcerpt(data)}
}

// responsesUsage checks a 2xx body is a JSON object that is not a bare error report and reads
// its usage (input_tokens, output_tokens).
func responsesUsage(body []byte, status int) (Usage, error) {
	var env struct {
		Object string          `json:"object"`
		Error  json.RawMessage `json:"error"`
		Usage  *struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &env) != nil {
		return Usage{}, &ProviderError{Provider: "openai-responses", StatusCode: status, Retryable: true, Message: "response body is not a JSON object: " + errorExcerpt(body)}
	}
	if env.Object == "" && !isJSONNull(env.Error) {
		return Usage{}, &ProviderError{Provider: "openai-responses", StatusCode: status, Retryable: true, Message: errorExcerpt(env.Error)}
	}
	if env.Usage == nil {
		return Usage{}, nil
	}
	return Usage{InputTokens: env.Usage.InputTokens, OutputTokens: env.Usage.OutputTokens}, nil
}
