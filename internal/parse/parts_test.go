package parse

import (
	"strings"
	"testing"
)

// Bodies with one valid call and room for one extra part at each level, so each test below
// differs from a message Airlock accepts by exactly the part under test.

const okCall = `{"id":"call_1","type":"function","function":{"name":"do_it","arguments":"{\"a\":1}"}}`

// oa builds a chat.completion with extra top-level, choice and message members (each "" or
// a leading-comma-free member list) and the given tool_calls entry.
func oa(top, choice, msg, call string) []byte {
	if call == "" {
		call = okCall
	}
	m := `{"role":"assistant","content":null,"tool_calls":[` + call + `]` + lead(msg) + `}`
	c := `{"index":0,"message":` + m + `,"finish_reason":"tool_calls"` + lead(choice) + `}`
	return []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[` + c + `]` + lead(top) + `}`)
}

// ol builds an Ollama /api/chat body with extra top-level and message members.
func ol(top, msg, call string) []byte {
	if call == "" {
		call = `{"function":{"name":"do_it","arguments":{"a":1}}}`
	}
	return []byte(`{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"","tool_calls":[` + call + `]` + lead(msg) + `},"done":true,"done_reason":"stop"` + lead(top) + `}`)
}

// an builds an Anthropic message with a valid tool_use block, extra blocks after it and extra
// top-level members.
func an(top, blocks, toolUseExtra string) []byte {
	tu := `{"type":"tool_use","id":"toolu_1","name":"do_it","input":{"a":1}` + lead(toolUseExtra) + `}`
	return []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[` + tu + lead(blocks) + `],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}` + lead(top) + `}`)
}

func lead(members string) string {
	if members == "" {
		return ""
	}
	return "," + members
}

// TestEveryPartReadOrRefused is the part model (parts.go), one case per part: each refused
// part fails the whole message (every call, and Incomplete) with its named reason; each
// ignorable part leaves the call a candidate.
func TestEveryPartReadOrRefused(t *testing.T) {
	for _, tc := range partCases() {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Parse(tc.format, tc.body, Options{Versions: map[string]int{"do_it": 1}})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tc.want == "" {
				if res.Incomplete != "" || len(res.Calls) != 1 || !res.Calls[0].Candidate() {
					t.Fatalf("want one candidate, got incomplete %q (%s), calls %+v", res.Incomplete, res.IncompleteDetail, res.Calls)
				}
				return
			}
			if res.Incomplete != tc.want {
				t.Fatalf("Incomplete = %q (%s), want %q", res.Incomplete, res.IncompleteDetail, tc.want)
			}
			if !strings.Contains(res.IncompleteDetail, tc.detail) {
				t.Errorf("detail %q does not name %q", res.IncompleteDetail, tc.detail)
			}
			for _, c := range res.Calls {
				// invalid_name keeps precedence (such a call is never echoed back to the model
				// under its bad name); the message's reason is in its detail.
				if c.Candidate() || (c.Reason != tc.want && c.Reason != ReasonInvalidName) || c.Arguments != nil {
					t.Errorf("call %d: reason %q, want %q and no arguments", c.Index, c.Reason, tc.want)
				}
			}
		})
	}
}

// partCase is one part of the part model in a body that differs from an accepted one by
// exactly that part.
type partCase struct {
	name   string
	format Format
	body   []byte
	want   Reason // "" = the call stays a candidate (part read or ignorable)
	detail string // substring of the detail that names the part
}

