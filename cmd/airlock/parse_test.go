package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/traffic"
)

// corpusFile reads one file of the provider-traffic corpus (../shared/provider-traffic, read
// from there, never copied into the repository).
func corpusFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(traffic.DefaultDir, name))
	if err != nil {
		t.Fatalf("the provider-traffic corpus is required: %v", err)
	}
	return string(b)
}

// airlock parse --stream reads a captured stream as the provider sent it: the framing and the
// API are detected from the bytes, and the output is exactly the calls (ids, names,
// arguments), prose and finish reason the stream carried.
func TestParseCommandReadsRecordedStreams(t *testing.T) {
	cases := []struct {
		file string
		args []string
		want string
	}{
		{"openai-chat_stream_tool-call_content-null.sse", []string{"--stream"},
			`{"format":"openai","stream":"sse","candidates":[{"call_id":"call_ZR5UUuTt3pf61kjwAJIYdVMj","name":"get_capital","version":0,"arguments":{"country":"UK"}}],"failures":[],"text":"","finish_reason":"tool_calls"}`},
		{"openai-chat_stream_parallel-tool-calls.sse", []string{"--stream=sse", "--format", "openai"},
			`{"format":"openai","stream":"sse","candidates":[{"call_id":"call_JMW1whyEaYG438VE1OIflxA2","name":"GetWeatherArgs","version":0,"arguments":{"city":"Edinburgh","country":"GB","units":"c"}},{"call_id":"call_DNYTawLBoN8fj3KN6qU9N1Ou","name":"get_stock_price","version":0,"arguments":{"ticker":"AAPL","exchange":"NASDAQ"}}],"failures":[],"text":"","finish_reason":"tool_calls"}`},
		{"anthropic_stream_tool-use.sse", []string{"--stream"},
			`{"format":"anthropic","stream":"sse","candidates":[{"call_id":"toolu_01KFbKqPYSuAKujiL6mTfzYA","name":"json","version":0,"arguments":{"elements":[{"location":"San Francisco","temperature":58,"condition":"sunny"}]}}],"failures":[],"text":"","finish_reason":"tool_use"}`},
		{"ollama-native_stream_text_docs-example.ndjson", []string{"--stream"},
			`{"format":"openai","stream":"ndjson","candidates":[],"failures":[],"text":"The","finish_reason":""}`},
		{"ollama-native_stream_text_docs-example.ndjson", []string{"--stream=ndjson"},
			`{"format":"openai","stream":"ndjson","candidates":[],"failures":[],"text":"The","finish_reason":""}`},
		{"openai-responses_stream_function-call.sse", []string{"--stream"},
			`{"format":"openai-responses","stream":"sse","candidates":[{"call_id":"call_kL0PCQV7M2WMoVX8V8OtYSAL","name":"get_capital","version":0,"arguments":{"country":"France"}}],"failures":[],"text":"","finish_reason":""}`},
		{"openai-responses_stream_function-call.sse", []string{"--stream", "--format", "openai-responses"},
			`{"format":"openai-responses","stream":"sse","candidates":[{"call_id":"call_kL0PCQV7M2WMoVX8V8OtYSAL","name":"get_capital","version":0,"arguments":{"country":"France"}}],"failures":[],"text":"","finish_reason":""}`},
	}
	for _, c := range cases {
		t.Run(c.file+" "+strings.Join(c.args, " "), func(t *testing.T) {
			out, err := run(t, corpusFile(t, c.file), append([]string{"parse"}, c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out) != c.want {
				t.Fatalf("airlock parse %s < %s\n got: %s\nwant: %s", strings.Join(c.args, " "), c.file, out, c.want)
			}
		})
	}
}

// A refused stream is shown refused, with the reason and a detail naming what was refused.
func TestParseCommandShowsRefusedStreams(t *testing.T) {
	cases := []struct {
		file, incomplete, finish string
		detail                   []string
	}{
		{"openai-chat_stream_refusal.sse", "refusal", "stop",
			[]string{"choices[0].message.refusal", `I'm sorry, I can't assist with that request.`}},
		{"openai-responses_stream_error-event.sse", "provider_error", "",
			[]string{"insufficient_quota", `status "failed"`}},
		{"openai-chat_stream_n3-choices.sse", "unread_part", "stop", []string{"3 choices"}},
		{"openai-chat_stream_length.sse", "truncated", "length", nil},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			out, err := run(t, corpusFile(t, c.file), "parse", "--stream")
			if err != nil {
				t.Fatal(err)
			}
			var got parseOutput
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output is not the documented JSON: %v\n%s", err, out)
			}
			if got.Stream != "sse" || string(got.Incomplete) != c.incomplete || got.FinishReason != c.finish || len(got.Candidates) != 0 {
				t.Fatalf("output = %s", out)
			}
			for _, d := range c.detail {
				if !strings.Contains(got.IncompleteDetail, d) {
					t.Errorf("incomplete_detail %q does not name %q", got.IncompleteDetail, d)
				}
			}
		})
	}
}

