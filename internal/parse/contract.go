package parse

// This file is the contract of the part model, as data: per provider API, every part of a
// body and of a stream event Airlock reads, ignores (and why it carries nothing), judges by
// its value, or refuses (and why). docs/providers.md is rendered from it (ContractMarkdown),
// and contract_test.go holds it to the parser both ways (the keys of every rule map, the
// block, item, event and delta types the code handles, and each disposition, tried on a
// response), so the table cannot drift from what the parser does.

import (
	"fmt"
	"strings"
)

// Disposition is what Airlock does with one part of a provider response.
type Disposition string

// Dispositions of a part.
const (
	// DispositionRead: the parser reads the part (prose, calls, finish reason, a stream's structure);
	// its own checks apply (a required value is named in Why).
	DispositionRead Disposition = "read"
	// DispositionIgnored: any value is accepted and dropped, because the part carries no call, no
	// answer, no refusal and no error (Why says what it is).
	DispositionIgnored Disposition = "ignored"
	// DispositionJudged: read when its value says nothing (null, empty, nothing flagged), refused when
	// it carries something (Why says which values are which).
	DispositionJudged Disposition = "judged"
	// DispositionRefused: any value fails the whole message (Why names the reason: refusal,
	// provider_error, unread_part or stream_fault).
	DispositionRefused Disposition = "refused"
)

// PartKind says what a ContractRow's Key names.
type PartKind string

// Kinds of parts.
const (
	// KindKey: Key is the name of a member of the object at Place.
	KindKey PartKind = "key"
	// KindType: Key is a value of the "type" member of the elements at Place (a content
	// block, an output item, a content part, a stream event or delta type).
	KindType PartKind = "type"
	// KindOther: every member of the object at Place not listed beside it (a stream
	// carries them to the assembled body, whose rows judge them).
	KindOther PartKind = "other"
	// KindData: Key is a whole event's data (OpenAI's "[DONE]").
	KindData PartKind = "data"
)

// Provider APIs of the contract (ContractRow.API), in the order docs/providers.md has them.
const (
	APIOpenAIChat = "OpenAI chat completions"
	APIOllama     = "Ollama /api/chat"
	APIAnthropic  = "Anthropic Messages"
	APIResponses  = "OpenAI Responses"
)

// ContractAPI describes one provider API of the contract: the providers that speak it and
// what its bodies and streams are.
type ContractAPI struct {
	Name      string // an API constant
	Providers string // who sends it
	Body      string // the unstreamed body
	Stream    string // the streamed form and its framing
	Format    string // the --format and Format value it is read with
}

// ContractAPIs lists the provider APIs of the contract.
func ContractAPIs() []ContractAPI {
	return []ContractAPI{
		{APIOpenAIChat, "OpenAI, Azure OpenAI, Gemini's OpenAI-compatible endpoint, Groq, OpenRouter, xAI, vLLM, llama.cpp, Ollama's /v1",
			"a `chat.completion` object", "`chat.completion.chunk` objects as server-sent events, ended by `data: [DONE]`", "openai"},
		{APIOllama, "Ollama's native API (local and ollama.com cloud models)",
			"a chat response object (`message`, `done`, `done_reason`)", "the same objects, one a line (NDJSON), the last with `done: true`", "openai"},
		{APIAnthropic, "Anthropic",
			"a `message` object of content blocks (or an `error` object)", "Messages stream events as server-sent events", "anthropic"},
		{APIResponses, "OpenAI (POST /v1/responses)",
			"a `response` object of output items", "Responses stream events as server-sent events; the terminal event carries the whole response", "openai-responses"},
	}
}

// ContractRow is one part of one API's responses and what Airlock does with it.
type ContractRow struct {
	API    string // an API constant
	Stream bool   // a part of a stream event (a chunk, an event, an NDJSON line), not of a body
	// Place is where the part is: "" for the top level, "choices[0].message",
	// "content[type=tool_use]" (the members of the blocks of that type), "event" for the
	// stream events themselves.
	Place       string
	Kind        PartKind
	Key         string
	Disposition Disposition
	Why         string
}

