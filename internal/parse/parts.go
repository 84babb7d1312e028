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

// ---- OpenAI chat completions (and compatible servers) ----

// openAITop are the top-level keys of a chat.completion body. Ignorable: identifiers and
// metadata (id, created, model, system_fingerprint, service_tier), usage counts, and what
// compatible servers add beside them: Azure prompt_filter_results (about the prompt, which was
// answered), llama.cpp timings, vLLM prompt_logprobs / prompt_token_ids / kv_transfer_params,
// Groq x_groq / usage_breakdown, OpenRouter provider. object must be "chat.completion": a
// chunk or another object is not a finished chat message.
var openAITop = map[string]keyRule{
	"id": ignore, "created": ignore, "model": ignore, "system_fingerprint": ignore, "service_tier": ignore,
	"usage": ignore, "prompt_filter_results": ignore, "timings": ignore, "prompt_logprobs": ignore,
	"prompt_token_ids": ignore, "kv_transfer_params": ignore, "x_groq": ignore, "usage_breakdown": ignore,
	"provider": ignore, "moderation": moderationRule,
	"object": exactString("object", "chat.completion"),
	"choices":  read,
	"error":    errorPart,
}

// openAIChoice are the keys of choices[0]. logprobs is ignorable for text (logprobs.content)
// and a refusal when logprobs.refusal is non-empty; vLLM stop_reason (the matched stop token)
// and token_ids, SGLang matched_stop and OpenRouter native_finish_reason are ignorable (the
// finish_reason beside them is what is read); Azure content_filter_results is a refusal when a
// category says filtered; OpenRouter's choice-level error is a provider error.
var openAIChoice = map[string]keyRule{
	"index": zeroIndex, "message": read, "finish_reason": read,
	"logprobs": logprobsRule, "stop_reason": ignore, "token_ids": ignore, "matched_stop": ignore,
	"native_finish_reason": ignore, "content_filter_results": contentFilterRule, "error": errorPart,
}

// openAIMessage are the keys of choices[0].message. Read: role (must be "assistant"),
// content, tool_calls, function_call (the legacy call, failed missing_call_id). refusal is a
// refusal when non-empty. annotations are ignorable when every one is a url_citation (a
// citation of a web search OpenAI ran, which Airlock never asks for, so anything else is
// refused). Reasoning text (vLLM/DeepSeek reasoning_content, OpenRouter/vLLM reasoning and
// reasoning_details) is the model's thinking, never an answer or a call: ignorable. audio is a
// spoken answer Airlock does not read: refused when non-null.
var openAIMessageRules = map[string]keyRule{
	"role": exactString("role", "assistant"), "content": read, "tool_calls": read, "function_call": read,
	"refusal": refusalString, "annotations": annotationsRule, "audio": nullOr("an audio answer (spoken output and transcript)"),
	"reasoning_content": ignore, "reasoning": ignore, "reasoning_details": ignore,
	"extra_content": geminiExtraRule, "thought_signature": signatureRule,
	"channel": func(where string, raw json.RawMessage) refusedPart {
		return unread(where, "a channel label "+excerptJSON(raw)+" on answer text or calls, so the answer cannot be told from the model's analysis")
	},
}

// openAIToolCall are the keys of one tool_calls entry: id, type (must be "function" when
// present: a "custom" tool call carries free-form input Airlock never offered), function, and
// index (a streaming position some servers keep in the assembled message: ignorable).
var openAIToolCall = map[string]keyRule{
	"id": read, "type": exactString("tool call type", "function"), "function": read, "index": ignore,
	"extra_content": geminiExtraRule,
}

// openAIFunction are the keys of a tool call's function object.
var openAIFunction = map[string]keyRule{"name": read, "arguments": read}

// openAITextPart are the keys of a content part of type "text" (annotations: citations).
var openAITextPart = map[string]keyRule{"type": read, "text": read, "annotations": annotationsRule}

func logprobsRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) != '{' {
		return refusedPart{}
	}
	obj, err := decodeObject(raw)
	if err != nil {
		return unread(where, "not a JSON object: "+err.Error())
	}
	return checkKeys(where, obj, map[string]keyRule{
		"content": ignore,
		"refusal": func(w string, v json.RawMessage) refusedPart {
			if kindOf(v) == 'n' || strings.TrimSpace(string(v)) == "[]" {
				return refusedPart{}
			}
			return refusedPart{ReasonRefusal, w + ": the response carries refusal tokens; the whole message is rejected"}
		},
	})
}

