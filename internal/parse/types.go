package parse

import (
	"encoding/json"
	"errors"
)

// Reason is the code of a parse failure. The set is closed; every reason is surfaced to the
// model as a parse-failure result and audited (outcome parse_failed).
type Reason string

// Parse-failure reasons (../shared/cases/README.md, provider-responses.jsonl). Parse documents
// the order in which they are checked when a call has several faults.
const (
	// ReasonArgumentsEmpty: the OpenAI argument string is "" or only white space (case B01);
	// never coerced to {}.
	ReasonArgumentsEmpty Reason = "arguments_empty"
	// ReasonArgumentsMissing: the arguments key (OpenAI/Ollama) or input (Anthropic) is absent
	// or null (case B02).
	ReasonArgumentsMissing Reason = "arguments_missing"
	// ReasonArgumentsNotObject: the arguments are a JSON value other than an object: string
	// (including double-encoded arguments and Anthropic string input, case B10), array, number,
	// boolean or null; or, in the OpenAI shape, an object where the wire format requires a
	// string.
	ReasonArgumentsNotObject Reason = "arguments_not_object"
	// ReasonInvalidJSON: the argument text is not JSON (NaN, Infinity, invalid escapes,
	// unterminated strings, single quotes, cut-off text: cases B04, B15, B20), repeats an
	// object key, or the call entry itself is not a JSON object.
	ReasonInvalidJSON Reason = "invalid_json"
	// ReasonTrailingData: a complete JSON value followed by more non-white-space text
	// (e.g. {"a":1}{"b":2}).
	ReasonTrailingData Reason = "trailing_data"
	// ReasonInvalidUnicode: invalid UTF-8, or a lone surrogate escape (\ud800 without a low
	// surrogate), in the arguments or in the string that carries them.
	ReasonInvalidUnicode Reason = "invalid_unicode"
	// ReasonInvalidName: the name is missing or does not match NamePattern (case B05); never
	// trimmed or stripped.
	ReasonInvalidName Reason = "invalid_name"
	// ReasonDuplicateCallID: two or more calls of the message share an id, so the message was
	// assembled wrongly (stream snapshots appended as deltas, merged indexes) and every call of
	// it fails, those with a unique id or no id included (cases B08, B27). Ids are never
	// renumbered.
	ReasonDuplicateCallID Reason = "duplicate_call_id"
	// ReasonTruncated: the provider reported the output cut off by a token limit
	// (finish_reason or done_reason "length", stop_reason "max_tokens" or
	// "model_context_window_exceeded"); every call of the message fails (case B14).
	ReasonTruncated Reason = "truncated"
	// ReasonAbnormalFinish: the message's finish or stop reason is not a normal end (see
	// normalFinish: OpenAI "tool_calls", "stop" or "function_call"; Ollama "stop"; Anthropic
	// "tool_use" or "end_turn") nor a token limit: a refusal, a content filter, a stop
	// sequence, a paused turn, a reason no provider has published yet, or no reason at all.
	// Every call of the message fails whatever the tool's class (case B37); Detail names the
	// reason, escaped and cut to MaxReasonQuote bytes.
	ReasonAbnormalFinish Reason = "abnormal_finish"
	// ReasonEmbeddedToolCallText: content holds tool-call-shaped text and there is no
	// structured call (cases B11-B13); the text is never promoted to a call.
	ReasonEmbeddedToolCallText Reason = "embedded_tool_call_text"
	// ReasonMissingCallID: an OpenAI or Anthropic call has a non-string id, or is the legacy
	// message.function_call. (Structured calls with no id or an empty id get an id assigned by
	// Airlock, see AssignedCallID; Ollama calls without ids get a synthetic "call_<index>".)
	ReasonMissingCallID Reason = "missing_call_id"
)

