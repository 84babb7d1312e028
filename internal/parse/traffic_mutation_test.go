package parse

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/traffic"
)

// TestProviderTrafficMutated: each part the corpus showed to be a documented "nothing" is read
// only while it says nothing. The same recording, with that part made to carry a refusal, a
// filter hit, a call or an error, fails the whole message with a reason and a detail that
// name it; a stream that cannot be assembled exactly is a stream fault (issue 31 item 1).
func TestProviderTrafficMutated(t *testing.T) {
	cases := []struct {
		name, file   string
		from, to     string
		n            int // how many occurrences to replace (-1: all)
		want         Reason
		detailHas    string
		wantAllCalls bool // every call of the message must fail too
	}{
		{"moderation flags the output", "openai-chat_stream_text_moderation-chunk.sse",
			`"output":{"type":"moderation_results","model":"omni-moderation-latest","results":[{"type":"moderation_result","model":"omni-moderation-latest","flagged":false`,
			`"output":{"type":"moderation_results","model":"omni-moderation-latest","results":[{"type":"moderation_result","model":"omni-moderation-latest","flagged":true`,
			1, ReasonRefusal, "moderation flagged the output", false},
		{"moderation flagged is not a boolean", "openai-chat_stream_text_moderation-chunk.sse",
			`"flagged":false`, `"flagged":"no"`, 1, ReasonUnreadPart, "not a boolean", false},
		{"Azure filters the answer", "azure-openai-chat_stream_text_filters.sse",
			`"hate":{"filtered":false,"severity":"safe"},"self_harm"`, `"hate":{"filtered":true,"severity":"high"},"self_harm"`,
			1, ReasonRefusal, "content filter filtered", false},
		{"Azure's empty object on a chunk with a choice", "azure-openai-chat_stream_text_filters.sse",
			`"object":"chat.completion.chunk","system_fingerprint":null,"usage":null}`, `"object":"","system_fingerprint":null,"usage":null}`,
			1, ReasonUnreadPart, `object is "\"\""`, false},
		{"analysis channel on answer text", "groq-openai-compat_stream_tool-call.sse",
			`"delta":{"role":"assistant","content":""}`, `"delta":{"role":"assistant","content":"x","channel":"analysis"}`,
			1, ReasonUnreadPart, "channel label", true},
		{"another channel on reasoning", "groq-openai-compat_stream_tool-call.sse",
			`"channel":"analysis"`, `"channel":"final"`, 1, ReasonUnreadPart, `"\"final\""`, true},
		{"name repeated in every chunk", "openai-chat_stream_tool-call_content-null.sse",
			`"function":{"arguments":`, `"function":{"name":"get_capital","arguments":`, -1, ReasonStreamFault, "name sent again", true},
		{"a second id for one call", "openai-chat_stream_tool-call_content-null.sse",
			`{"index":0,"function":{"arguments":"UK"}}`, `{"index":0,"id":"call_other","function":{"arguments":"UK"}}`, 1, ReasonStreamFault, "two different ids", true},
		{"a refusal beside the call", "openai-chat_stream_tool-call_content-null.sse",
			`"delta":{},"logprobs":null,"finish_reason":"tool_calls"`, `"delta":{"refusal":"no"},"logprobs":null,"finish_reason":"tool_calls"`,
			1, ReasonRefusal, "refused", true},
		{"Gemini extra_content with an unknown member", "gemini-openai-compat_json_tool-call_no-id.json",
			`"thought": true,`, `"thought": true, "tool_code": "rm -rf /",`, 1, ReasonUnreadPart, `unknown key "tool_code"`, true},
		{"Gemini signature that is not a string", "gemini-openai-compat_json_tool-call_no-id.json",
			`"role": "assistant",
        "thought_signature": "`, `"role": "assistant",
        "thought_signature": 1, "x": "`, 1, ReasonUnreadPart, "not a string", true},
		{"Ollama done_reason empty", "ollama-native_json_tool-call_thinking.json",
			`"done": true`, `"done": true, "done_reason": ""`, 1, ReasonAbnormalFinish, "empty", true},
		{"Ollama done_reason load", "ollama-native_json_tool-call_thinking.json",
			`"done": true`, `"done": true, "done_reason": "load"`, 1, ReasonAbnormalFinish, `"load"`, true},
		{"Ollama stream without its done line", "ollama-native_stream_text_docs-example.ndjson",
			`"done":true`, `"done":false`, 1, ReasonStreamFault, "done true", false},
		{"Responses arguments streamed differ from the final", "openai-responses_stream_function-call.sse",
			`"delta":"France"`, `"delta":"Spain"`, 1, ReasonStreamFault, "differ", true},
		{"Responses stream cut before completed", "openai-responses_stream_function-call.sse",
			`data: {"type":"response.completed"`, `: {"type":"response.completed"`, 1, ReasonStreamFault, "ended before response.completed", false},
		{"Responses incomplete by max_output_tokens", "openai-responses_stream_function-call.sse",
			`{"type":"response.completed","response":{"id":"resp_67e554a155508191900ee113293c4c830794405d35281ae2","object":"response","created_at":1743082657,"status":"completed","error":null,"incomplete_details":null`, `{"type":"response.incomplete","response":{"id":"resp_67e554a155508191900ee113293c4c830794405d35281ae2","object":"response","created_at":1743082657,"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"}`,
			1, ReasonTruncated, "max_output_tokens", true},
		{"Responses incomplete by content filter", "openai-responses_stream_function-call.sse",
			`{"type":"response.completed","response":{"id":"resp_67e554a155508191900ee113293c4c830794405d35281ae2","object":"response","created_at":1743082657,"status":"completed","error":null,"incomplete_details":null`, `{"type":"response.incomplete","response":{"id":"resp_67e554a155508191900ee113293c4c830794405d35281ae2","object":"response","created_at":1743082657,"status":"incomplete","error":null,"incomplete_details":{"reason":"content_filter"}`,
			1, ReasonAbnormalFinish, "content_filter", true},
		{"Responses web search item", "openai-responses_stream_function-call.sse",
			`"output":[{"type":"function_call",`, `"output":[{"type":"web_search_call","id":"ws_1","status":"completed"},{"type":"function_call",`,
			1, ReasonStreamFault, "output items", true},
		{"Responses completed event with another status", "openai-responses_stream_function-call.sse",
			`"status":"completed","error":null,"incomplete_details":null,"instructions":"","max_output_tokens":null,"model":"gpt-4o-2024-08-06","output":[{`,
			`"status":"incomplete","error":null,"incomplete_details":null,"instructions":"","max_output_tokens":null,"model":"gpt-4o-2024-08-06","output":[{`,
			1, ReasonStreamFault, "status", true},
		{"Responses call renamed in the final response", "openai-responses_stream_function-call.sse",
			`"output":[{"type":"function_call","id":"fc_67e554a1de488191af0831d35cbe082e0794405d35281ae2","call_id":"call_kL0PCQV7M2WMoVX8V8OtYSAL","name":"get_capital"`,
			`"output":[{"type":"function_call","id":"fc_67e554a1de488191af0831d35cbe082e0794405d35281ae2","call_id":"call_kL0PCQV7M2WMoVX8V8OtYSAL","name":"send_money"`,
			1, ReasonStreamFault, "differs from the final", true},
		{"Responses refusal streamed, not in the final", "openai-responses_stream_function-call.sse",
			`data: {"type":"response.in_progress"`, "data: {\"type\":\"response.refusal.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"I can't\"}\n\ndata: {\"type\":\"response.in_progress\"", 1, ReasonStreamFault, "refusal was streamed", true},
		{"Anthropic stop reason refusal then tool_use", "anthropic_stream_tool-use.sse",
			`data: {"type":"message_delta"`, "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\"}}\n\ndata: {\"type\":\"message_delta\"", 1, ReasonStreamFault, "two different stop_reasons", true},
		{"Responses undocumented event", "openai-responses_stream_function-call.sse",
			`"type":"response.in_progress"`, `"type":"response.call_everything"`, 1, ReasonStreamFault, "not a documented stream event", true},
	}
	entries := map[string]traffic.Entry{}
	for _, e := range loadTraffic(t) {
		entries[e.File] = e
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, ok := entries[c.file]
			if !ok {
				t.Fatalf("%s is not in the corpus", c.file)
			}
			data, err := os.ReadFile(filepath.Join(traffic.DefaultDir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(c.from)) {
				t.Fatalf("%s does not contain %q: the mutation would test nothing", c.file, c.from)
			}
			mutated := strings.Replace(string(data), c.from, c.to, c.n)
			format, framing := trafficFormat(t, e)
			res, err := Read(format, framing, strings.NewReader(mutated), Options{Round: 1})
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if res.Incomplete != c.want || !strings.Contains(res.IncompleteDetail, c.detailHas) {
				t.Fatalf("incomplete %q (%s), want %q naming %q", res.Incomplete, res.IncompleteDetail, c.want, c.detailHas)
			}
			if c.wantAllCalls && len(res.Calls) == 0 && len(e.Expect.Calls) > 0 {
				t.Fatalf("the mutated message lost its calls: %+v", res)
			}
			for _, call := range res.Calls {
				if call.Candidate() {
					t.Errorf("call %d (%s) is a candidate of a refused message", call.Index, call.Name)
				}
			}
		})
	}
}

