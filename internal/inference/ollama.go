package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/airlock-dev/airlock/internal/parse"
)

// DefaultOllamaBaseURL is the native Ollama API root (without /api).
const DefaultOllamaBaseURL = "http://localhost:11434"

// Ollama is a Provider for Ollama's native chat API (POST /api/chat): NDJSON when streamed,
// one JSON body otherwise, both read by the parser's Ollama shape (FormatOpenAI). Ollama
// publishes no Go client that returns the body as sent (its api package decodes it), so the
// request is plain net/http; everything read of the answer is the parser's.
//
// Ollama's calls carry no ids: the parser assigns "call_<index>" and the tool results go
// back with the tool's name (tool_name), as Ollama matches them. Arguments go back as the
// object the model emitted (an argument text that is not an object goes back as {}: the call's
// result already says it failed to parse).
type Ollama struct {
	cfg     OpenAIConfig
	secrets []string
	client  *http.Client
}

var _ Streamer = (*Ollama)(nil)

// NewOllama returns the native adapter for cfg: BaseURL is the Ollama root (default
// DefaultOllamaBaseURL; a trailing /v1 or /api is an error that says which root to give),
// APIKey is sent as a bearer token when set (ollama.com), MaxTokens as options.num_predict.
func NewOllama(cfg OpenAIConfig) (*Ollama, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultOllamaBaseURL
	}
	u, err := checkBaseURL("ollama", cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if p := strings.TrimRight(u.Path, "/"); strings.HasSuffix(p, "/v1") || strings.HasSuffix(p, "/api") {
		return nil, fmt.Errorf("inference: ollama: base URL path %q: give the server root (e.g. %s); /api/chat is added", p, DefaultOllamaBaseURL)
	}
	if cfg.Model == "" {
		return nil, fmt.Errorf("inference: ollama: no model (AIRLOCK_OPENAI_MODEL)")
	}
	if cfg.Timeout < 0 || cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("inference: ollama: negative timeout or max tokens")
	}
	c := newHTTPClient()
	c.Timeout = cfg.Timeout
	return &Ollama{cfg: cfg, secrets: cfg.secrets(), client: c}, nil
}

// Describe names the API, model and endpoint this adapter serves.
func (p *Ollama) Describe() string { return describe("ollama", "/api/chat (native)", p.cfg) }

// Complete sends one unstreamed /api/chat request.
//
// Errors: as OpenAI.Complete (HTTP statuses classified the same way; an error body is a
// *ProviderError); an answer over MaxResponseBytes is ErrResponseTooLarge.
func (p *Ollama) Complete(ctx context.Context, req Request) (Response, error) {
	return p.send(ctx, req, nil, false)
}

// Stream sends the request with "stream": true and assembles the NDJSON lines into the body
// the same answer has unstreamed; an error line is a retryable *ProviderError.
func (p *Ollama) Stream(ctx context.Context, req Request, sink Sink) (Response, error) {
	if p.cfg.NoStream {
		return p.Complete(ctx, req)
	}
	return p.send(ctx, req, sink, true)
}

func (p *Ollama) send(ctx context.Context, req Request, sink Sink, stream bool) (Response, error) {
	body, err := p.body(req, stream)
	if err != nil {
		return Response{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.cfg.BaseURL, "/")+"/api/chat", bytes.NewReader(body))
	if err != nil {
		return Response{}, scrubSecrets(fmt.Errorf("inference: ollama: %w", err), p.secrets)
	}
	hr.Header.Set("Content-Type", "application/json")
	if p.cfg.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		return Response{}, scrubSecrets(fmt.Errorf("inference: ollama: %w", err), p.secrets)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return Response{}, scrubSecrets(classifyHTTPError("ollama", fmt.Errorf("HTTP %d", resp.StatusCode), resp), p.secrets)
	}
	var raw []byte
	if isNDJSON(resp) {
		raw, err = parse.AssembleStream(limitBody("ollama", resp.Body), parse.FramingNDJSON, parse.NewOllamaAssembler(), sinkFunc(sink),
			func(data []byte) error { return streamErrorEvent("ollama", data) })
		if err == nil {
			err = checkAssembled("ollama", raw)
		}
	} else {
		raw, err = readBody("ollama", resp.Body)
	}
	if err != nil {
		var pe *ProviderError
		if errors.As(err, &pe) || errors.Is(err, ErrResponseTooLarge) {
			return Response{}, scrubSecrets(err, p.secrets)
		}
		return Response{}, scrubSecrets(fmt.Errorf("inference: ollama: %w", err), p.secrets)
	}
	usage, err := ollamaUsage(raw, resp.StatusCode)
	if err != nil {
		return Response{}, scrubSecrets(err, p.secrets)
	}
	return Response{Format: FormatOpenAI, Raw: json.RawMessage(raw), Usage: usage}, nil
}