// Contract returns every part of every provider API Airlock reads, ignores, judges or
// refuses, in the order docs/providers.md shows them. A key or type at a Place that is not
// listed is refused: unread_part in a body (a part no provider documents for that place is
// what a new kind of call, refusal or error looks like), stream_fault for an event or delta
// type a stream should not carry.
func Contract() []ContractRow {
	const (
		isRead, isIgnored, isJudged, isRefused = DispositionRead, DispositionIgnored, DispositionJudged, DispositionRefused
	)
	var rows []ContractRow
	add := func(api string, stream bool, place string, kind PartKind, d Disposition, why string, keys ...string) {
		for _, k := range keys {
			rows = append(rows, ContractRow{API: api, Stream: stream, Place: place, Kind: kind, Key: k, Disposition: d, Why: why})
		}
	}
	fault := "Airlock's own mark on a body assembled from a faulty stream, never sent by a provider: `stream_fault`, naming what was wrong"

	// ---- OpenAI chat completions: body ----
	o := func(place string, kind PartKind, d Disposition, why string, keys ...string) {
		add(APIOpenAIChat, false, place, kind, d, why, keys...)
	}
	o("", KindKey, isRead, "must be `chat.completion`: a chunk or another object is not a finished message (`unread_part`)", "object")
	o("", KindKey, isRead, "the answer is `choices[0]`; Airlock asks for one choice, so a second one is refused (`unread_part`): its calls would be lost", "choices")
	o("", KindKey, isIgnored, "identifiers and metadata of the response", "id", "created", "model", "system_fingerprint", "service_tier")
	o("", KindKey, isIgnored, "token counts", "usage")
	o("", KindKey, isIgnored, "Azure: the content filter's results about the prompt, which was answered", "prompt_filter_results")
	o("", KindKey, isIgnored, "llama.cpp: generation timings", "timings")
	o("", KindKey, isIgnored, "vLLM: about the prompt (its logprobs and token ids) and its KV-cache transfer", "prompt_logprobs", "prompt_token_ids", "kv_transfer_params")
	o("", KindKey, isIgnored, "Groq: request id and usage breakdown", "x_groq", "usage_breakdown")
	o("", KindKey, isIgnored, "OpenRouter: the upstream provider's name", "provider")
	o("", KindKey, isJudged, "OpenAI's moderation of input and output (a last stream chunk): read when no result is flagged; a flagged result is `refusal`, a malformed one `unread_part`", "moderation")
	o("", KindKey, isJudged, "null says nothing; an error object (OpenAI, vLLM, OpenRouter, Ollama /v1) is `provider_error`", "error")
	o("", KindKey, isRefused, fault, StreamFaultKey)
	o("moderation.*.results[]", KindKey, isJudged, "per result, of the `input` and of the `output`: `false` says nothing; `true` is `refusal`; anything else `unread_part`", "flagged")
	o("moderation.*.results[]", KindOther, isIgnored, "the result's type, model, categories and scores, which `flagged` sums up", "*")
	o("choices[0]", KindKey, isRead, "must be 0", "index")
	o("choices[0]", KindKey, isRead, "the message", "message")
	o("choices[0]", KindKey, isRead, "`tool_calls`, `stop`, `function_call` end normally; `length` is `truncated`; any other value, or none, `abnormal_finish`", "finish_reason")
	o("choices[0]", KindKey, isJudged, "logprobs of the text are ignored; refusal logprobs (`logprobs.refusal` non-empty) are `refusal`", "logprobs")
	o("choices[0]", KindKey, isIgnored, "vLLM: the stop token matched and the text's token ids (`finish_reason` is read)", "stop_reason", "token_ids")
	o("choices[0]", KindKey, isIgnored, "SGLang: the stop matched (`finish_reason` is read)", "matched_stop")
	o("choices[0]", KindKey, isIgnored, "OpenRouter: the upstream provider's own finish reason (`finish_reason` is read)", "native_finish_reason")
	o("choices[0]", KindKey, isJudged, "Azure: read when no category says `filtered: true`; a filtered category is `refusal`", "content_filter_results")
	o("choices[0]", KindKey, isJudged, "OpenRouter: null says nothing; an error object is `provider_error`", "error")
	o("choices[0].content_filter_results.*", KindKey, isJudged, "Azure, per category: `false` says nothing; `true` is `refusal`", "filtered")
	o("choices[0].content_filter_results.*", KindOther, isIgnored, "the category's severity or detection, which `filtered` sums up", "*")
	o("choices[0].logprobs", KindKey, isIgnored, "logprobs of the text tokens", "content")
	o("choices[0].logprobs", KindKey, isJudged, "null or `[]` says nothing; refusal tokens are `refusal`", "refusal")
	o("choices[0].message", KindKey, isRead, "must be `assistant`", "role")
	o("choices[0].message", KindKey, isRead, "the prose: a string, null, or an array of content parts", "content")
	o("choices[0].message", KindKey, isRead, "the calls", "tool_calls")
	o("choices[0].message", KindKey, isRead, "the legacy call: it has no call id, so it fails `missing_call_id`", "function_call")
	o("choices[0].message", KindKey, isJudged, "null or `\"\"` says nothing; a refusal is `refusal`", "refusal")
	o("choices[0].message", KindKey, isJudged, "null or citations of type `url_citation` (a web search OpenAI ran) are ignored; any other annotation is `unread_part`", "annotations")
	o("choices[0].message", KindKey, isJudged, "null says nothing; a spoken answer Airlock does not read is `unread_part`", "audio")
	o("choices[0].message", KindKey, isIgnored, "the model's reasoning text (vLLM, DeepSeek, OpenRouter, Groq): never an answer or a call", "reasoning_content", "reasoning", "reasoning_details")
	o("choices[0].message", KindKey, isJudged, "Gemini: `{\"google\": {\"thought_signature\", \"thought\"}}`, the signature of the model's hidden reasoning, kept and sent back with the next request; any other member is `unread_part`", "extra_content")
	o("choices[0].message", KindKey, isJudged, "an opaque reasoning signature: a string is kept; any other kind is `unread_part`", "thought_signature")
	o("choices[0].message", KindKey, isRefused, "a channel label on answer text or calls: the answer cannot be told from the model's analysis (`unread_part`)", "channel")
	o("choices[0].message.extra_content", KindKey, isJudged, "Gemini's own members, below; any other member of `extra_content` is `unread_part`", "google")
	o("choices[0].message.extra_content.google", KindKey, isJudged, "the reasoning signature: a string is kept, any other kind `unread_part`", "thought_signature")
	o("choices[0].message.extra_content.google", KindKey, isJudged, "whether the part was reasoning: a boolean is read, any other kind `unread_part`", "thought")
	o("choices[0].message.content[]", KindType, isRead, "prose (the texts are joined)", "text")
	o("choices[0].message.content[]", KindType, isRefused, "a refusal part: `refusal`", "refusal")
	o("choices[0].message.content[type=text]", KindKey, isRead, "the part's type and prose", "type", "text")
	o("choices[0].message.content[type=text]", KindKey, isJudged, "as `message.annotations`", "annotations")
	o("choices[0].message.annotations[]", KindType, isIgnored, "a citation of a web search OpenAI ran; it carries no call", "url_citation")
	o("choices[0].message.tool_calls[]", KindKey, isRead, "the call id the result goes back under (none or empty: Airlock assigns one, marked assigned)", "id")
	o("choices[0].message.tool_calls[]", KindKey, isRead, "must be `function` when present: a `custom` tool call carries free-form input Airlock never offered (`unread_part`)", "type")
	o("choices[0].message.tool_calls[]", KindKey, isRead, "the name and arguments", "function")
	o("choices[0].message.tool_calls[]", KindKey, isIgnored, "a stream position some servers keep in the assembled message", "index")
	o("choices[0].message.tool_calls[]", KindKey, isJudged, "Gemini: the call's thought signature, as `message.extra_content`; kept and sent back with the call", "extra_content")
	o("choices[0].message.tool_calls[].function", KindKey, isRead, "the name (matched exactly against the name grammar) and the arguments (a JSON text holding one object)", "name", "arguments")

	// ---- OpenAI chat completions: stream ----
	oss := func(place string, kind PartKind, d Disposition, why string, keys ...string) {
		add(APIOpenAIChat, true, place, kind, d, why, keys...)
	}
	oss("data", KindData, isRead, "ends the stream", "[DONE]")
	oss("chunk", KindKey, isRead, "`chat.completion.chunk`; `\"\"` on a chunk with no choice is ignored (Azure's first chunk, about the prompt); any other value is carried to the body and refused", "object")
	oss("chunk", KindKey, isRead, "each choice is folded by its index into the message; one without a finish reason at the end is `stream_fault`", "choices")
	oss("chunk", KindKey, isIgnored, "padding OpenAI adds to hide the length of a chunk", "obfuscation")
	oss("chunk", KindKey, isJudged, "the first non-null error is kept: `provider_error`", "error")
	oss("chunk", KindOther, isRead, "carried to the top of the assembled body, where the body's rows judge it (the last value, or a refused value once sent)", "*")
	oss("chunk.choices[]", KindKey, isRead, "the choice the chunk belongs to; only choice 0 is shown, another is a second choice (`unread_part`)", "index")
	oss("chunk.choices[]", KindKey, isRead, "the pieces of the message; a delta that carries anything after the choice's finish reason is `stream_fault`", "delta")
	oss("chunk.choices[]", KindKey, isRefused, "a whole message in a chunk's choice is `stream_fault`", "message")
	oss("chunk.choices[]", KindKey, isRead, "null until the end; two different values are `stream_fault`", "finish_reason")
	oss("chunk.choices[]", KindKey, isRead, "entries joined, then judged as the body's `logprobs`", "logprobs")
	oss("chunk.choices[]", KindOther, isRead, "carried to the assembled choice and judged there", "*")
	oss("chunk.choices[].delta", KindKey, isRead, "two different roles are `stream_fault`", "role")
	oss("chunk.choices[].delta", KindKey, isRead, "string pieces joined exactly (a value null in every delta stays null, as the unstreamed message has it)", "content", "refusal", "reasoning_content", "reasoning")
	oss("chunk.choices[].delta", KindKey, isRead, "call pieces, folded by their index", "tool_calls")
	oss("chunk.choices[].delta", KindKey, isRead, "the legacy call's pieces", "function_call")
	oss("chunk.choices[].delta", KindKey, isJudged, "Groq (gpt-oss): `analysis` on a delta that carries only reasoning is ignored; on any other delta it is carried and refused", "channel")
	oss("chunk.choices[].delta", KindOther, isRead, "carried to the assembled message and judged there", "*")
	oss("chunk.choices[].delta.tool_calls[]", KindKey, isRead, "which call the piece belongs to; an entry without one is a whole call, kept as sent (the same one sent twice is `stream_fault`); more than 128 calls refuse the message", "index")
	oss("chunk.choices[].delta.tool_calls[]", KindKey, isRead, "sent once; null or `\"\"` later says nothing; two different values are `stream_fault`", "id", "type")
	oss("chunk.choices[].delta.tool_calls[]", KindKey, isRead, "the name and argument pieces", "function")
	oss("chunk.choices[].delta.tool_calls[]", KindOther, isRead, "carried to the assembled call and judged there (a refused value once sent is kept over later ones)", "*")
	oss("chunk.choices[].delta.tool_calls[].function", KindKey, isRead, "arrives whole in one chunk: a second non-empty name, even the same one, is `stream_fault` (joining would invent `read_fileread_file`)", "name")
	oss("chunk.choices[].delta.tool_calls[].function", KindKey, isRead, "pieces joined exactly", "arguments")
	oss("chunk.choices[].delta.tool_calls[].function", KindOther, isRead, "carried to the assembled function and judged there", "*")

	// ---- Ollama /api/chat ----
	ol := func(place string, kind PartKind, d Disposition, why string, keys ...string) {
		add(APIOllama, false, place, kind, d, why, keys...)
	}
	ol("", KindKey, isRead, "the message", "message")
	ol("", KindKey, isRead, "`stop` ends normally, and so does no `done_reason` beside `done: true` (older servers); `length` is `truncated`; anything else `abnormal_finish`", "done_reason")
	ol("", KindKey, isRead, "must be `true`: `done: false` is a stream line, not a finished message (`unread_part`)", "done")
	ol("", KindKey, isIgnored, "model name, time, durations and token counts", "model", "created_at", "total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration")
	ol("", KindKey, isIgnored, "ollama.com cloud models: where the model ran", "remote_model", "remote_host")
	ol("", KindKey, isIgnored, "logprobs of the text", "logprobs")
	ol("", KindKey, isJudged, "null says nothing; an error is `provider_error`", "error")
	ol("", KindKey, isRefused, fault, StreamFaultKey)
	ol("message", KindKey, isRead, "must be `assistant`", "role")
	ol("message", KindKey, isRead, "the prose", "content")
	ol("message", KindKey, isRead, "the calls (Ollama sends no ids: Airlock assigns `call_<index>`, marked assigned)", "tool_calls")
	ol("message", KindKey, isIgnored, "the model's reasoning text: never an answer or a call", "thinking")
	ol("message", KindKey, isJudged, "null or `[]` says nothing; images in the answer are `unread_part`", "images")
	ol("message.tool_calls[]", KindKey, isRead, "the call id, when newer servers send one", "id")
	ol("message.tool_calls[]", KindKey, isRead, "must be `function` when present", "type")
	ol("message.tool_calls[]", KindKey, isRead, "the name and arguments", "function")
	ol("message.tool_calls[].function", KindKey, isRead, "the name, and the arguments as a JSON object (a string is never decoded: `arguments_not_object`, or `invalid_json` when it is not JSON)", "name", "arguments")
	ol("message.tool_calls[].function", KindKey, isIgnored, "the call's position", "index")
	ols := func(place string, kind PartKind, d Disposition, why string, keys ...string) {
		add(APIOllama, true, place, kind, d, why, keys...)
	}
	ols("line", KindKey, isRead, "its pieces are folded into one message", "message")
	ols("line", KindKey, isRead, "`true` ends the stream (a line after it is `stream_fault`); a stream without it is `stream_fault`", "done")
	ols("line", KindKey, isRead, "why the answer ended, on the last line; a second, different one is `stream_fault` (never overwritten)", "done_reason")
	ols("line", KindOther, isRead, "carried to the top of the assembled body and judged there", "*")
	ols("line.message", KindKey, isRead, "string pieces joined exactly", "content", "thinking")
	ols("line.message", KindKey, isRead, "each call arrives whole, in one line", "tool_calls")
	ols("line.message", KindOther, isRead, "carried to the assembled message and judged there", "*")

	// ---- Anthropic Messages ----
	an := func(place string, kind PartKind, d Disposition, why string, keys ...string) {
		add(APIAnthropic, false, place, kind, d, why, keys...)
	}
	an("", KindKey, isRead, "`message`; a body of type `error` is `provider_error`", "type")
	an("", KindKey, isRead, "must be `assistant`", "role")
	an("", KindKey, isRead, "the content blocks", "content")
	an("", KindKey, isRead, "`tool_use` and `end_turn` end normally; `max_tokens` and `model_context_window_exceeded` are `truncated`; `refusal`, `pause_turn`, `stop_sequence`, anything else or none `abnormal_finish`", "stop_reason")
	an("", KindKey, isIgnored, "identifiers and token counts", "id", "model", "usage")
	an("", KindKey, isIgnored, "the stop sequence matched (`stop_reason` is read)", "stop_sequence")
	an("", KindKey, isIgnored, "the code-execution container's id and expiry", "container")
	an("", KindKey, isIgnored, "prompt-cache diagnostics", "diagnostics")
	an("", KindKey, isIgnored, "what the API cleared from the context", "context_management")
	an("", KindKey, isJudged, "null says nothing; the API's account of a refusal is `refusal`", "stop_details")
	an("", KindKey, isRefused, fault, StreamFaultKey)
	an("content[]", KindType, isRead, "prose (the texts are joined)", "text")
	an("content[]", KindType, isRead, "a call", "tool_use")
	an("content[]", KindType, isIgnored, "the model's reasoning (or its encrypted form): never an answer or a call", "thinking", "redacted_thinking")
	an("content[]", KindType, isRefused, "what the API ran or made itself (server tools: web search and fetch, code execution, tool search; the MCP connector's calls and results; a file put in its code container; a compaction summary): no decision of the model on Airlock's catalog (`unread_part`)",
		"server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
		"bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "tool_search_tool_result",
		"mcp_tool_use", "mcp_tool_result", "container_upload", "compaction")
	an("content[type=text]", KindKey, isRead, "the block's type and prose", "type", "text")
	an("content[type=text]", KindKey, isIgnored, "citations of documents or searches the request supplied", "citations")
	an("content[type=tool_use]", KindKey, isRead, "the call id, name, and arguments (an object, kept verbatim; a string is `arguments_not_object`)", "type", "id", "name", "input")
	an("content[type=tool_use]", KindKey, isRead, "Airlock's own member, never sent by a provider, on a block assembled from a stream whose input pieces do not join into one JSON value: judged as the argument text it is (`invalid_json`, `trailing_data`; `truncated` when the stop reason says so), never as arguments", PartialInputKey)
	an("content[type=tool_use]", KindKey, isJudged, "absent, null or `{\"type\":\"direct\"}` (the model's own call) is read; a call issued by code the API ran is `unread_part`", "caller")
	an("content[type=tool_use]", KindKey, isJudged, "null says nothing; a call of an API toolset (the MCP connector), never offered by Airlock, is `unread_part`", "toolset_name")
	an("content[type=thinking]", KindKey, isRead, "the block's type", "type")
	an("content[type=thinking]", KindKey, isIgnored, "the reasoning text and its signature", "thinking", "signature")
	an("content[type=redacted_thinking]", KindKey, isRead, "the block's type", "type")
	an("content[type=redacted_thinking]", KindKey, isIgnored, "the encrypted reasoning", "data")
	ans := func(place string, kind PartKind, d Disposition, why string, keys ...string) {
		add(APIAnthropic, true, place, kind, d, why, keys...)
	}
	ans("event", KindType, isRead, "the message's members, carried to the assembled body (its content must be empty); a second one is `stream_fault`", "message_start")
	ans("event", KindType, isRead, "the stop reason, usage and any other member, carried to the top of the assembled body and judged there", "message_delta")
	ans("event", KindType, isRead, "ends the stream; a stream without it is `stream_fault`, an event after it too", "message_stop")
	ans("event", KindType, isRead, "opens block `index` (in order), judged as the body's block when the message is assembled", "content_block_start")
	ans("event", KindType, isRead, "a piece of block `index`, of the delta types below", "content_block_delta")
	ans("event", KindType, isRead, "closes block `index`; a delta after it is `stream_fault`", "content_block_stop")
	ans("event", KindType, isIgnored, "a keep-alive", "ping")
	ans("event", KindType, isRefused, "an error in the stream: `provider_error`", "error")
	ans("content_block_delta.delta", KindType, isRead, "a piece of a `text` block", "text_delta")
	ans("content_block_delta.delta", KindType, isRead, "a piece of a `tool_use` block's input, joined exactly; for any other block `stream_fault`", "input_json_delta")
	ans("content_block_delta.delta", KindType, isRead, "a piece of a `thinking` block's text or signature", "thinking_delta", "signature_delta")
	ans("content_block_delta.delta", KindType, isRead, "a citation of a `text` block", "citations_delta")

	// ---- OpenAI Responses ----
	re := func(place string, kind PartKind, d Disposition, why string, keys ...string) {
		add(APIResponses, false, place, kind, d, why, keys...)
	}
	re("", KindKey, isRead, "must be `response`", "object")
	re("", KindKey, isRead, "`completed` ends normally; `incomplete` for `max_output_tokens` is `truncated`; `failed`, any other status or none `abnormal_finish`", "status")
	re("", KindKey, isRead, "the output items", "output")
	re("", KindKey, isRead, "why the response is incomplete (read with `status`)", "incomplete_details")
	re("", KindKey, isJudged, "null says nothing; an error object is `provider_error`", "error")
	re("", KindKey, isIgnored, "identifiers, times and token counts", "id", "created_at", "completed_at", "model", "usage", "billing")
	re("", KindKey, isIgnored, "the request's own settings, which the API echoes", "instructions", "max_output_tokens", "max_tool_calls", "parallel_tool_calls",
		"previous_response_id", "prompt_cache_key", "prompt_cache_retention", "reasoning", "safety_identifier", "service_tier", "store",
		"temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user", "metadata", "background", "conversation", "prompt")
	re("", KindKey, isIgnored, "the SDKs' joined text, never on the wire: harmless", "output_text")
	re("", KindKey, isRefused, fault, StreamFaultKey)
	re("output[]", KindType, isRead, "prose, or a refusal", "message")
	re("output[]", KindType, isRead, "a call", "function_call")
	re("output[]", KindType, isIgnored, "the model's reasoning: never an answer or a call (kept verbatim and sent back with the calls, as the API requires)", "reasoning")
	for _, t := range []string{"web_search_call", "file_search_call", "computer_call", "code_interpreter_call", "image_generation_call",
		"mcp_call", "mcp_list_tools", "mcp_approval_request", "local_shell_call", "custom_tool_call"} {
		re("output[]", KindType, isRefused, "a tool the API ran itself, or a call of a kind Airlock never offers (`unread_part`)", t)
	}
	re("output[type=message]", KindKey, isRead, "the item's type, status and content parts", "type", "status", "content")
	re("output[type=message]", KindKey, isRead, "must be `assistant`", "role")
	re("output[type=message]", KindKey, isIgnored, "the item's id", "id")
	re("output[type=message].content[]", KindType, isRead, "prose (the texts are joined)", "output_text")
	re("output[type=message].content[]", KindType, isRefused, "a refusal: `refusal`", "refusal")
	re("output[type=message].content[type=output_text]", KindKey, isRead, "the part's type and prose", "type", "text")
	re("output[type=message].content[type=output_text]", KindKey, isJudged, "as chat completions' `annotations`: `url_citation` ignored, any other `unread_part`", "annotations")
	re("output[type=message].content[type=output_text]", KindKey, isIgnored, "logprobs of the text", "logprobs")
	re("output[type=function_call]", KindKey, isRead, "the call: `call_id` is the id its result goes back under; `arguments` a JSON text read as chat completions' arguments", "type", "call_id", "name", "arguments", "status")
	re("output[type=function_call]", KindKey, isIgnored, "the item's id (`call_id` is the call's)", "id")
	re("output[type=reasoning]", KindKey, isRead, "the item's type", "type")
	re("output[type=reasoning]", KindKey, isIgnored, "the item's id, summary, reasoning text and encrypted reasoning, and status", "id", "summary", "content", "encrypted_content", "status")
	res := func(place string, kind PartKind, d Disposition, why string, keys ...string) {
		add(APIResponses, true, place, kind, d, why, keys...)
	}
	res("event", KindType, isRead, "the terminal event: its `response` is the body, and every item the deltas built must equal the item it holds, exactly (`stream_fault` otherwise)", "response.completed", "response.incomplete", "response.failed")
	res("event", KindType, isRead, "opens an output item at `output_index` (a second one there is `stream_fault`)", "response.output_item.added")
	res("event", KindType, isRead, "the finished item, compared with the terminal response's", "response.output_item.done")
	res("event", KindType, isRead, "a piece of a message's text, compared with the terminal response's", "response.output_text.delta")
	res("event", KindType, isRead, "a piece of a call's arguments, compared with the terminal response's", "response.function_call_arguments.delta")
	res("event", KindType, isRefused, "an error in the stream: `provider_error` (the error object, or code and message beside type)", "error")
	res("event", KindType, isIgnored, "snapshots of the response in progress (the terminal event holds the final one)", "response.created", "response.in_progress", "response.queued")
	res("event", KindType, isIgnored, "part boundaries and done events, whose values the terminal response holds and the output items are compared with", "response.content_part.added", "response.content_part.done",
		"response.output_text.done", "response.output_text.annotation.added", "response.function_call_arguments.done")
	res("event", KindType, isRefused, "a refusal streamed: the final response must hold the refusal part, which refuses the message (`refusal`); otherwise `stream_fault`", "response.refusal.delta", "response.refusal.done")
	res("event", KindType, isIgnored, "reasoning text and summary pieces: never an answer or a call", "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
		"response.reasoning_summary_text.delta", "response.reasoning_summary_text.done", "response.reasoning_text.delta", "response.reasoning_text.done")
	res("event", KindType, isIgnored, "a keep-alive", "keepalive")
	res("event", KindType, isIgnored, "progress of a tool the API runs itself (or audio it speaks): its output item, refused in the terminal response, is what counts",
		"response.web_search_call.*", "response.file_search_call.*", "response.code_interpreter_call*", "response.image_generation_call.*",
		"response.mcp_*", "response.custom_tool_call_input.*", "response.audio.*")
	return rows
}

