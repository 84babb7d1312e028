package parse

// This file is OpenAI chat completions, as OpenAI and the compatible servers (Azure OpenAI,
// Gemini's OpenAI-compatible endpoint, Groq, OpenRouter, xAI, vLLM, llama.cpp, Ollama's /v1)
// send them: the part model of a chat.completion and the assembler of chat.completion.chunk
// streams. Every part listed here was seen in recorded traffic or is documented by a provider
// (docs/providers.md has the contract table).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

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
	"object":  exactString("object", "chat.completion"),
	"choices": read,
	"error":   errorPart,
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

// contentFilterRule judges Azure content_filter_results: every category an object (or, for
// custom_blocklists, an array of objects) whose "filtered" is a boolean; any "filtered": true,
// at any depth, is a refusal. A value Airlock cannot read (not JSON it can decode, a repeated
// key, a filtered that is not a boolean, an error saying the filter did not run) is an unread
// part, never "nothing".
func contentFilterRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	obj, err := decodeObject(raw)
	if err != nil {
		return unread(where, "content filter results that are not a readable JSON object ("+quoteBounded(err.Error())+")")
	}
	for _, f := range obj {
		w := join(where, pathKey(f.key))
		if f.key == "error" {
			if kindOf(f.val) == 'n' {
				continue
			}
			return unread(w, "the content filter did not run ("+excerptJSON(f.val)+")")
		}
		hit, why := anyFiltered(f.val, 0)
		if why != "" {
			return unread(w, why)
		}
		if hit {
			return refusedPart{ReasonRefusal, w + ": the provider's content filter filtered the answer; the whole message is rejected"}
		}
	}
	return refusedPart{}
}

// anyFiltered walks a content filter category: it reports a "filtered": true anywhere in it,
// or why the value cannot be read ("" when it can).
func anyFiltered(raw json.RawMessage, depth int) (bool, string) {
	if depth > 8 {
		return false, "content filter results nested too deep"
	}
	switch kindOf(raw) {
	case '{':
		obj, err := decodeObject(raw)
		if err != nil {
			return false, "a content filter result that is not a readable JSON object (" + quoteBounded(err.Error()) + ")"
		}
		hit := false
		for _, f := range obj {
			if f.key == "filtered" {
				switch strings.TrimSpace(string(f.val)) {
				case "true":
					hit = true
				case "false":
				default:
					return false, "filtered is " + excerptJSON(f.val) + ", not a boolean"
				}
				continue
			}
			h, why := anyFiltered(f.val, depth+1)
			if why != "" {
				return false, why
			}
			hit = hit || h
		}
		return hit, ""
	case '[':
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return false, "a content filter list that is not readable"
		}
		hit := false
		for _, e := range list {
			h, why := anyFiltered(e, depth+1)
			if why != "" {
				return false, why
			}
			hit = hit || h
		}
		return hit, ""
	}
	return false, ""
}

// pathKey is a provider's object key as it appears in a Detail's path: as it is when it is a
// plain name, else quoted and bounded (a key is provider text like any other).
func pathKey(k string) string {
	if len(k) > 0 && len(k) <= 64 && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '/' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return k
	}
	return quoteBounded(k)
}