// contentFilterRule refuses Azure content_filter_results in which any category is filtered.
func contentFilterRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) != '{' {
		return refusedPart{}
	}
	obj, err := decodeObject(raw)
	if err != nil {
		return unread(where, "not a JSON object: "+err.Error())
	}
	for _, f := range obj {
		cat, err := decodeObject(f.val)
		if err != nil {
			continue
		}
		if v, ok := cat.get("filtered"); ok && strings.TrimSpace(string(v)) == "true" {
			return refusedPart{ReasonRefusal, join(where, f.key) + ": the provider's content filter filtered the answer; the whole message is rejected"}
		}
	}
	return refusedPart{}
}

// annotationsRule accepts null or an array of url_citation annotations.
func annotationsRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	if kindOf(raw) != '[' {
		return unread(where, "annotations are a JSON "+kindName(raw)+", not an array")
	}
	return eachObject(where, raw, func(w string, obj object) refusedPart {
		t, _ := obj.get("type")
		if s, err := unquoteStrict(t); err != nil || s != "url_citation" {
			return unread(w, "an annotation of type "+excerptJSON(t)+" (only url_citation is understood)")
		}
		return refusedPart{}
	})
}

// openAIParts checks a chat.completion's envelope, choices, message, content parts and tool
// calls against the part model.
func openAIParts(top object, choices []json.RawMessage, choice, msg object) refusedPart {
	if r := streamFault(top); !r.none() {
		return r
	}
	if r := checkKeys("", top, openAITop); !r.none() {
		return r
	}
	if len(choices) > 1 {
		return unread("choices", fmt.Sprintf("%d choices; Airlock asks for one and reads choices[0] only, so another choice's calls would be lost", len(choices)))
	}
	if r := checkKeys("choices[0]", choice, openAIChoice); !r.none() {
		return r
	}
	return messageParts("choices[0].message", msg, openAIMessageRules, false)
}

// messageParts checks an OpenAI or Ollama message object, its content parts and tool calls.
func messageParts(where string, msg object, rules map[string]keyRule, ollama bool) refusedPart {
	if r := checkKeys(where, msg, rules); !r.none() {
		return r
	}
	if c, ok := msg.get("content"); ok && kindOf(c) == '[' {
		r := eachObject(where+".content", c, func(w string, part object) refusedPart {
			t, _ := part.get("type")
			s, _ := unquoteStrict(t)
			switch s {
			case "text":
				return checkKeys(w, part, openAITextPart)
			case "refusal":
				refusal, _ := part.get("refusal")
				return refusedPart{ReasonRefusal, w + ": a refusal content part (" + excerptJSON(refusal) + "); the whole message is rejected"}
			}
			return unread(w, "a content part of type "+excerptJSON(t)+" (only text is read)")
		})
		if !r.none() {
			return r
		}
	}
	callRules, fnRules := openAIToolCall, openAIFunction
	if ollama {
		callRules, fnRules = ollamaToolCall, ollamaFunction
	}
	tc, _ := msg.get("tool_calls")
	return eachObject(where+".tool_calls", tc, func(w string, call object) refusedPart {
		if r := checkKeys(w, call, callRules); !r.none() {
			return r
		}
		if fn, ok := call.get("function"); ok {
			if obj, err := decodeObject(fn); err == nil {
				return checkKeys(w+".function", obj, fnRules)
			}
		}
		return refusedPart{}
	})
}

// ---- Ollama /api/chat ----

// ollamaTop are the top-level keys of an Ollama /api/chat body: model, created_at and the
// timing and count fields are ignorable, as are remote_model / remote_host (cloud models) and
// logprobs (of the text); done must be true (a done:false body is a stream chunk, not a
// finished message); error is a provider error.
var ollamaTop = map[string]keyRule{
	"model": ignore, "created_at": ignore, "total_duration": ignore, "load_duration": ignore,
	"prompt_eval_count": ignore, "prompt_eval_duration": ignore, "eval_count": ignore, "eval_duration": ignore,
	"remote_model": ignore, "remote_host": ignore, "logprobs": ignore,
	"message": read, "done_reason": read,
	"done": func(where string, raw json.RawMessage) refusedPart {
		if strings.TrimSpace(string(raw)) == "true" {
			return refusedPart{}
		}
		return unread(where, "done is "+excerptJSON(raw)+": a stream chunk, not a finished message")
	},
	"error": errorPart,
}