// contractHeader and contractRefused open docs/providers.md.
const contractHeader = `# Providers: every part of a response, read, ignored or refused

<!-- Generated from internal/parse/contract.go by ` + "`go test ./internal/parse -run TestContract -update`" + `; do not edit by hand. -->

Airlock reads a provider's answer strictly (internal/parse): every member of every object of a
response, and every event of a stream, has one of the four dispositions below, and anything else
fails the whole message. This is that contract, per API, for bodies and for streams. A test holds it to the
parser both ways (` + "`internal/parse/contract_test.go`" + `), so it cannot drift.

- **read**: the parser reads it; its own checks apply.
- **ignored**: any value is dropped, because the part carries no call, answer, refusal or error.
- **judged**: read when its value says nothing (null, empty, nothing flagged); refused when it
  carries something.
- **refused**: the whole message fails: every call of it fails and the turn shows it incomplete
  with the reason (` + "`refusal`, `provider_error`, `unread_part`, `stream_fault`" + `) and the part named.

A key or type not listed at a place is refused: ` + "`unread_part`" + ` in a body (a part no provider
documents there is what a new kind of call, refusal or error looks like), ` + "`stream_fault`" + ` for an
event or delta type a stream should not carry. A stream is assembled into the body the same
response has unstreamed, and that body is judged by the body's rows: its parts are listed
only where a stream differs. Places read like paths: ` + "`choices[0].message`" + `,
` + "`content[type=tool_use]`" + ` (the members of a block of that type), ` + "`*`" + ` (any other member).

**When a provider sends a part Airlock refuses**, the turn says which (` + "`incomplete_detail`" + `
names the part and what it carried). If the part carries nothing and should be read, or the
stream is what fails while the same answer unstreamed reads (` + "`AIRLOCK_STREAM=0`" + ` turns
streaming off meanwhile), capture the raw response (` + "`curl -sN … > capture.sse`" + `), check it with
` + "`airlock parse --stream < capture.sse`" + ` (` + "`airlock parse < body.json`" + ` for a body), and file an issue
with the capture and that output.
`

