package parse

import (
	"encoding/json"
	"fmt"
	"strings"
)

// This file is the explicit model of every part of a provider response Airlock understands
// (issue 22, item 3: "every part read or refused"). Each key of each object of a response is
// one of three things:
//
//   - read: the parser reads it (content, tool calls, finish or stop reason, ...);
//   - ignorable: listed here by name, with why it carries no call, no refusal and no error
//     (usage, ids, timings, logprobs of text, reasoning text, ...);
//   - refused: everything else. A refused part fails the whole message: every call fails and
//     Result.Incomplete names the reason (ReasonRefusal, ReasonProviderError, ReasonUnreadPart),
//     so nothing Airlock does not read is ever dropped in silence. A key no provider has
//     published yet is refused too: it is what a new kind of call, refusal or error looks like.
//
// The streamed forms (chunks, events) are assembled into the same shape by Assemble*, which
// carries every part it does not fold into that shape over to the assembled message, where the
// same model refuses it.

// Message-wide reasons a refused part fails a message with (see the part model above).
const (
	// ReasonRefusal: the response carries a refusal Airlock does not treat as an answer:
	// OpenAI message.refusal (a non-empty string), a content part of type "refusal", refusal
	// logprobs, Azure content_filter_results with a category filtered, Anthropic stop_details.
	// Every call of the message fails; a message without calls ends the turn incomplete.
	ReasonRefusal Reason = "refusal"
	// ReasonProviderError: the response carries an error object (OpenAI/vLLM top-level or
	// choice-level "error", Ollama "error", an Anthropic body or stream event of type "error").
	ReasonProviderError Reason = "provider_error"
	// ReasonUnreadPart: the response holds a part that could carry a call, an answer, a refusal
	// or an error and that Airlock does not read: a second choice, message.audio, a tool call
	// of a type other than "function", a content part other than text, an Anthropic block
	// other than text, tool_use, thinking and redacted_thinking (server_tool_use,
	// web_search_tool_result, mcp_tool_use, container_upload, ...), a tool_use issued by a
	// server-side caller, or any key not in the part model. Detail names the part.
	ReasonUnreadPart Reason = "unread_part"
)

// refusedPart is the first refused part of a message ("" Reason: none).
type refusedPart struct {
	reason Reason
	detail string
}

func (r refusedPart) none() bool { return r.reason == "" }

func unread(where, what string) refusedPart {
	return refusedPart{ReasonUnreadPart, where + ": " + what + "; Airlock does not read it, so the whole message is rejected"}
}

// keyRule judges one key's value: the zero refusedPart when it is read or ignorable.
type keyRule func(where string, raw json.RawMessage) refusedPart

// ignore is the rule of an ignorable key (any value).
func ignore(string, json.RawMessage) refusedPart { return refusedPart{} }

// read is the rule of a key the parser reads (its own checks apply there).
var read keyRule = ignore

// nullOr refuses a non-null value with why.
func nullOr(why string) keyRule {
	return func(where string, raw json.RawMessage) refusedPart {
		if kindOf(raw) == 'n' {
			return refusedPart{}
		}
		return unread(where, why)
	}
}

// errorPart refuses any non-null value as a provider error.
func errorPart(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	return refusedPart{ReasonProviderError, where + ": the response carries an error (" + excerptJSON(raw) + "); the whole message is rejected"}
}

// refusalString refuses a non-empty string (or any other non-null value) as a refusal.
func refusalString(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	if s, err := unquoteStrict(raw); err == nil && s == "" {
		return refusedPart{} // an empty refusal refuses nothing (servers send "" for none)
	}
	return refusedPart{ReasonRefusal, where + ": the model refused (" + excerptJSON(raw) + "); the whole message is rejected"}
}

// zeroIndex requires the number 0 (choices[0] must say it is the first choice).
func zeroIndex(where string, raw json.RawMessage) refusedPart {
	if strings.TrimSpace(string(raw)) == "0" {
		return refusedPart{}
	}
	return unread(where, "index is "+excerptJSON(raw)+", not 0")
}

// exactString requires a string value equal to one of want (absent keys are not judged).
func exactString(why string, want ...string) keyRule {
	return func(where string, raw json.RawMessage) refusedPart {
		s, err := unquoteStrict(raw)
		if err == nil {
			for _, w := range want {
				if s == w {
					return refusedPart{}
				}
			}
		}
		return unread(where, fmt.Sprintf("%s is %s, not %s", why, excerptJSON(raw), strings.Join(quoteAll(want), " or ")))
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quoteBounded(s)
	}
	return out
}

// excerptJSON is a bounded, escaped excerpt of a raw JSON value for a Detail.
func excerptJSON(raw json.RawMessage) string { return quoteBounded(string(raw)) }

// checkKeys applies rules to every member of obj in document order and returns the first
// refused part; a key without a rule is refused as unknown.
func checkKeys(where string, obj object, rules map[string]keyRule) refusedPart {
	for _, f := range obj {
		rule, ok := rules[f.key]
		if !ok {
			return unread(where, "unknown key "+quoteBounded(f.key)+" (a part no provider documents for this place)")
		}
		if r := rule(join(where, f.key), f.val); !r.none() {
			return r
		}
	}
	return refusedPart{}
}

func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

// eachObject applies check to every element of an array value that is an object (non-objects
// are left to the parser's own errors); null or absent is fine.
func eachObject(where string, raw json.RawMessage, check func(where string, obj object) refusedPart) refusedPart {
	if kindOf(raw) != '[' {
		return refusedPart{}
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return refusedPart{}
	}
	for i, e := range list {
		obj, err := decodeObject(e)
		if err != nil {
			continue
		}
		if r := check(fmt.Sprintf("%s[%d]", where, i), obj); !r.none() {
			return r
		}
	}
	return refusedPart{}
}

// eachObjectStrict is eachObject for lists whose every element must be a readable object
// (moderation results, annotations): an element that is not is an unread part, never skipped.
func eachObjectStrict(where string, raw json.RawMessage, check func(where string, obj object) refusedPart) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	var list []json.RawMessage
	if kindOf(raw) != '[' || json.Unmarshal(raw, &list) != nil {
		return unread(where, "not a readable JSON array")
	}
	for i, e := range list {
		w := fmt.Sprintf("%s[%d]", where, i)
		obj, err := decodeObject(e)
		if err != nil {
			return unread(w, "not a readable JSON object ("+quoteBounded(err.Error())+")")
		}
		if r := check(w, obj); !r.none() {
			return r
		}
	}
	return refusedPart{}
}