func partCases() []partCase {
	return []partCase{
		// OpenAI: ignorable parts.
		{"openai plain", FormatOpenAI, oa("", "", "", ""), "", ""},
		{"openai usage, fingerprint, tier", FormatOpenAI, oa(`"usage":{"prompt_tokens":1},"system_fingerprint":"fp","service_tier":"default"`, "", "", ""), "", ""},
		{"openai logprobs of text", FormatOpenAI, oa("", `"logprobs":{"content":[{"token":"a","logprob":-0.1}],"refusal":null}`, "", ""), "", ""},
		{"openai empty refusal logprobs", FormatOpenAI, oa("", `"logprobs":{"content":null,"refusal":[]}`, "", ""), "", ""},
		{"openai null refusal", FormatOpenAI, oa("", "", `"refusal":null`, ""), "", ""},
		{"openai empty refusal", FormatOpenAI, oa("", "", `"refusal":""`, ""), "", ""},
		{"openai url_citation annotations", FormatOpenAI, oa("", "", `"annotations":[{"type":"url_citation","url_citation":{"url":"https://example.com","title":"t","start_index":0,"end_index":1}}]`, ""), "", ""},
		{"openai null audio", FormatOpenAI, oa("", "", `"audio":null`, ""), "", ""},
		{"openai reasoning text", FormatOpenAI, oa("", "", `"reasoning_content":"think","reasoning":"think"`, ""), "", ""},
		{"openai call index", FormatOpenAI, oa("", "", "", `{"index":0,"id":"call_1","type":"function","function":{"name":"do_it","arguments":"{}"}}`), "", ""},
		{"openai call without type", FormatOpenAI, oa("", "", "", `{"id":"call_1","function":{"name":"do_it","arguments":"{}"}}`), "", ""},
		{"vllm extras", FormatOpenAI, oa(`"prompt_logprobs":null,"kv_transfer_params":null`, `"stop_reason":null,"token_ids":null`, "", ""), "", ""},
		{"llama.cpp timings", FormatOpenAI, oa(`"timings":{"predicted_ms":1}`, "", "", ""), "", ""},
		{"azure filters not filtered", FormatOpenAI, oa(`"prompt_filter_results":[]`, `"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}`, "", ""), "", ""},

		// OpenAI: refused parts.
		{"openai refusal", FormatOpenAI, oa("", "", `"refusal":"I can't help with that."`, ""), ReasonRefusal, "choices[0].message.refusal"},
		{"openai refusal logprobs", FormatOpenAI, oa("", `"logprobs":{"content":null,"refusal":[{"token":"I","logprob":0}]}`, "", ""), ReasonRefusal, "logprobs.refusal"},
		{"openai refusal content part", FormatOpenAI, []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"refusal","refusal":"no"}],"tool_calls":[` + okCall + `]},"finish_reason":"tool_calls"}]}`), ReasonRefusal, "content[0]"},
		{"azure content filtered", FormatOpenAI, oa("", `"content_filter_results":{"violence":{"filtered":true,"severity":"high"}}`, "", ""), ReasonRefusal, "content_filter_results.violence"},
		{"openai audio answer", FormatOpenAI, oa("", "", `"audio":{"id":"audio_1","data":"AAAA","transcript":"call do_it","expires_at":1}`, ""), ReasonUnreadPart, "message.audio"},
		{"openai image content part", FormatOpenAI, []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}],"tool_calls":[` + okCall + `]},"finish_reason":"tool_calls"}]}`), ReasonUnreadPart, "content[1]"},
		{"openai custom tool call", FormatOpenAI, oa("", "", "", `{"id":"call_1","type":"custom","custom":{"name":"do_it","input":"rm -rf"}}`), ReasonUnreadPart, "tool_calls[0].type"},
		{"openai unknown call member", FormatOpenAI, oa("", "", "", `{"id":"call_1","type":"function","function":{"name":"do_it","arguments":"{}"},"extra_function":{"name":"x"}}`), ReasonUnreadPart, "extra_function"},
		{"openai unknown function member", FormatOpenAI, oa("", "", "", `{"id":"call_1","type":"function","function":{"name":"do_it","arguments":"{}","input":{}}}`), ReasonUnreadPart, "function"},
		{"openai file_search annotation", FormatOpenAI, oa("", "", `"annotations":[{"type":"file_citation","file_id":"f"}]`, ""), ReasonUnreadPart, "annotations[0]"},
		{"openai second choice", FormatOpenAI, []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"},{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[` + okCall + `]},"finish_reason":"tool_calls"}]}`), ReasonUnreadPart, "choices"},
		{"openai first choice not index 0", FormatOpenAI, []byte(strings.Replace(string(oa("", "", "", "")), `"index":0,"message"`, `"index":1,"message"`, 1)), ReasonUnreadPart, "choices[0].index"},
		{"openai chunk object", FormatOpenAI, []byte(`{"object":"chat.completion.chunk","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` + okCall + `]},"finish_reason":"tool_calls"}]}`), ReasonUnreadPart, "object"},
		{"openai error beside choices", FormatOpenAI, oa(`"error":{"message":"upstream failed mid-answer"}`, "", "", ""), ReasonProviderError, "error"},
		{"openrouter choice error", FormatOpenAI, oa("", `"error":{"code":502,"message":"provider died"}`, "", ""), ReasonProviderError, "choices[0].error"},
		{"openai role not assistant", FormatOpenAI, []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"tool","content":null,"tool_calls":[` + okCall + `]},"finish_reason":"tool_calls"}]}`), ReasonUnreadPart, "role"},
		{"openai unknown message member", FormatOpenAI, oa("", "", `"tool_use":[{"name":"do_it"}]`, ""), ReasonUnreadPart, "tool_use"},
		{"openai unknown choice member", FormatOpenAI, oa("", `"tool_calls":[]`, "", ""), ReasonUnreadPart, "choices[0]"},
		{"openai unknown top member", FormatOpenAI, oa(`"tool_calls":[]`, "", "", ""), ReasonUnreadPart, "tool_calls"},
		{"openai error body", FormatOpenAI, []byte(`{"error":{"message":"overloaded","type":"server_error"}}`), ReasonProviderError, "overloaded"},

		// Ollama.
		{"ollama plain", FormatOpenAI, ol("", "", ""), "", ""},
		{"ollama timings and thinking", FormatOpenAI, ol(`"total_duration":1,"eval_count":2`, `"thinking":"hmm"`, ""), "", ""},
		{"ollama call index", FormatOpenAI, ol("", "", `{"function":{"index":0,"name":"do_it","arguments":{}}}`), "", ""},
		{"ollama not done", FormatOpenAI, []byte(`{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"do_it","arguments":{}}}]},"done":false,"done_reason":"stop"}`), ReasonUnreadPart, "done"},
		{"ollama error", FormatOpenAI, ol(`"error":"model crashed"`, "", ""), ReasonProviderError, "error"},
		{"ollama images", FormatOpenAI, ol("", `"images":["AAAA"]`, ""), ReasonUnreadPart, "images"},
		{"ollama tool_name on assistant", FormatOpenAI, ol("", `"tool_name":"do_it"`, ""), ReasonUnreadPart, "tool_name"},
		{"ollama unknown call member", FormatOpenAI, ol("", "", `{"function":{"name":"do_it","arguments":{}},"extra":1}`), ReasonUnreadPart, "extra"},

		// Anthropic: read and ignorable.
		{"anthropic plain", FormatAnthropic, an("", "", ""), "", ""},
		{"anthropic text with citations", FormatAnthropic, an("", `{"type":"text","text":"see","citations":[{"type":"char_location","cited_text":"x"}]}`, ""), "", ""},
		{"anthropic thinking", FormatAnthropic, an("", `{"type":"thinking","thinking":"hmm","signature":"sig"}`, ""), "", ""},
		{"anthropic redacted thinking", FormatAnthropic, an("", `{"type":"redacted_thinking","data":"enc"}`, ""), "", ""},
		{"anthropic direct caller", FormatAnthropic, an("", "", `"caller":{"type":"direct"}`), "", ""},
		{"anthropic null toolset", FormatAnthropic, an("", "", `"toolset_name":null`), "", ""},
		{"anthropic container, diagnostics, null stop_details", FormatAnthropic, an(`"container":null,"diagnostics":null,"stop_details":null,"context_management":null`, "", ""), "", ""},

		// Anthropic: refused.
		{"anthropic server_tool_use", FormatAnthropic, an("", `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}`, ""), ReasonUnreadPart, "server_tool_use"},
		{"anthropic web_search_tool_result", FormatAnthropic, an("", `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":{"type":"web_search_tool_result_error","error_code":"max_uses_exceeded"}}`, ""), ReasonUnreadPart, "web_search_tool_result"},
		{"anthropic web_fetch_tool_result", FormatAnthropic, an("", `{"type":"web_fetch_tool_result","tool_use_id":"s","content":{}}`, ""), ReasonUnreadPart, "web_fetch_tool_result"},
		{"anthropic code_execution_tool_result", FormatAnthropic, an("", `{"type":"code_execution_tool_result","tool_use_id":"s","content":{}}`, ""), ReasonUnreadPart, "code_execution_tool_result"},
		{"anthropic bash_code_execution_tool_result", FormatAnthropic, an("", `{"type":"bash_code_execution_tool_result","tool_use_id":"s","content":{}}`, ""), ReasonUnreadPart, "bash_code_execution"},
		{"anthropic text_editor_code_execution_tool_result", FormatAnthropic, an("", `{"type":"text_editor_code_execution_tool_result","tool_use_id":"s","content":{}}`, ""), ReasonUnreadPart, "text_editor"},
		{"anthropic tool_search_tool_result", FormatAnthropic, an("", `{"type":"tool_search_tool_result","tool_use_id":"s","content":{}}`, ""), ReasonUnreadPart, "tool_search"},
		{"anthropic mcp_tool_use", FormatAnthropic, an("", `{"type":"mcp_tool_use","id":"mcptoolu_1","name":"delete","server_name":"s","input":{}}`, ""), ReasonUnreadPart, "mcp_tool_use"},
		{"anthropic mcp_tool_result", FormatAnthropic, an("", `{"type":"mcp_tool_result","tool_use_id":"m","is_error":true,"content":[]}`, ""), ReasonUnreadPart, "mcp_tool_result"},
		{"anthropic container_upload", FormatAnthropic, an("", `{"type":"container_upload","file_id":"file_1"}`, ""), ReasonUnreadPart, "container_upload"},
		{"anthropic compaction", FormatAnthropic, an("", `{"type":"compaction","content":"summary"}`, ""), ReasonUnreadPart, "compaction"},
		{"anthropic unknown block", FormatAnthropic, an("", `{"type":"tool_call","name":"do_it"}`, ""), ReasonUnreadPart, "tool_call"},
		{"anthropic block without type", FormatAnthropic, an("", `{"text":"x"}`, ""), ReasonUnreadPart, "content[1]"},
		{"anthropic server caller", FormatAnthropic, an("", "", `"caller":{"type":"code_execution_20250825","tool_id":"srvtoolu_9"}`), ReasonUnreadPart, "caller"},
		{"anthropic toolset tool_use", FormatAnthropic, an("", "", `"toolset_name":"github"`), ReasonUnreadPart, "toolset_name"},
		{"anthropic unknown tool_use member", FormatAnthropic, an("", "", `"arguments":{"b":2}`), ReasonUnreadPart, "arguments"},
		{"anthropic stop_details refusal", FormatAnthropic, an(`"stop_details":{"type":"refusal","category":"cyber","explanation":"no"}`, "", ""), ReasonRefusal, "stop_details"},
		{"anthropic role", FormatAnthropic, []byte(`{"type":"message","role":"user","content":[{"type":"tool_use","id":"t","name":"do_it","input":{}}],"stop_reason":"tool_use"}`), ReasonUnreadPart, "role"},
		{"anthropic unknown top member", FormatAnthropic, an(`"tool_calls":[]`, "", ""), ReasonUnreadPart, "tool_calls"},
		{"anthropic error body", FormatAnthropic, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), ReasonProviderError, "overloaded_error"},
	}
}

// TestRefusedPartDetailIsEscaped: provider text quoted in a detail is bounded and escaped
// (control and bidi characters never reach an operator's terminal raw).
func TestRefusedPartDetailIsEscaped(t *testing.T) {
	body := oa("", "", `"refusal":"no\u202e\u001b[2J`+strings.Repeat("x", 500)+`"`, "")
	res, err := Parse(FormatOpenAI, body, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete != ReasonRefusal {
		t.Fatalf("Incomplete %q", res.Incomplete)
	}
	if strings.ContainsAny(res.IncompleteDetail, "\u202e\x1b") || len(res.IncompleteDetail) > 400 {
		t.Errorf("detail not escaped or bounded: %q", res.IncompleteDetail)
	}
}

// TestRefusedPartWithoutCalls: a refused part in a message without calls still marks it
// incomplete (the turn ends incomplete, the prose is never reported as the answer).
func TestRefusedPartWithoutCalls(t *testing.T) {
	body := []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Sure.","refusal":"I won't"},"finish_reason":"stop"}]}`)
	res, err := Parse(FormatOpenAI, body, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete != ReasonRefusal || len(res.Calls) != 0 || res.Text != "Sure." {
		t.Fatalf("got %+v", res)
	}
}
