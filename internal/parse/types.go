package parse

import (
	"encoding/json"
	"errors"
)

// Reason is the code of a parse failure. The set is closed; every reason is surfaced to the
// model as a parse-failure result and audited (outcome parse_failed).
type Reason string

// Parse-failure reasons (../shared/cases/README.md, provider-responses.jsonl).
const (
	ReasonArgumentsEmpty        Reason = "arguments_empty"
	ReasonArgumentsMissing      Reason = "arguments_missing"
	ReasonArgumentsNotObject    Reason = "arguments_not_object"
	ReasonInvalidJSON           Reason = "invalid_json"
	ReasonTrailingData          Reason = "trailing_data"
	ReasonInvalidUnicode        Reason = "invalid_unicode"
	ReasonInvalidName           Reason = "invalid_name"
	ReasonDuplicateCallID       Reason = "duplicate_call_id"
	ReasonTruncated             Reason = "truncated"
	ReasonEmbeddedToolCallText  Reason = "embedded_tool_call_text"
	ReasonMissingCallID         Reason = "missing_call_id"
)

// Call is one proposal in emitted order: a candidate when Reason is empty, else a parse
// failure. Index is the 0-based position among the response's calls. Arguments holds the
// exact argument bytes the model emitted (a JSON object for candidates; integers keep every
// digit); for failures it may hold the raw text for the audit, never for execution.
type Call struct {
	Index     int             `json:"index"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Version   int             `json:"version"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Raw       string          `json:"raw,omitempty"`
	Reason    Reason          `json:"reason,omitempty"`
	Detail    string          `json:"detail,omitempty"`
}

// Candidate reports whether the call parsed into a (name, version, arguments) triple.
func (c Call) Candidate() bool { return c.Reason == "" }

// Result is the parse of one response: the assistant prose, the finish reason as the provider
// spelled it, and every proposal in order.
type Result struct {
	Text         string `json:"text"`
	FinishReason string `json:"finish_reason"`
	Calls        []Call `json:"calls"`
}

// ErrUnrecognized means the body is not a provider response in any known shape (not even a
// message object); the whole response is unusable. Per-call problems are never errors: they
// are Calls with a Reason.
var ErrUnrecognized = errors.New("parse: unrecognized provider response")