// TestProviderTrafficBrokenArguments: argument text that is not JSON is reported as
// invalid_json, saying what was wrong, wherever it arrives: a recorded Anthropic stream whose
// input_json_delta pieces no longer join into JSON (it was reported as arguments_not_object),
// a recorded Ollama body whose arguments became a string that is not JSON; a double-encoded
// object stays arguments_not_object (from public bug reports; issue 31).
func TestProviderTrafficBrokenArguments(t *testing.T) {
	cases := []struct {
		name, file, from, to string
		want                 Reason
		detailHas            string
	}{
		{"Anthropic partial_json that is not JSON", "anthropic_stream_tool-use.sse", `"partial_json":"}"`, `"partial_json":"}}"`, ReasonTrailingData, "streamed input"},
		{"Anthropic partial_json cut", "anthropic_stream_tool-use.sse", `"partial_json":"}"`, `"partial_json":""`, ReasonInvalidJSON, "streamed input"},
		{"Ollama arguments a string that is not JSON", "ollama-native_json_tool-call_thinking.json", "\"arguments\": {\n            \"query\": \"ollama bash lib\"\n          }", `"arguments": "query=ollama bash lib"`, ReasonInvalidJSON, "not JSON"},
		{"Ollama arguments double-encoded", "ollama-native_json_tool-call_thinking.json", "\"arguments\": {\n            \"query\": \"ollama bash lib\"\n          }", `"arguments": "{\"query\":\"ollama bash lib\"}"`, ReasonArgumentsNotObject, "not an object"},
	}
	entries := map[string]traffic.Entry{}
	for _, e := range loadTraffic(t) {
		entries[e.File] = e
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(traffic.DefaultDir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(c.from)) {
				t.Fatalf("%s does not contain %q: the mutation would test nothing", c.file, c.from)
			}
			format, framing := trafficFormat(t, entries[c.file])
			res, err := Read(format, framing, strings.NewReader(strings.Replace(string(data), c.from, c.to, 1)), Options{Round: 1})
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if res.Incomplete != "" || len(res.Calls) != 1 {
				t.Fatalf("want one call of a normally ended message: %+v", res)
			}
			if call := res.Calls[0]; call.Reason != c.want || !strings.Contains(call.Detail, c.detailHas) || call.Arguments != nil {
				t.Fatalf("call %+v, want %s naming %q", call, c.want, c.detailHas)
			}
		})
	}
}
