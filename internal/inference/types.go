package inference

import (
	"context"
	"encoding/json"
	"errors"
)

// Role is the author of one context message, in the OpenAI chat vocabulary.
type Role string

// Roles of context messages.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Format names the wire format of a raw provider response, which selects the parser.
type Format string

// Response formats the strict parser understands.
const (
	FormatOpenAI    Format = "openai"
	FormatAnthropic Format = "anthropic"
	// FormatResponses is an OpenAI Responses API response object (parse.FormatResponses).
	FormatResponses Format = "openai-responses"
)

// ToolCall is a tool call as it was sent back to the model in context (an assistant message's
// structured call). Arguments is the exact argument text the model emitted.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// ProviderState is parse.Call.ProviderState: what the provider requires back with the
	// call (Gemini's thought signature), written back verbatim by the same provider's adapter
	// and ignored by every other.
	ProviderState json.RawMessage `json:"provider_state,omitempty"`
}

// Message is one entry of the bounded context sent to the model. Tool messages carry
// capability results; their Content is always the untrusted-data envelope built by the
// executor (RFC-0004: results are untrusted data forever), never system text.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// ProviderState is parse.Result.ProviderState of an assistant message (Gemini's
	// message-level signature, the Responses API's reasoning items), written back verbatim
	// by the same provider's adapter and ignored by every other.
	ProviderState json.RawMessage `json:"provider_state,omitempty"`
}

// Tool is one catalog entry as the model sees it: the wire tool name, a description and the
// JSON Schema of the arguments, generated from the registry on every request.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one inference call. Session names a recorded session for the replay provider
// (ignored by live providers). Round is the 1-based inference round within the turn.
type Request struct {
	Model    string    `json:"model,omitempty"`
	Session  string    `json:"session,omitempty"`
	Round    int       `json:"round"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools"`
}

// Usage counts tokens as the provider reported them (zero when it did not).
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Response is the provider's raw body and its format. Raw is passed to the strict parser
// byte for byte; nothing in this package decodes or repairs tool calls.
type Response struct {
	Format Format          `json:"format"`
	Raw    json.RawMessage `json:"raw"`
	Usage  Usage           `json:"usage"`
}

// Provider produces one assistant response for a request.
//
// Errors: ErrSessionExhausted when a replayed session has no further assistant message;
// other errors are transport or provider failures (the Infer activity retries them).
type Provider interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// ErrSessionExhausted reports that a recorded session has no assistant message for the round.
var ErrSessionExhausted = errors.New("inference: recorded session has no further assistant message")