// body writes the /api/chat request by hand, so the registry's schemas and the model's
// argument objects go out exactly as they are.
func (p *Ollama) body(req Request, stream bool) ([]byte, error) {
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	names := map[string]string{} // call id → tool name, for tool_name on results
	var b bytes.Buffer
	b.WriteString(`{"model":`)
	writeJSONString(&b, model)
	b.WriteString(`,"messages":[`)
	for i, m := range req.Messages {
		if i > 0 {
			b.WriteByte(',')
		}
		switch m.Role {
		case RoleSystem, RoleUser:
			b.WriteString(`{"role":`)
			writeJSONString(&b, string(m.Role))
			b.WriteString(`,"content":`)
			writeJSONString(&b, m.Content)
		case RoleAssistant:
			b.WriteString(`{"role":"assistant","content":`)
			writeJSONString(&b, m.Content)
			if len(m.ToolCalls) > 0 {
				b.WriteString(`,"tool_calls":[`)
				for j, tc := range m.ToolCalls {
					if j > 0 {
						b.WriteByte(',')
					}
					names[tc.ID] = tc.Name
					input := []byte(`{}`)
					if t := bytes.TrimSpace([]byte(tc.Arguments)); len(t) > 0 && t[0] == '{' && json.Valid(t) {
						input = t
					}
					b.WriteString(`{"function":{"name":`)
					writeJSONString(&b, tc.Name)
					b.WriteString(`,"arguments":`)
					b.Write(input)
					b.WriteString(`}}`)
				}
				b.WriteByte(']')
			}
		case RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("%w: message %d: tool message has no tool_call_id", ErrInvalidRequest, i)
			}
			b.WriteString(`{"role":"tool","content":`)
			writeJSONString(&b, m.Content)
			if name := names[m.ToolCallID]; name != "" {
				b.WriteString(`,"tool_name":`)
				writeJSONString(&b, name)
			}
		default:
			return nil, fmt.Errorf("%w: message %d: unknown role %q", ErrInvalidRequest, i, m.Role)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	if len(req.Tools) > 0 {
		b.WriteString(`,"tools":[`)
		for i, t := range req.Tools {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"type":"function","function":{`)
			if err := writeFunction(&b, t); err != nil {
				return nil, fmt.Errorf("%w: tool %d (%q): %w", ErrInvalidRequest, i, t.Name, err)
			}
			b.WriteString(`}}`)
		}
		b.WriteByte(']')
	}
	if p.cfg.MaxTokens > 0 {
		fmt.Fprintf(&b, `,"options":{"num_predict":%d}`, p.cfg.MaxTokens)
	}
	fmt.Fprintf(&b, `,"stream":%t}`, stream)
	return b.Bytes(), nil
}

// ollamaUsage checks a 2xx body is a JSON object that is not a bare error and reads its
// counts (prompt_eval_count, eval_count).
func ollamaUsage(body []byte, status int) (Usage, error) {
	var env struct {
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
		Prompt  int64           `json:"prompt_eval_count"`
		Eval    int64           `json:"eval_count"`
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &env) != nil {
		return Usage{}, &ProviderError{Provider: "ollama", StatusCode: status, Retryable: true, Message: "response body is not a JSON object: " + errorExcerpt(body)}
	}
	if isJSONNull(env.Message) && !isJSONNull(env.Error) {
		return Usage{}, &ProviderError{Provider: "ollama", StatusCode: status, Retryable: true, Message: errorExcerpt(body)}
	}
	return Usage{InputTokens: env.Prompt, OutputTokens: env.Eval}, nil
}