// ollamaMessageRules are the keys of an Ollama message: role (assistant), content,
// tool_calls read; thinking (the model's reasoning text) ignorable; images (generated images)
// refused when non-empty; anything else refused.
var ollamaMessageRules = map[string]keyRule{
	"role": exactString("role", "assistant"), "content": read, "tool_calls": read, "thinking": ignore,
	"images": func(where string, raw json.RawMessage) refusedPart {
		if kindOf(raw) == 'n' || strings.TrimSpace(string(raw)) == "[]" {
			return refusedPart{}
		}
		return unread(where, "images in the answer")
	},
}

// ollamaToolCall: Ollama's calls carry function (and, in newer versions, id and type).
var ollamaToolCall = map[string]keyRule{"id": read, "type": exactString("tool call type", "function"), "function": read}

// ollamaFunction: name and arguments read; index (the call's position) ignorable.
var ollamaFunction = map[string]keyRule{"name": read, "arguments": read, "index": ignore}

func ollamaParts(top, msg object) refusedPart {
	if r := streamFault(top); !r.none() {
		return r
	}
	if r := checkKeys("", top, ollamaTop); !r.none() {
		return r
	}
	return messageParts("message", msg, ollamaMessageRules, true)
}

// ---- Anthropic Messages ----

// anthropicTop are the top-level keys of an Anthropic message. id, model, usage, stop_sequence
// (the matched sequence; stop_reason is what is read), container (the code-execution
// container's id and expiry), diagnostics (prompt-cache diagnostics) and context_management
// (what the API cleared from context) are ignorable; role must be "assistant"; stop_details
// is a refusal when non-null.
var anthropicTop = map[string]keyRule{
	"id": ignore, "model": ignore, "usage": ignore, "stop_sequence": ignore, "container": ignore,
	"diagnostics": ignore, "context_management": ignore,
	"type": read, "content": read, "stop_reason": read,
	"role": exactString("role", "assistant"),
	"stop_details": func(where string, raw json.RawMessage) refusedPart {
		if kindOf(raw) == 'n' {
			return refusedPart{}
		}
		return refusedPart{ReasonRefusal, where + ": the API reports a refusal (" + excerptJSON(raw) + "); the whole message is rejected"}
	},
}

// Anthropic content blocks: text (text read, citations ignorable), tool_use (id, name, input
// read; caller must be absent, null or direct: a call issued by code the API ran on its own
// servers is not the model's decision on Airlock's catalog; toolset_name must be null: toolsets
// are the API's MCP connector, never offered), thinking and redacted_thinking (reasoning, never
// an answer or a call: ignorable). Every other block type is refused: server_tool_use,
// web_search_tool_result, web_fetch_tool_result, code_execution_tool_result,
// bash_code_execution_tool_result, text_editor_code_execution_tool_result,
// tool_search_tool_result, container_upload, mcp_tool_use, mcp_tool_result, compaction and
// types not yet published.
var (
	anthropicText    = map[string]keyRule{"type": read, "text": read, "citations": ignore}
	anthropicToolUse = map[string]keyRule{"type": read, "id": read, "name": read, "input": read,
		"caller": callerRule, "toolset_name": nullOr("a tool_use of an API toolset (MCP connector), which Airlock never offers")}
	anthropicThinking         = map[string]keyRule{"type": read, "thinking": ignore, "signature": ignore}
	anthropicRedactedThinking = map[string]keyRule{"type": read, "data": ignore}
)

// anthropicServerBlocks name, for a clearer Detail, the published block types Airlock refuses.
var anthropicServerBlocks = map[string]string{
	"server_tool_use":                        "a server tool call the API ran itself (web search, web fetch, code execution, ...)",
	"web_search_tool_result":                 "a server web search result",
	"web_fetch_tool_result":                  "a server web fetch result",
	"code_execution_tool_result":             "a server code execution result",
	"bash_code_execution_tool_result":        "a server bash execution result",
	"text_editor_code_execution_tool_result": "a server text editor result",
	"tool_search_tool_result":                "a server tool search result",
	"container_upload":                       "a file uploaded to the API's code container",
	"mcp_tool_use":                           "an MCP connector call the API made itself",
	"mcp_tool_result":                        "an MCP connector result",
	"compaction":                             "a context compaction summary",
}

func callerRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	obj, err := decodeObject(raw)
	if err == nil && len(obj) == 1 {
		if t, ok := obj.get("type"); ok {
			if s, err := unquoteStrict(t); err == nil && s == "direct" {
				return refusedPart{}
			}
		}
	}
	return unread(where, "a tool_use issued by "+excerptJSON(raw)+", not directly by the model")
}

// anthropicBlock checks one content block; typ is its decoded type.
func anthropicBlock(where string, block object, typ string) refusedPart {
	switch typ {
	case "text":
		return checkKeys(where, block, anthropicText)
	case "tool_use":
		return checkKeys(where, block, anthropicToolUse)
	case "thinking":
		return checkKeys(where, block, anthropicThinking)
	case "redacted_thinking":
		return checkKeys(where, block, anthropicRedactedThinking)
	}
	if what, ok := anthropicServerBlocks[typ]; ok {
		return unread(where, "block type "+quoteBounded(typ)+": "+what)
	}
	return unread(where, "block type "+quoteBounded(typ)+" (a block no provider documents)")
}

// moderationRule reads the moderation results OpenAI appends to a stream (a last chunk with
// "moderation": {"input": {...}, "output": {...}}, each a moderation_results object whose
// results carry "flagged"). Results that flag nothing are the documented "nothing":
// ignorable. A result that flags, or one whose flagged is not a boolean, is a refusal or an
// unread part naming it.
func moderationRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	obj, err := decodeObject(raw)
	if err != nil {
		return unread(where, "moderation is a JSON "+kindName(raw)+", not an object")
	}
	for _, f := range obj {
		w := join(where, f.key)
		if kindOf(f.val) == 'n' {
			continue
		}
		mr, err := decodeObject(f.val)
		if err != nil {
			return unread(w, "a moderation result that is not an object")
		}
		res, ok := mr.get("results")
		if !ok || kindOf(res) != '[' {
			return unread(w, "moderation results without a results array")
		}
		r := eachObject(w+".results", res, func(w string, one object) refusedPart {
			fl, _ := one.get("flagged")
			switch strings.TrimSpace(string(fl)) {
			case "false":
				return refusedPart{}
			case "true":
				return refusedPart{ReasonRefusal, w + ": the provider's moderation flagged the " + f.key + "; the whole message is rejected"}
			}
			return unread(w, "a moderation result whose flagged is "+excerptJSON(fl)+", not a boolean")
		})
		if !r.none() {
			return r
		}
		var list []json.RawMessage
		_ = json.Unmarshal(res, &list)
		for i, e := range list {
			if kindOf(e) != '{' {
				return unread(fmt.Sprintf("%s.results[%d]", w, i), "a moderation result that is not an object")
			}
		}
	}
	return refusedPart{}
}

// geminiExtraRule reads Gemini's extra_content on a message or a tool call (its
// OpenAI-compatible endpoint): {"google": {"thought_signature": string, "thought": bool}}, the
// signature of the model's hidden reasoning that must be sent back with the call on the next
// request (kept verbatim in the raw response, see inference.ToolCall). Nothing in it carries an
// answer, a call or a refusal; any other member is refused, since Airlock would drop it.
func geminiExtraRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	obj, err := decodeObject(raw)
	if err != nil {
		return unread(where, "extra_content is a JSON "+kindName(raw)+", not an object")
	}
	return checkKeys(where, obj, map[string]keyRule{"google": func(w string, v json.RawMessage) refusedPart {
		g, err := decodeObject(v)
		if err != nil {
			return unread(w, "not an object")
		}
		return checkKeys(w, g, map[string]keyRule{
			"thought_signature": signatureRule,
			"thought": func(w string, v json.RawMessage) refusedPart {
				if s := strings.TrimSpace(string(v)); s == "true" || s == "false" {
					return refusedPart{}
				}
				return unread(w, "thought is "+excerptJSON(v)+", not a boolean")
			},
		})
	}})
}

// signatureRule accepts an opaque signature string (Gemini thought_signature); any other kind
// is refused.
func signatureRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == '"' || kindOf(raw) == 'n' {
		return refusedPart{}
	}
	return unread(where, "a signature that is a JSON "+kindName(raw)+", not a string")
}