// ContractMarkdown renders rows (Contract()) as docs/providers.md: the introduction, then per
// API its providers and two tables, the body's parts and the stream's (consecutive rows that
// differ only in their key share a line).
func ContractMarkdown(rows []ContractRow) string {
	var b strings.Builder
	b.WriteString(contractHeader)
	for _, api := range ContractAPIs() {
		fmt.Fprintf(&b, "\n## %s\n\nSent by %s. Read as `--format %s` by `airlock parse`.\n", api.Name, api.Providers, api.Format)
		for _, stream := range []bool{false, true} {
			if stream {
				fmt.Fprintf(&b, "\n### Stream: %s\n\n", api.Stream)
			} else {
				fmt.Fprintf(&b, "\n### Body: %s\n\n", api.Body)
			}
			b.WriteString("| where | part | disposition | why |\n| --- | --- | --- | --- |\n")
			var group []ContractRow // consecutive rows that differ only in their key: one line
			flush := func() {
				if len(group) == 0 {
					return
				}
				r := group[0]
				part := contractPart(r)
				if r.Kind == KindType && len(group) > 1 {
					keys := make([]string, len(group))
					for i, g := range group {
						keys[i] = "`" + g.Key + "`"
					}
					part = "types " + strings.Join(keys, ", ")
				} else if len(group) > 1 {
					parts := make([]string, len(group))
					for i, g := range group {
						parts[i] = contractPart(g)
					}
					part = strings.Join(parts, ", ")
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", contractPlace(r.Place), part, r.Disposition, strings.ReplaceAll(r.Why, "|", `\|`))
				group = group[:0]
			}
			for _, r := range rows {
				if r.API != api.Name || r.Stream != stream {
					continue
				}
				if len(group) > 0 {
					g := group[0]
					if g.Place != r.Place || g.Kind != r.Kind || g.Disposition != r.Disposition || g.Why != r.Why {
						flush()
					}
				}
				group = append(group, r)
			}
			flush()
		}
	}
	return b.String()
}

func contractPlace(place string) string {
	if place == "" {
		return "top level"
	}
	return "`" + place + "`"
}

func contractPart(r ContractRow) string {
	switch r.Kind {
	case KindType:
		return "type `" + r.Key + "`"
	case KindOther:
		return "any other member"
	case KindData:
		return "`data: " + r.Key + "`"
	}
	return "`" + r.Key + "`"
}