// Call is one proposal in emitted order: a candidate when Reason is empty, else a parse
// failure. Index is the 0-based position among the response's calls. Arguments holds the
// exact argument bytes the model emitted, set for candidates only (always a JSON object;
// integers keep every digit). Raw holds the same exact argument text for candidates and, for
// failures, whatever text was emitted (the argument text, or the whole content for
// embedded_tool_call_text) for the audit, never for execution. Raw is a string so it survives
// a JSON round trip byte-exact, whereas encoding/json compacts a json.RawMessage when
// marshalling. Detail is a human-readable diagnostic for the failure. IDAssigned reports that
// CallID was assigned by Airlock (AssignedCallID, or Ollama's "call_<index>") because the
// provider sent the call without an id: the id is not the model's own.
type Call struct {
	Index      int             `json:"index"`
	CallID     string          `json:"call_id"`
	IDAssigned bool            `json:"id_assigned,omitempty"`
	Name       string          `json:"name"`
	Version    int             `json:"version"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Raw        string          `json:"raw,omitempty"`
	Reason     Reason          `json:"reason,omitempty"`
	Detail     string          `json:"detail,omitempty"`
	// ProviderState is what the provider requires sent back with this call on the next
	// request, verbatim, as a JSON object of the call's own members (Gemini's
	// {"extra_content":{"google":{"thought_signature":…}}}); nil when none. It is never read,
	// shown or executed: only the adapter of the same provider writes it back.
	ProviderState json.RawMessage `json:"provider_state,omitempty"`
}

// Candidate reports whether the call parsed into a (name, version, arguments) triple.
func (c Call) Candidate() bool { return c.Reason == "" }

// Result is the parse of one response: the assistant prose, the finish reason as the provider
// spelled it, and every proposal in order.
type Result struct {
	Text         string `json:"text"`
	FinishReason string `json:"finish_reason"`
	Calls        []Call `json:"calls"`
	// Incomplete is set when the message did not end normally or holds a part Airlock refuses:
	// ReasonTruncated, ReasonAbnormalFinish, ReasonRefusal, ReasonProviderError or
	// ReasonUnreadPart ("" for a normal, fully read message; parts.go). With no call it tells the turn that the
	// prose is not a finished answer (cut off, filtered, refused, paused).
	Incomplete Reason `json:"incomplete,omitempty"`
	// IncompleteDetail says why, escaped and bounded (the finish reason, or the refused part
	// and what it carried); "" when Incomplete is "".
	IncompleteDetail string `json:"incomplete_detail,omitempty"`
	// ProviderState is what the provider requires sent back with this message on the next
	// request, verbatim, as a JSON object in the provider's own terms: Gemini's message-level
	// extra_content and thought_signature; the Responses API's reasoning items
	// ({"reasoning":[item,…]}); nil when none. Like Call.ProviderState, only the adapter of
	// the same provider reads it.
	ProviderState json.RawMessage `json:"provider_state,omitempty"`
}

// ErrUnrecognized means the body is not a provider response in any known shape (not even a
// message object); the whole response is unusable. Per-call problems are never errors: they
// are Calls with a Reason.
var ErrUnrecognized = errors.New("parse: unrecognized provider response")

// MaxBodyBytes bounds a whole response, unstreamed or assembled from a stream: 4 MiB, far
// above any tool-calling answer (the largest real one in the provider-traffic corpus is under
// 40 KiB) and small enough that a response is never held in workflow history over Temporal's
// 2 MiB payload warning twice. A larger one is refused with ErrTooLarge, which says its size
// and the limit, and is not asked for again (issue 31 item 6).
const MaxBodyBytes = 4 << 20

// ErrTooLarge reports a response over MaxBodyBytes.
var ErrTooLarge = errors.New("parse: response too large")

// MaxCallsPerMessage bounds the tool calls of one message (128). A message with more is
// refused whole (ReasonUnreadPart, no call listed): each call becomes a result, an audit row and
// part of the Infer result in workflow history, so a hostile answer of thousands of empty calls
// would otherwise weigh tens of megabytes. Far above what a model sends (parallel calls come
// in handfuls).
const MaxCallsPerMessage = 128

// MaxDetailBytes bounds a Detail or IncompleteDetail (1 KiB): details are Airlock's sentences
// with bounded excerpts, and this bound holds even when an excerpt is not.
const MaxDetailBytes = 1024