// annotationsRule accepts null or an array of url_citation annotations.
func annotationsRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	if kindOf(raw) != '[' {
		return unread(where, "annotations are a JSON "+kindName(raw)+", not an array")
	}
	return eachObjectStrict(where, raw, func(w string, obj object) refusedPart {
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
		return unread(where, "moderation that is not a readable JSON object ("+quoteBounded(err.Error())+")")
	}
	for _, f := range obj {
		w := join(where, pathKey(f.key))
		if kindOf(f.val) == 'n' {
			continue
		}
		mr, err := decodeObject(f.val)
		if err != nil {
			return unread(w, "a moderation result that is not a readable JSON object")
		}
		res, ok := mr.get("results")
		if !ok || kindOf(res) != '[' {
			return unread(w, "moderation results without a results array")
		}
		r := eachObjectStrict(w+".results", res, func(w string, one object) refusedPart {
			fl, _ := one.get("flagged")
			switch strings.TrimSpace(string(fl)) {
			case "false":
				return refusedPart{}
			case "true":
				return refusedPart{ReasonRefusal, w + ": the provider's moderation flagged the " + pathKey(f.key) + "; the whole message is rejected"}
			}
			return unread(w, "a moderation result whose flagged is "+excerptJSON(fl)+", not a boolean")
		})
		if !r.none() {
			return r
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

// ---- OpenAI chat.completion.chunk ----

type openAIAssembler struct {
	top     members // top-level members other than object and choices (last value wins)
	object  json.RawMessage
	choices map[int]*choiceAsm
	faults  faults
	events  int
}

type choiceAsm struct {
	extra    members // choice members other than index, delta, finish_reason, logprobs
	finish   json.RawMessage
	role     json.RawMessage
	strs     map[string]*strcat // content, refusal, reasoning_content, reasoning
	strOrder []string
	msg      members // other message members (carried for the part model)
	calls    []*callAsm
	byIndex  map[int]*callAsm
	fc       *callAsm // legacy function_call
	lp       bool
	lpParts  map[string][]json.RawMessage // logprobs content / refusal entries
}

type callAsm struct {
	verbatim json.RawMessage // an entry without index, or one that is not an object
	id, typ  json.RawMessage
	extra    members
	fnExtra  members
	hasFn    bool
	name     strcat
	args     strcat
	pos      int // 0-based position among the choice's calls
}

var openAIStreamStrings = map[string]bool{"content": true, "refusal": true, "reasoning_content": true, "reasoning": true}

func (a *openAIAssembler) Done() bool {
	for _, c := range a.choices {
		if len(c.finish) == 0 || kindOf(c.finish) == 'n' {
			return false
		}
	}
	return len(a.choices) > 0
}

func (a *openAIAssembler) Add(event []byte) []Delta {
	a.events++
	top, err := decodeObject(bytes.TrimSpace(event))
	if err != nil {
		a.faults.add("chunk %d is not a JSON object: %v", a.events, err)
		return nil
	}
	var out []Delta
	noChoice := false
	if ch, ok := top.get("choices"); ok && strings.TrimSpace(string(ch)) == "[]" {
		noChoice = true
	}
	for _, f := range top {
		switch f.key {
		case "object":
			s, err := unquoteStrict(f.val)
			switch {
			case err == nil && s == "chat.completion.chunk":
			case err == nil && s == "" && noChoice:
				// Azure OpenAI's first chunk annotates the prompt (prompt_filter_results)
				// with an empty object, id and model and no choice: it carries no part of
				// the message, so its empty object names nothing.
			default:
				a.object = f.val // carried: the part model refuses it
			}
		case "obfuscation":
			// Stream-only padding OpenAI adds to chunks (length hiding); carries nothing.
		case "choices":
			var list []json.RawMessage
			if kindOf(f.val) != '[' || json.Unmarshal(f.val, &list) != nil {
				a.faults.add("chunk %d: choices is not an array", a.events)
				continue
			}
			for _, c := range list {
				out = append(out, a.addChoice(c)...)
			}
		case "error":
			if kindOf(f.val) != 'n' && !a.top.has("error") {
				a.top.set("error", f.val) // the first error is kept
			}
		case StreamFaultKey:
			a.faults.add("chunk %d carries Airlock's own member %s", a.events, StreamFaultKey)
		default:
			a.top.setSticky(f.key, f.val, openAITop[f.key])
		}
	}
	return out
}

func (a *openAIAssembler) addChoice(raw json.RawMessage) []Delta {
	ch, err := decodeObject(raw)
	if err != nil {
		a.faults.add("chunk %d: a choice is not a JSON object", a.events)
		return nil
	}
	idxRaw, _ := ch.get("index")
	idx, err := strconv.Atoi(strings.TrimSpace(string(idxRaw)))
	if err != nil || idx < 0 || idx > 1<<16 {
		a.faults.add("chunk %d: a choice's index is %s", a.events, quoteBounded(string(idxRaw)))
		return nil
	}
	c := a.choices[idx]
	if c == nil {
		c = &choiceAsm{strs: map[string]*strcat{}, byIndex: map[int]*callAsm{}, lpParts: map[string][]json.RawMessage{}}
		a.choices[idx] = c
	}
	var out []Delta
	for _, f := range ch {
		switch f.key {
		case "index":
		case "finish_reason":
			if kindOf(f.val) == 'n' {
				continue
			}
			if len(c.finish) > 0 && !bytes.Equal(c.finish, f.val) {
				a.faults.add("choice %d has two finish reasons", idx)
			}
			c.finish = append(json.RawMessage(nil), f.val...)
		case "logprobs":
			a.addLogprobs(c, f.val)
		case "delta":
			if len(c.finish) > 0 && kindOf(f.val) == '{' && strings.TrimSpace(string(f.val)) != "{}" && !onlyNulls(f.val) {
				// The message ended with its finish reason: a later piece of it would be
				// read as part of a message that was already finished.
				a.faults.add("choice %d: a delta after its finish_reason (%s)", idx, excerptJSON(f.val))
				continue
			}
			out = append(out, a.addDelta(idx, c, f.val)...)
		case "message":
			// A chunk's choice carries a delta; a message here would collide with the
			// message the assembler writes.
			a.faults.add("chunk %d: a choice carries a whole message", a.events)
		default:
			c.extra.setSticky(f.key, f.val, openAIChoice[f.key])
		}
	}
	if idx != 0 {
		return nil // only the first choice is shown; another one fails the message anyway
	}
	return out
}

func (a *openAIAssembler) addLogprobs(c *choiceAsm, v json.RawMessage) {
	if kindOf(v) == 'n' {
		return
	}
	obj, err := decodeObject(v)
	if err != nil {
		a.faults.add("logprobs is not a JSON object")
		return
	}
	c.lp = true
	for _, f := range obj {
		var list []json.RawMessage
		if kindOf(f.val) == 'n' {
			if _, ok := c.lpParts[f.key]; !ok {
				c.lpParts[f.key] = nil
			}
			continue
		}
		if kindOf(f.val) != '[' || json.Unmarshal(f.val, &list) != nil {
			a.faults.add("logprobs.%s is not an array", quoteBounded(f.key))
			continue
		}
		c.lpParts[f.key] = append(c.lpParts[f.key], list...)
	}
}

func (a *openAIAssembler) addDelta(idx int, c *choiceAsm, v json.RawMessage) []Delta {
	if kindOf(v) == 'n' {
		return nil
	}
	d, err := decodeObject(v)
	if err != nil {
		a.faults.add("chunk %d: delta is not a JSON object", a.events)
		return nil
	}
	var out []Delta
	reasoningOnly := true
	for _, f := range d {
		switch f.key {
		case "channel", "reasoning", "reasoning_content", "role":
		default:
			reasoningOnly = false
		}
	}
	for _, f := range d {
		switch {
		case f.key == "channel" && reasoningOnly && isString(f.val, "analysis"):
			// gpt-oss on Groq labels its reasoning deltas with the harmony channel
			// "analysis"; on a delta that carries only reasoning it says nothing more. On
			// any other delta it is carried and refused (the part model's channel rule).
		case f.key == "role":
			if kindOf(f.val) == 'n' {
				continue
			}
			if len(c.role) > 0 && !bytes.Equal(c.role, f.val) {
				a.faults.add("choice %d has two roles", idx)
			}
			c.role = append(json.RawMessage(nil), f.val...)
		case openAIStreamStrings[f.key]:
			s := c.strs[f.key]
			if s == nil {
				s = &strcat{}
				c.strs[f.key] = s
				c.strOrder = append(c.strOrder, f.key)
			}
			shown, fault := s.add(f.val)
			if fault != "" {
				a.faults.add("delta.%s: %s", f.key, fault)
			}
			if f.key == "content" && shown != "" {
				out = append(out, Delta{Kind: DeltaText, Text: shown})
			}
		case f.key == "tool_calls":
			out = append(out, a.addCalls(c, f.val)...)
		case f.key == "function_call":
			if kindOf(f.val) == 'n' {
				continue
			}
			if c.fc == nil {
				c.fc = &callAsm{}
			}
			fn, err := decodeObject(f.val)
			if err != nil {
				c.fc.verbatim = append(json.RawMessage(nil), f.val...)
				continue
			}
			a.addFunction("function_call", c.fc, fn)
		default:
			// audio, annotations, anything undocumented: carried whole (the last one wins,
			// and any non-null value of an unread part fails the message all the same).
			c.msg.setSticky(f.key, f.val, openAIMessageRules[f.key])
		}
	}
	return out
}

func (a *openAIAssembler) addCalls(c *choiceAsm, v json.RawMessage) []Delta {
	if kindOf(v) == 'n' {
		return nil
	}
	var list []json.RawMessage
	if kindOf(v) != '[' || json.Unmarshal(v, &list) != nil {
		a.faults.add("delta.tool_calls is not an array")
		return nil
	}
	var out []Delta
	for _, e := range list {
		obj, err := decodeObject(e)
		if err != nil {
			// Not an object: kept verbatim, as the unstreamed body would have it (the
			// parser fails that call invalid_json).
			c.calls = append(c.calls, &callAsm{verbatim: append(json.RawMessage(nil), e...), pos: len(c.calls)})
			continue
		}
		idxRaw, hasIdx := obj.get("index")
		if !hasIdx {
			// A whole call sent without a stream index (Ollama's /v1 sends each call so):
			// kept verbatim, as the unstreamed body would have it. The same entry sent
			// again is a snapshot resent, not a second call: a fault, never two calls.
			for _, prev := range c.calls {
				if prev.verbatim != nil && sameJSON(prev.verbatim, e) {
					a.faults.add("the same index-less tool call was sent twice (%s)", excerptJSON(e))
				}
			}
			if len(c.calls) >= MaxCallsPerMessage {
				a.faults.add("more than %d tool calls in one message", MaxCallsPerMessage)
				continue
			}
			c.calls = append(c.calls, &callAsm{verbatim: append(json.RawMessage(nil), e...), pos: len(c.calls)})
			continue
		}
		idx, err := strconv.Atoi(strings.TrimSpace(string(idxRaw)))
		if err != nil || idx < 0 {
			a.faults.add("a tool call's index is %s", quoteBounded(string(idxRaw)))
			continue
		}
		call := c.byIndex[idx]
		fresh := call == nil
		if fresh {
			if len(c.calls) >= MaxCallsPerMessage {
				a.faults.add("more than %d tool calls in one message", MaxCallsPerMessage)
				continue
			}
			call = &callAsm{pos: len(c.calls)}
			c.byIndex[idx] = call
			c.calls = append(c.calls, call)
		}
		pos := call.pos
		var argPieces []string
		for _, f := range obj {
			switch f.key {
			case "index":
			case "id", "type":
				dst := &call.id
				if f.key == "type" {
					dst = &call.typ
				}
				if kindOf(f.val) == 'n' {
					continue
				}
				// "" is a server's way of sending no id or type on a continuation chunk:
				// it neither conflicts with nor replaces the value the call already has.
				if isEmptyString(f.val) && len(*dst) > 0 {
					continue
				}
				if len(*dst) > 0 && !isEmptyString(*dst) && !bytes.Equal(*dst, f.val) {
					a.faults.add("tool call %d has two different %ss (%s, then %s)", idx, f.key, excerptJSON(*dst), excerptJSON(f.val))
				}
				*dst = append(json.RawMessage(nil), f.val...)
			case "function":
				fn, err := decodeObject(f.val)
				if err != nil {
					a.faults.add("tool call %d: function is not a JSON object", idx)
					continue
				}
				argPieces = append(argPieces, a.addFunction(fmt.Sprintf("tool call %d", idx), call, fn)...)
			default:
				call.extra.setSticky(f.key, f.val, openAIToolCall[f.key])
			}
		}
		if fresh {
			var id, name string
			_ = json.Unmarshal(call.id, &id)
			if call.name.seen {
				name, _ = unquoteStrict(call.name.value())
			}
			out = append(out, Delta{Kind: DeltaCallStart, Call: pos, ID: id, Name: name})
		}
		for _, p := range argPieces {
			out = append(out, Delta{Kind: DeltaCallArgs, Call: pos, Text: p})
		}
	}
	return out
}

// addFunction folds a function delta (name and arguments pieces) and returns the shown
// argument pieces. A name arrives whole in one delta (OpenAI and every documented compatible
// server): a second non-empty name for the same call is a stream fault, whether it repeats
// the first (servers that resend the name with every chunk) or differs, because joining the
// pieces would invent a name ("read_fileread_file") and picking one would be a guess.
func (a *openAIAssembler) addFunction(label string, call *callAsm, fn object) []string {
	call.hasFn = true
	var pieces []string
	for _, f := range fn {
		switch f.key {
		case "name":
			if call.name.seen && call.name.inner.Len() > 0 && kindOf(f.val) == '"' && !isEmptyString(f.val) {
				a.faults.add("%s: name sent again (%s after %s): the stream cannot be assembled exactly", label, excerptJSON(f.val), quoteBounded(call.name.inner.String()))
				continue
			}
			if _, fault := call.name.add(f.val); fault != "" {
				a.faults.add("function.name: %s", fault)
			}
		case "arguments":
			shown, fault := call.args.add(f.val)
			if fault != "" {
				a.faults.add("function.arguments: %s", fault)
			}
			if shown != "" {
				pieces = append(pieces, shown)
			}
		default:
			call.fnExtra.set(f.key, f.val)
		}
	}
	return pieces
}

func (a *openAIAssembler) Body() []byte {
	var b bytes.Buffer
	b.WriteString(`{`)
	if a.object != nil {
		writeJSONKey(&b, "object")
		b.Write(a.object)
	} else {
		b.WriteString(`"object":"chat.completion"`)
	}
	b.WriteString(`,"choices":[`)
	idxs := make([]int, 0, len(a.choices))
	for i := range a.choices {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	for n, i := range idxs {
		if n > 0 {
			b.WriteByte(',')
		}
		a.writeChoice(&b, i, a.choices[i])
	}
	b.WriteByte(']')
	first := a.top.write(&b, false)
	f := a.faults
	if len(a.choices) > 0 && !a.Done() {
		f = append(append(faults(nil), f...), "the stream ended before every choice had a finish_reason")
	}
	if len(a.choices) == 0 && !a.top.has("error") {
		f = append(append(faults(nil), f...), "the stream carried no choice")
	}
	f.write(&b, first)
	b.WriteByte('}')
	return b.Bytes()
}

func (a *openAIAssembler) writeChoice(b *bytes.Buffer, idx int, c *choiceAsm) {
	fmt.Fprintf(b, `{"index":%d,"message":{`, idx)
	if len(c.role) > 0 {
		b.WriteString(`"role":`)
		b.Write(c.role)
	} else {
		b.WriteString(`"role":"assistant"`)
	}
	// Each string member is written once: joined from its pieces, or null when every delta
	// sent it as null (OpenAI's first tool-call delta carries "content":null and
	// "refusal":null, which the unstreamed message has as the same nulls). content is always
	// written, as the unstreamed message always has it.
	if !c.strs["content"].presentOr() {
		b.WriteString(`,"content":null`)
	}
	for _, k := range c.strOrder {
		s := c.strs[k]
		if !s.present() {
			if k != "content" {
				b.WriteByte(',')
				writeJSONKey(b, k)
				b.WriteString("null")
			}
			continue
		}
		b.WriteByte(',')
		writeJSONKey(b, k)
		b.Write(s.value())
	}
	if len(c.calls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		for i, call := range c.calls {
			if i > 0 {
				b.WriteByte(',')
			}
			call.write(b)
		}
		b.WriteByte(']')
	}
	if c.fc != nil {
		b.WriteString(`,"function_call":`)
		if c.fc.verbatim != nil {
			b.Write(c.fc.verbatim)
		} else {
			c.fc.writeFunction(b)
		}
	}
	c.msg.write(b, false)
	b.WriteString(`},"finish_reason":`)
	if len(c.finish) > 0 {
		b.Write(c.finish)
	} else {
		b.WriteString(`null`)
	}
	if c.lp {
		b.WriteString(`,"logprobs":{`)
		keys := make([]string, 0, len(c.lpParts))
		for k := range c.lpParts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONKey(b, k)
			if c.lpParts[k] == nil {
				b.WriteString("null")
				continue
			}
			b.WriteByte('[')
			for j, e := range c.lpParts[k] {
				if j > 0 {
					b.WriteByte(',')
				}
				b.Write(e)
			}
			b.WriteByte(']')
		}
		b.WriteByte('}')
	}
	c.extra.write(b, false)
	b.WriteByte('}')
}

// presentOr reports whether a (possibly nil) strcat holds a value.
func (s *strcat) presentOr() bool { return s != nil && s.present() }

func (c *callAsm) write(b *bytes.Buffer) {
	if c.verbatim != nil {
		b.Write(c.verbatim)
		return
	}
	b.WriteByte('{')
	first := true
	if len(c.id) > 0 {
		b.WriteString(`"id":`)
		b.Write(c.id)
		first = false
	}
	if len(c.typ) > 0 {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"type":`)
		b.Write(c.typ)
		first = false
	}
	if c.hasFn {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"function":`)
		c.writeFunction(b)
		first = false
	}
	c.extra.write(b, first)
	b.WriteByte('}')
}

func (c *callAsm) writeFunction(b *bytes.Buffer) {
	b.WriteByte('{')
	first := true
	if c.name.present() {
		b.WriteString(`"name":`)
		b.Write(c.name.value())
		first = false
	}
	if c.args.present() {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"arguments":`)
		b.Write(c.args.value())
		first = false
	}
	c.fnExtra.write(b, first)
	b.WriteByte('}')
}

// onlyNulls reports whether every member of a JSON object is null (a delta that says nothing).
func onlyNulls(v json.RawMessage) bool {
	obj, err := decodeObject(v)
	if err != nil {
		return false
	}
	for _, f := range obj {
		if kindOf(f.val) != 'n' {
			return false
		}
	}
	return true
}