// Every file of the corpus read through the command (streams with --stream, the format
// detected) is read exactly as its manifest says, or refused for a reason it accepts: what a
// user re-testing Airlock with `airlock parse` sees is what the worker reads.
func TestParseCommandReadsTheProviderTrafficCorpus(t *testing.T) {
	entries, err := traffic.Load(traffic.DefaultDir)
	if err != nil {
		t.Fatalf("the provider-traffic corpus is required: %v", err)
	}
	for _, e := range entries {
		t.Run(e.File, func(t *testing.T) {
			args := []string{"parse"}
			if e.Streamed {
				args = append(args, "--stream")
			}
			out, err := run(t, corpusFile(t, e.File), args...)
			r := traffic.Reading{Err: err}
			if err == nil {
				var got parseOutput
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("output is not the documented JSON: %v\n%s", err, out)
				}
				r = traffic.Reading{Text: got.Text, FinishReason: got.FinishReason, Refused: string(got.Incomplete), Detail: got.IncompleteDetail}
				for _, c := range got.Candidates {
					r.Calls = append(r.Calls, traffic.ReadCall{ID: c.CallID, Assigned: c.IDAssigned, Name: c.Name, Arguments: string(c.Arguments)})
				}
				for _, c := range got.Failures {
					r.Calls = append(r.Calls, traffic.ReadCall{ID: c.CallID, Assigned: c.IDAssigned, Name: c.Name, Reason: string(c.Reason)})
				}
			}
			if d := e.Check(r); d != nil {
				t.Errorf("airlock parse %s < %s (%s):\n  %s", strings.Join(args[1:], " "), e.File, e.Kind, strings.Join(d, "\n  "))
			}
		})
	}
}

// A body without --stream reads as before; with the format detected it names it, including a
// Responses API object and an error body alone.
func TestParseCommandDetectsBodyFormats(t *testing.T) {
	for file, want := range map[string]string{
		"anthropic_json_tool-use.json":                   "anthropic",
		"openai-chat_json_parallel-tool-calls.json":      "openai",
		"ollama-native_json_tool-call_thinking.json":     "openai",
		"openai-chat_error_400_unsupported-value.json":   "openai",
		"ollama-native_error_502_upstream.json":          "openai",
		"gemini-openai-compat_json_tool-call_no-id.json": "openai",
	} {
		out, err := run(t, corpusFile(t, file), "parse")
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var got parseOutput
		if err := json.Unmarshal([]byte(out), &got); err != nil || string(got.Format) != want || got.Stream != "" {
			t.Errorf("%s: format %q stream %q, want %q (%v)", file, got.Format, got.Stream, want, err)
		}
	}
	resp := `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_capital","arguments":"{\"country\":\"France\"}","status":"completed"}]}`
	for _, args := range [][]string{{"parse"}, {"parse", "--format", "openai-responses"}} {
		out, err := run(t, resp, args...)
		want := `{"format":"openai-responses","candidates":[{"call_id":"call_1","name":"get_capital","version":0,"arguments":{"country":"France"}}],"failures":[],"text":"","finish_reason":""}`
		if err != nil || strings.TrimSpace(out) != want {
			t.Errorf("%v: %s %v\nwant %s", args, out, err, want)
		}
	}
	out, err := run(t, corpusFile(t, "gemini-openai-compat_json_tool-call_no-id.json"), "parse")
	if err != nil || !strings.Contains(out, `"call_id":"airlock-r0-c0","id_assigned":true,"name":"get_current_time"`) {
		t.Errorf("an id Airlock assigned is not shown as assigned: %s %v", out, err)
	}
}

// What `airlock parse` cannot read is an error saying what was wrong, never a silent skip or
// an empty answer.
func TestParseCommandExplainsWhatItCannotRead(t *testing.T) {
	sse := corpusFile(t, "openai-chat_stream_tool-call_content-null.sse")
	ndjson := corpusFile(t, "ollama-native_stream_text_docs-example.ndjson")
	body := corpusFile(t, "openai-chat_json_text.json")
	pretty := "{\n  \"object\": \"chat.completion\",\n  \"choices\": []\n}\n"
	errorOnly := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	cases := []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"a stream without --stream", sse, nil, "not one JSON body but server-sent events"},
		{"NDJSON without --stream", ndjson, nil, "not one JSON body but NDJSON"},
		{"a body with --stream", body, []string{"--stream"}, "one JSON body, not a stream: read it without --stream"},
		{"a pretty-printed body with --stream", pretty, []string{"--stream"}, "one JSON body, not a stream"},
		{"a body with --stream=ndjson", body, []string{"--stream=ndjson"}, "one JSON body, not a stream"},
		{"NDJSON as --stream=sse", ndjson, []string{"--stream=sse"}, `no "data:" line`},
		{"SSE as --stream=ndjson", sse, []string{"--stream=ndjson"}, "read it with --stream=sse"},
		{"neither framing", "hello\n", []string{"--stream"}, "cannot tell the stream's framing"},
		{"an error-only stream of no known API", errorOnly, []string{"--stream"}, "pass --format openai, anthropic or openai-responses"},
		{"a framing with a space", sse, []string{"--stream", "sse"}, "--stream=sse"},
		{"an unknown framing", sse, []string{"--stream=jsonl"}, `not "jsonl"`},
		{"an unknown format", body, []string{"--format", "gemini"}, "--format must be auto, openai, anthropic or openai-responses"},
		{"empty stdin", " \n", nil, "stdin is empty"},
		{"an NDJSON stream read as anthropic", ndjson, []string{"--stream", "--format", "anthropic"}, "NDJSON stream is Ollama's"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, c.stdin, append([]string{"parse"}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v (output %q), want it to say %q", err, out, c.want)
			}
		})
	}
	// Named, the error-only stream is read: the provider's error, never an empty answer.
	out, err := run(t, errorOnly, "parse", "--stream", "--format", "anthropic")
	if err != nil || !strings.Contains(out, `"incomplete":"provider_error"`) || !strings.Contains(out, "overloaded_error") {
		t.Fatalf("%s %v", out, err)
	}
}

// The help explains streams with an example for each provider API.
func TestParseCommandHelpShowsEachProvider(t *testing.T) {
	out, err := run(t, "", "parse", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"--stream=ndjson", "--format anthropic", "--format openai-responses", "/v1/chat/completions", "Ollama", "Azure", "docs/providers.md"} {
		if !strings.Contains(out, s) {
			t.Errorf("airlock parse --help does not mention %q", s)
		}
	}
}
