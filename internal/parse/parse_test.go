package parse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

const (
	providerCases = "../../../shared/cases/provider-responses.jsonl"
	finishCases   = "../../../shared/cases/finish-reasons.jsonl"
	approvalCases = "../../../shared/cases/approval-durability.jsonl"
)

// caseLine is one line of provider-responses.jsonl; input stays raw bytes.
type caseLine struct {
	ID     string          `json:"id"`
	Input  json.RawMessage `json:"input"`
	Expect struct {
		Outcome    string `json:"outcome"`
		Reason     Reason `json:"reason"`
		Candidates []struct {
			Name         string `json:"name"`
			ArgumentsRaw string `json:"arguments_raw"`
		} `json:"candidates"`
	} `json:"expect"`
}

// readLines returns the non-empty lines of a JSONL file, failing the test when it is missing.
func readLines(tb testing.TB, path string) [][]byte {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("case file is required: %v", err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			lines = append(lines, append([]byte(nil), l...))
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return lines
}

func readProviderCases(tb testing.TB) []caseLine { return readCases(tb, providerCases) }

// readCases reads a case file in the provider-responses.jsonl format, failing the test when it
// is missing or empty.
func readCases(tb testing.TB, path string) []caseLine {
	tb.Helper()
	var cases []caseLine
	for i, l := range readLines(tb, path) {
		var c caseLine
		if err := json.Unmarshal(l, &c); err != nil {
			tb.Fatalf("%s line %d: %v", path, i+1, err)
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		tb.Fatal("no cases in " + path)
	}
	return cases
}

func TestProviderResponseCases(t *testing.T) {
	for _, c := range readProviderCases(t) {
		t.Run(c.ID, func(t *testing.T) { checkCase(t, c) })
	}
}

// TestFinishReasonCases runs every line of finish-reasons.jsonl (case B37 and the rest).
func TestFinishReasonCases(t *testing.T) {
	for _, c := range readCases(t, finishCases) {
		t.Run(c.ID, func(t *testing.T) { checkCase(t, c) })
	}
}

// checkCase asserts one case line: the detected format, then for each of FormatAuto and that
// format, every call failing with expect.reason or the expected candidates byte for byte.
func checkCase(t *testing.T, c caseLine) {
	t.Helper()
	wantFormat := FormatOpenAI
	if bytes.Contains(c.Input, []byte(`"tool_use"`)) {
		wantFormat = FormatAnthropic
	}
	if got := DetectFormat(c.Input); got != wantFormat {
		t.Fatalf("DetectFormat = %q, want %q", got, wantFormat)
	}
	for _, f := range []Format{FormatAuto, wantFormat} {
		res, err := Parse(f, c.Input, Options{})
		if err != nil {
			t.Fatalf("Parse(%s): %v", f, err)
		}
		switch c.Expect.Outcome {
		case "parse_failed":
			if c.Expect.Reason == "" {
				t.Fatal("case has no expect.reason")
			}
			if len(res.Calls) == 0 {
				t.Fatalf("no calls, want failures %s", c.Expect.Reason)
			}
			for _, call := range res.Calls {
				if call.Reason != c.Expect.Reason {
					t.Errorf("call %d (%q): reason %q (%s), want %q", call.Index, call.Name, call.Reason, call.Detail, c.Expect.Reason)
				}
				if call.Arguments != nil {
					t.Errorf("failed call %d carries Arguments", call.Index)
				}
			}
		case "candidates":
			if len(res.Calls) != len(c.Expect.Candidates) {
				t.Fatalf("got %d calls %+v, want %d candidates", len(res.Calls), res.Calls, len(c.Expect.Candidates))
			}
			for i, want := range c.Expect.Candidates {
				got := res.Calls[i]
				if !got.Candidate() {
					t.Fatalf("call %d failed: %s (%s)", i, got.Reason, got.Detail)
				}
				if got.Name != want.Name {
					t.Errorf("call %d name %q, want %q", i, got.Name, want.Name)
				}
				if string(got.Arguments) != want.ArgumentsRaw {
					t.Errorf("call %d arguments\n got %s\nwant %s", i, got.Arguments, want.ArgumentsRaw)
				}
				if got.Raw != want.ArgumentsRaw {
					t.Errorf("call %d raw %q, want %q", i, got.Raw, want.ArgumentsRaw)
				}
			}
		default:
			t.Fatalf("unknown outcome %q", c.Expect.Outcome)
		}
	}
}

func TestApprovalB27DuplicateIDs(t *testing.T) {
	var found bool
	for _, l := range readLines(t, approvalCases) {
		var c struct {
			ID    string `json:"id"`
			Input struct {
				ModelResponse json.RawMessage `json:"model_response"`
			} `json:"input"`
		}
		if err := json.Unmarshal(l, &c); err != nil {
			t.Fatal(err)
		}
		if c.ID != "B27" {
			continue
		}
		found = true
		res, err := Parse(FormatOpenAI, c.Input.ModelResponse, Options{Versions: map[string]int{"archive_record": 1, "delete_record": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Calls) != 2 {
			t.Fatalf("got %d calls, want 2", len(res.Calls))
		}
		for _, call := range res.Calls {
			if call.Reason != ReasonDuplicateCallID || call.Candidate() || call.Arguments != nil {
				t.Errorf("call %d %q: reason %q, want duplicate_call_id and no arguments", call.Index, call.Name, call.Reason)
			}
		}
	}
	if !found {
		t.Fatal("case B27 not found in " + approvalCases)
	}
}

// openAI builds a chat.completion body from tool_calls JSON, content JSON and finish reason.
func openAI(content, toolCalls, finish string) []byte {
	msg := `{"role":"assistant","content":` + content
	if toolCalls != "" {
		msg += `,"tool_calls":` + toolCalls
	}
	msg += `}`
	return []byte(`{"id":"chatcmpl-x","object":"chat.completion","choices":[{"index":0,"message":` + msg + `,"finish_reason":"` + finish + `"}]}`)
}

// oneCall builds a one-call OpenAI body whose function.arguments is the JSON value argsJSON
// (usually a JSON string literal).
func oneCall(name, argsJSON string) []byte {
	return openAI("null", `[{"id":"call_1","type":"function","function":{"name":`+quote(name)+`,"arguments":`+argsJSON+`}}]`, "tool_calls")
}

// withArgs is oneCall with the argument text args, encoded as a JSON string.
func withArgs(args string) []byte { return oneCall("do_it", quote(args)) }

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// openai renders an OpenAI chat.completion body with the given tool_calls array and finish reason.
func openai(toolCalls, finish string) []byte {
	return []byte(`{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":` +
		toolCalls + `},"finish_reason":"` + finish + `"}]}`)
}

func anthropic(blocks, stop string) []byte {
	return []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":` + blocks + `,"stop_reason":"` + stop + `","stop_sequence":null}`)
}

// want is one expected call: a candidate (reason "") with name and exact args, or a failure.
type want struct {
	reason Reason
	name   string
	args   string
	id     string
}

func TestParseTable(t *testing.T) {
	big := `{"n": 12345678901234567890123, "f": 1.000000000000000000001e400, "s": "x"}`
	tests := []struct {
		name   string
		format Format
		body   []byte
		text   string
		want   []want
	}{
		// Happy paths and byte-exactness.
		{"openai happy", FormatOpenAI, withArgs(`{"path": "a.txt"}`), "", []want{{name: "do_it", args: `{"path": "a.txt"}`, id: "call_1"}}},
		{"big integer kept byte-exact", FormatOpenAI, withArgs(big), "", []want{{name: "do_it", args: big}}},
		{"whitespace and escapes kept", FormatOpenAI, withArgs(" {\n\t\"a\" : \"\\u00e9\\n\" }\n"), "", []want{{name: "do_it", args: " {\n\t\"a\" : \"\\u00e9\\n\" }\n"}}},
		{"surrogate pair ok", FormatOpenAI, withArgs(`{"e": "\ud83d\ude00"}`), "", []want{{name: "do_it", args: `{"e": "\ud83d\ude00"}`}}},
		{"empty object ok", FormatOpenAI, withArgs(`{}`), "", []want{{name: "do_it", args: `{}`}}},
		{"dotted name is a candidate", FormatOpenAI, oneCall("functions.read_file", quote(`{}`)), "", []want{{name: "functions.read_file", args: `{}`}}},
		{"64-char name", FormatOpenAI, oneCall(strings.Repeat("a", 64), quote(`{}`)), "", []want{{name: strings.Repeat("a", 64), args: `{}`}}},
		{"content parts text", FormatOpenAI, openAI(`[{"type":"text","text":"Hello, "},{"type":"image_url","image_url":{}},{"type":"text","text":"world"}]`, "", "stop"), "Hello, world", nil},
		{"plain prose is a final answer", FormatOpenAI, openAI(`"The answer is {\"name\": 1}."`, "", "stop"), `The answer is {"name": 1}.`, nil},
		{"empty tool_calls array", FormatOpenAI, openAI(`"done"`, `[]`, "stop"), "done", nil},

		// arguments_missing / arguments_empty.
		{"arguments missing", FormatOpenAI, openAI("null", `[{"id":"c","type":"function","function":{"name":"f"}}]`, "tool_calls"), "", []want{{reason: ReasonArgumentsMissing}}},
		{"arguments null", FormatOpenAI, oneCall("f", `null`), "", []want{{reason: ReasonArgumentsMissing}}},
		{"Arguments key case differs", FormatOpenAI, openAI("null", `[{"id":"c","type":"function","function":{"name":"f","Arguments":"{}"}}]`, "tool_calls"), "", []want{{reason: ReasonUnreadPart}}},
		{"arguments empty", FormatOpenAI, withArgs(""), "", []want{{reason: ReasonArgumentsEmpty}}},
		{"arguments whitespace", FormatOpenAI, withArgs(" \n\t "), "", []want{{reason: ReasonArgumentsEmpty}}},

		// invalid_json.
		{"NaN", FormatOpenAI, withArgs(`{"x": NaN}`), "", []want{{reason: ReasonInvalidJSON}}},
		{"Infinity", FormatOpenAI, withArgs(`{"x": Infinity}`), "", []want{{reason: ReasonInvalidJSON}}},
		{"-Infinity", FormatOpenAI, withArgs(`{"x": -Infinity}`), "", []want{{reason: ReasonInvalidJSON}}},
		{"invalid escape", FormatOpenAI, withArgs(`{"x": "\q"}`), "", []want{{reason: ReasonInvalidJSON}}},
		{"unterminated string", FormatOpenAI, withArgs(`{"x": "abc`), "", []want{{reason: ReasonInvalidJSON}}},
		{"single quotes", FormatOpenAI, withArgs(`{'x': 1}`), "", []want{{reason: ReasonInvalidJSON}}},
		{"trailing comma", FormatOpenAI, withArgs(`{"x": 1,}`), "", []want{{reason: ReasonInvalidJSON}}},
		{"leading zero", FormatOpenAI, withArgs(`{"x": 01}`), "", []want{{reason: ReasonInvalidJSON}}},
		{"duplicate key", FormatOpenAI, withArgs(`{"path": "a", "path": "b"}`), "", []want{{reason: ReasonInvalidJSON}}},
		{"duplicate key via escape, nested", FormatOpenAI, withArgs(`{"o": [{"a": 1, "\u0061": 2}]}`), "", []want{{reason: ReasonInvalidJSON}}},
		{"call entry not an object", FormatOpenAI, openAI("null", `[42]`, "tool_calls"), "", []want{{reason: ReasonInvalidJSON}}},

		// trailing_data.
		{"two objects", FormatOpenAI, withArgs(`{"a":1}{"b":2}`), "", []want{{reason: ReasonTrailingData}}},
		{"extra brace", FormatOpenAI, withArgs(`{"a":1}}`), "", []want{{reason: ReasonTrailingData}}},
		{"text after object", FormatOpenAI, withArgs(`{"a":1} done`), "", []want{{reason: ReasonTrailingData}}},

		// arguments_not_object.
		{"double-encoded object", FormatOpenAI, withArgs(quote(`{"a": 1}`)), "", []want{{reason: ReasonArgumentsNotObject}}},
		{"array", FormatOpenAI, withArgs(`[{"a": 1}]`), "", []want{{reason: ReasonArgumentsNotObject}}},
		{"number", FormatOpenAI, withArgs(`42`), "", []want{{reason: ReasonArgumentsNotObject}}},
		{"null text", FormatOpenAI, withArgs(`null`), "", []want{{reason: ReasonArgumentsNotObject}}},
		{"openai object arguments", FormatOpenAI, oneCall("f", `{"a": 1}`), "", []want{{reason: ReasonArgumentsNotObject}}},

		// invalid_unicode.
		{"lone high surrogate", FormatOpenAI, withArgs(`{"x": "\ud800"}`), "", []want{{reason: ReasonInvalidUnicode}}},
		{"high surrogate then non-low", FormatOpenAI, withArgs(`{"x": "\ud800\u0041"}`), "", []want{{reason: ReasonInvalidUnicode}}},
		{"lone low surrogate", FormatOpenAI, withArgs(`{"x": "\udc00"}`), "", []want{{reason: ReasonInvalidUnicode}}},
		{"lone surrogate in key", FormatOpenAI, withArgs(`{"\ud800": 1}`), "", []want{{reason: ReasonInvalidUnicode}}},
		{"lone surrogate in outer string", FormatOpenAI, oneCall("f", `"{\"x\": \"\ud800\"}"`), "", []want{{reason: ReasonInvalidUnicode}}},
		{"invalid UTF-8 bytes", FormatOpenAI, oneCall("f", "\"{\\\"x\\\": \\\"\xff\\\"}\""), "", []want{{reason: ReasonInvalidUnicode}}},

		// invalid_name.
		{"harmony tokens in name", FormatOpenAI, oneCall("list_files<|channel|>commentary", quote(`{}`)), "", []want{{reason: ReasonInvalidName}}},
		{"name with space", FormatOpenAI, oneCall(" read_file", quote(`{}`)), "", []want{{reason: ReasonInvalidName}}},
		{"name with trailing newline", FormatOpenAI, oneCall("read_file\n", quote(`{}`)), "", []want{{reason: ReasonInvalidName}}},
		{"empty name", FormatOpenAI, oneCall("", quote(`{}`)), "", []want{{reason: ReasonInvalidName}}},
		{"65-char name", FormatOpenAI, oneCall(strings.Repeat("a", 65), quote(`{}`)), "", []want{{reason: ReasonInvalidName}}},
		{"non-ASCII name", FormatOpenAI, oneCall("réad", quote(`{}`)), "", []want{{reason: ReasonInvalidName}}},
		{"colon name", FormatOpenAI, oneCall("server:tool", quote(`{}`)), "", []want{{reason: ReasonInvalidName}}},
		{"name missing", FormatOpenAI, openAI("null", `[{"id":"c","function":{"arguments":"{}"}}]`, "tool_calls"), "", []want{{reason: ReasonInvalidName}}},

		// missing_call_id / duplicate_call_id.
		{"id missing", FormatOpenAI, openAI("null", `[{"type":"function","function":{"name":"f","arguments":"{}"}}]`, "tool_calls"), "", []want{{name: "f", args: "{}", id: "airlock-r0-c0"}}},
		{"id empty", FormatOpenAI, openAI("null", `[{"id":"","type":"function","function":{"name":"f","arguments":"{}"}}]`, "tool_calls"), "", []want{{name: "f", args: "{}", id: "airlock-r0-c0"}}},
		{"id number", FormatOpenAI, openAI("null", `[{"id":7,"type":"function","function":{"name":"f","arguments":"{}"}}]`, "tool_calls"), "", []want{{reason: ReasonMissingCallID}}},
		{"legacy function_call", FormatOpenAI, []byte(`{"choices":[{"message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},"finish_reason":"function_call"}]}`), "", []want{{reason: ReasonMissingCallID}}},
		{"duplicate ids among three", FormatOpenAI, openAI("null", `[
			{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},
			{"id":"b","type":"function","function":{"name":"g","arguments":"{}"}},
			{"id":"a","type":"function","function":{"name":"h","arguments":"nope"}}]`, "tool_calls"), "",
			[]want{{reason: ReasonDuplicateCallID}, {reason: ReasonDuplicateCallID, id: "b"}, {reason: ReasonDuplicateCallID}}},
		{"mixed: one good, one bad", FormatOpenAI, openAI(`"Reading both."`, `[
			{"id":"a","type":"function","function":{"name":"f","arguments":"{\"k\":1}"}},
			{"id":"b","type":"function","function":{"name":"g","arguments":""}}]`, "tool_calls"), "Reading both.",
			[]want{{name: "f", args: `{"k":1}`, id: "a"}, {reason: ReasonArgumentsEmpty}}},

		// truncated.
		{"length truncates valid calls", FormatOpenAI, openAI("null", `[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{\"x\""}}]`, "length"), "",
			[]want{{reason: ReasonTruncated}, {reason: ReasonTruncated}}},

		// Anthropic.
		{"anthropic happy", FormatAnthropic, anthropic(`[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a.txt","n":12345678901234567890123}}]`, "tool_use"),
			"Let me look.", []want{{name: "read_file", args: `{"path":"a.txt","n":12345678901234567890123}`, id: "toolu_1"}}},
		{"anthropic input kept verbatim", FormatAnthropic, anthropic(`[{"type":"tool_use","id":"toolu_1","name":"f","input": { "a" : [1, 2.50] } }]`, "tool_use"),
			"", []want{{name: "f", args: `{ "a" : [1, 2.50] }`}}},
		{"anthropic thinking ignored", FormatAnthropic, anthropic(`[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Hi"}]`, "end_turn"), "Hi", nil},
		{"anthropic max_tokens", FormatAnthropic, anthropic(`[{"type":"tool_use","id":"toolu_1","name":"f","input":{}},{"type":"tool_use","id":"toolu_2","name":"g","input":{"a":1}}]`, "max_tokens"),
			"", []want{{reason: ReasonTruncated}, {reason: ReasonTruncated}}},
		{"anthropic string input", FormatAnthropic, anthropic(`[{"type":"tool_use","id":"toolu_1","name":"f","input":"{\"a\":1}"}]`, "tool_use"), "", []want{{reason: ReasonArgumentsNotObject}}},
		{"anthropic array input", FormatAnthropic, anthropic(`[{"type":"tool_use","id":"toolu_1","name":"f","input":[]}]`, "tool_use"), "", []want{{reason: ReasonArgumentsNotObject}}},
		{"anthropic input missing", FormatAnthropic, anthropic(`[{"type":"tool_use","id":"toolu_1","name":"f"}]`, "tool_use"), "", []want{{reason: ReasonArgumentsMissing}}},
		{"anthropic input duplicate key", FormatAnthropic, anthropic(`[{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1,"a":2}}]`, "tool_use"), "", []want{{reason: ReasonInvalidJSON}}},
		{"anthropic input lone surrogate", FormatAnthropic, anthropic(`[{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":"\udfff"}}]`, "tool_use"), "", []want{{reason: ReasonInvalidUnicode}}},
		{"anthropic id missing", FormatAnthropic, anthropic(`[{"type":"tool_use","name":"f","input":{}}]`, "tool_use"), "", []want{{name: "f", args: "{}", id: "airlock-r0-c0"}}},
		{"anthropic duplicate ids", FormatAnthropic, anthropic(`[{"type":"tool_use","id":"t","name":"f","input":{}},{"type":"tool_use","id":"t","name":"g","input":{}}]`, "tool_use"),
			"", []want{{reason: ReasonDuplicateCallID}, {reason: ReasonDuplicateCallID}}},
		{"anthropic embedded text", FormatAnthropic, anthropic(`[{"type":"text","text":"<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"}]`, "end_turn"),
			"<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", []want{{reason: ReasonEmbeddedToolCallText, name: "f"}}},

		// Ollama.
		{"ollama object args", FormatOpenAI, []byte(`{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris","n":12345678901234567890123}}},{"function":{"name":"get_time","arguments":{}}}]},"done_reason":"stop","done":true}`),
			"", []want{{name: "get_weather", args: `{"city":"Paris","n":12345678901234567890123}`, id: "call_0"}, {name: "get_time", args: `{}`, id: "call_1"}}},
		{"ollama string args", FormatOpenAI, []byte(`{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},"done_reason":"stop"}`), "", []want{{reason: ReasonArgumentsNotObject}}},
		{"ollama length", FormatOpenAI, []byte(`{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{}}}]},"done_reason":"length"}`), "", []want{{reason: ReasonTruncated}}},
		// A synthetic id never collides with one the server sent: it is made unique.
		{"ollama synthetic id collides", FormatOpenAI, []byte(`{"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_1","function":{"name":"f","arguments":{}}},{"function":{"name":"g","arguments":{}}}]},"done_reason":"stop"}`),
			"", []want{{name: "f", args: `{}`, id: "call_1"}, {name: "g", args: `{}`, id: "call_1-1"}}},

		// Embedded tool-call text.
		{"llama function tag", FormatOpenAI, openAI(quote(`<function=search_emails>{"query": "invoices"}</function>`), "", "stop"), `<function=search_emails>{"query": "invoices"}</function>`, []want{{reason: ReasonEmbeddedToolCallText, name: "search_emails"}}},
		{"llama function tag missing >", FormatOpenAI, openAI(quote(`<function=search_emails {"query": "invoices"}</function>`), "", "stop"), `<function=search_emails {"query": "invoices"}</function>`, []want{{reason: ReasonEmbeddedToolCallText, name: "search_emails"}}},
		{"python_tag", FormatOpenAI, openAI(quote(`<|python_tag|>brave_search.call(query="weather")`), "", "stop"), `<|python_tag|>brave_search.call(query="weather")`, []want{{reason: ReasonEmbeddedToolCallText, name: "brave_search"}}},
		{"mistral TOOL_CALLS", FormatOpenAI, openAI(quote(`[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]`), "", "stop"), `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]`, []want{{reason: ReasonEmbeddedToolCallText, name: "get_weather"}}},
		{"fenced JSON call", FormatOpenAI, openAI(quote("```json\n{\"name\": \"f\", \"parameters\": {}}\n```"), "", "stop"), "```json\n{\"name\": \"f\", \"parameters\": {}}\n```", []want{{reason: ReasonEmbeddedToolCallText, name: "f"}}},
		{"array of calls", FormatOpenAI, openAI(quote(`[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]`), "", "stop"), `[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]`, []want{{reason: ReasonEmbeddedToolCallText, name: "f"}}},
		{"function wrapper object", FormatOpenAI, openAI(quote(`{"type": "function", "function": {"name": "f", "arguments": "{}"}}`), "", "stop"), `{"type": "function", "function": {"name": "f", "arguments": "{}"}}`, []want{{reason: ReasonEmbeddedToolCallText, name: "f"}}},
		{"prose with JSON object is not a call", FormatOpenAI, openAI(quote(`{"name": "Ada", "age": 36}`), "", "stop"), `{"name": "Ada", "age": 36}`, nil},
		{"prose mentioning <function= is not a call", FormatOpenAI, openAI(quote(`Use the <function=NAME> syntax.`), "", "stop"), `Use the <function=NAME> syntax.`, nil},
		{"structured call ignores embedded text", FormatOpenAI, openAI(quote(`[TOOL_CALLS] <function=x>{}</function>`), `[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]`, "tool_calls"),
			`[TOOL_CALLS] <function=x>{}</function>`, []want{{name: "f", args: `{}`, id: "a"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			versions := map[string]int{"do_it": 3, "read_file": 1}
			res, err := Parse(tc.format, tc.body, Options{Versions: versions})
			if err != nil {
				t.Fatalf("Parse: %v\nbody: %s", err, tc.body)
			}
			if res.Text != tc.text {
				t.Errorf("Text = %q, want %q", res.Text, tc.text)
			}
			if len(res.Calls) != len(tc.want) {
				t.Fatalf("got %d calls %+v, want %d", len(res.Calls), res.Calls, len(tc.want))
			}
			for i, w := range tc.want {
				got := res.Calls[i]
				if got.Index != i {
					t.Errorf("call %d: Index %d", i, got.Index)
				}
				if got.Reason != w.reason {
					t.Fatalf("call %d: reason %q (%s), want %q", i, got.Reason, got.Detail, w.reason)
				}
				if w.name != "" && got.Name != w.name {
					t.Errorf("call %d: name %q, want %q", i, got.Name, w.name)
				}
				if w.id != "" && got.CallID != w.id {
					t.Errorf("call %d: id %q, want %q", i, got.CallID, w.id)
				}
				if got.Version != versions[got.Name] {
					t.Errorf("call %d: version %d, want %d", i, got.Version, versions[got.Name])
				}
				if w.reason != "" {
					if got.Arguments != nil || got.Detail == "" {
						t.Errorf("call %d: failure with Arguments %q / empty Detail", i, got.Arguments)
					}
					continue
				}
				if string(got.Arguments) != w.args || got.Raw != w.args {
					t.Errorf("call %d: arguments %q raw %q, want %q", i, got.Arguments, got.Raw, w.args)
				}
			}
		})
	}
}

func TestEmbeddedFailureShape(t *testing.T) {
	content := `{"name": "search_documents", "arguments": {"term": "x"}}`
	res, err := Parse(FormatOpenAI, []byte(`{"message":{"role":"assistant","content":`+quote(content)+`},"done_reason":"stop","done":true}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := Call{Index: 0, CallID: "", Name: "search_documents", Raw: content, Reason: ReasonEmbeddedToolCallText}
	got := res.Calls[0]
	got.Detail = ""
	if len(res.Calls) != 1 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %+v, want %+v", res.Calls, want)
	}
	if res.FinishReason != "stop" || res.Text != content {
		t.Errorf("FinishReason %q Text %q", res.FinishReason, res.Text)
	}
}

func TestUnrecognized(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		body   string
	}{
		{"not JSON", FormatAuto, `<html>502</html>`},
		{"empty", FormatAuto, ``},
		{"trailing garbage", FormatOpenAI, `{"choices":[]} x`},
		{"array", FormatAuto, `[]`},
		{"openai error", FormatAuto, `{"error":{"message":"overloaded"}}`},
		{"no choices", FormatOpenAI, `{"choices":[]}`},
		{"no message", FormatOpenAI, `{"choices":[{"finish_reason":"stop"}]}`},
		{"tool_calls not array", FormatOpenAI, `{"choices":[{"message":{"content":null,"tool_calls":{}},"finish_reason":"stop"}]}`},
		{"content object", FormatOpenAI, `{"choices":[{"message":{"content":{}},"finish_reason":"stop"}]}`},
		{"duplicate top-level key", FormatOpenAI, `{"choices":[{"message":{"content":"a"}}],"choices":[]}`},
		{"anthropic body as openai", FormatOpenAI, string(anthropic(`[]`, "end_turn"))},
		{"openai body as anthropic", FormatAnthropic, string(withArgs(`{}`))},
		{"unknown format", Format("gemini"), string(withArgs(`{}`))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.format, []byte(tc.body), Options{})
			if !errors.Is(err, ErrUnrecognized) {
				t.Fatalf("err = %v, want ErrUnrecognized", err)
			}
			if err.Error() == ErrUnrecognized.Error() {
				t.Errorf("error carries no detail")
			}
		})
	}
}

func TestDetectFormat(t *testing.T) {
	tests := map[string]Format{
		string(withArgs(`{}`)):                    FormatOpenAI,
		`{"message":{"role":"assistant"}}`:        FormatOpenAI,
		string(anthropic(`[]`, "end_turn")):       FormatAnthropic,
		`{"content":[],"stop_reason":"end_turn"}`: FormatAnthropic,
		`{"error":{}}`:                            "",
		`not json`:                                "",
	}
	for body, want := range tests {
		if got := DetectFormat([]byte(body)); got != want {
			t.Errorf("DetectFormat(%s) = %q, want %q", body, got, want)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"a", "read_file", "web.fetch", "multi_tool_use.parallel", "A-b_9", strings.Repeat("z", 64)} {
		if !ValidName(ok) {
			t.Errorf("ValidName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", " a", "a ", "a\n", "a/b", "a:b", "list_files<|channel|>commentary", "é", strings.Repeat("z", 65), "a\x00"} {
		if ValidName(bad) {
			t.Errorf("ValidName(%q) = true", bad)
		}
	}
}

// TestResultJSONRoundTrip checks that Raw keeps the exact argument bytes through the JSON
// encoding a Temporal payload uses, even where Arguments is re-compacted.
func TestResultJSONRoundTrip(t *testing.T) {
	args := `{ "q": "<b>", "n": 12345678901234567890123 }`
	res, err := Parse(FormatOpenAI, withArgs(args), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Calls[0].Raw != args {
		t.Errorf("Raw after round trip %q, want %q", back.Calls[0].Raw, args)
	}
	if !bytes.Contains(back.Calls[0].Arguments, []byte("12345678901234567890123")) {
		t.Errorf("Arguments lost digits: %s", back.Calls[0].Arguments)
	}
}

func FuzzParse(f *testing.F) {
	for _, c := range append(readProviderCases(f), readCases(f, finishCases)...) {
		f.Add(string(FormatAuto), []byte(c.Input))
	}
	f.Add(string(FormatAnthropic), anthropic(`[{"type":"tool_use","id":"t","name":"f","input":{}},{"type":"tool_use","id":"u","name":"f","input":{}}]`, "pause_turn"))
	f.Add(string(FormatOpenAI), withArgs(`{"a":1}{"b":2}`))
	f.Add(string(FormatOpenAI), withArgs(`{"x": "\ud800"}`))
	f.Add(string(FormatOpenAI), withArgs(quote(`{"a": 1}`)))
	f.Add(string(FormatOpenAI), withArgs(`{"n": 12345678901234567890123}`))
	f.Add(string(FormatAnthropic), anthropic(`[{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]`, "tool_use"))
	f.Add(string(FormatOpenAI), []byte(`{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},"done_reason":"stop"}`))
	f.Add(string(FormatOpenAI), openAI(quote(`<function=f {"a": 1}</function>`), "", "stop"))
	f.Fuzz(func(t *testing.T, format string, raw []byte) {
		res, err := Parse(Format(format), raw, Options{})
		if err != nil {
			if !errors.Is(err, ErrUnrecognized) {
				t.Fatalf("error does not wrap ErrUnrecognized: %v", err)
			}
			return
		}
		again, err := Parse(Format(format), raw, Options{})
		if err != nil || fmt.Sprintf("%+v", again) != fmt.Sprintf("%+v", res) {
			t.Fatalf("Parse is not deterministic")
		}
		ids := map[string]bool{}
		dup := false
		for _, c := range res.Calls {
			dup = dup || c.Reason == ReasonDuplicateCallID
		}
		for i, c := range res.Calls {
			if c.Index != i {
				t.Fatalf("call %d has Index %d", i, c.Index)
			}
			if dup && c.Reason != ReasonDuplicateCallID {
				t.Fatalf("call %d is %q in a message with a shared id", i, c.Reason)
			}
			if c.Candidate() && !normalFinish[wireOpenAI][res.FinishReason] && !normalFinish[wireAnthropic][res.FinishReason] {
				t.Fatalf("candidate in a message that ended with %q", res.FinishReason)
			}
			if !c.Candidate() {
				if c.Arguments != nil {
					t.Fatalf("failure %s carries Arguments", c.Reason)
				}
				continue
			}
			if !ValidName(c.Name) {
				t.Fatalf("candidate name %q outside the grammar", c.Name)
			}
			if c.CallID == "" || ids[c.CallID] {
				t.Fatalf("candidate id %q empty or duplicated", c.CallID)
			}
			ids[c.CallID] = true
			if !json.Valid(c.Arguments) || kindOf(c.Arguments) != '{' {
				t.Fatalf("candidate arguments are not a JSON object: %q", c.Arguments)
			}
			if string(c.Arguments) != c.Raw {
				t.Fatalf("Arguments %q differ from Raw %q", c.Arguments, c.Raw)
			}
		}
	})
}

func ExampleParse() {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,
		"message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"web.fetch","arguments":"{\"url\": \"https://example.com\", \"n\": 12345678901234567890123}"}},
			{"id":"call_2","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"a.txt\"}{\"path\": \"b.txt\"}"}}]},
		"finish_reason":"tool_calls"}]}`)
	res, err := Parse(FormatAuto, body, Options{Versions: map[string]int{"web.fetch": 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range res.Calls {
		if c.Candidate() {
			fmt.Printf("candidate %s %s@%d %s\n", c.CallID, c.Name, c.Version, c.Arguments)
		} else {
			fmt.Printf("parse failure %s %s: %s\n", c.CallID, c.Name, c.Reason)
		}
	}
	// Output:
	// candidate call_1 web.fetch@1 {"url": "https://example.com", "n": 12345678901234567890123}
	// parse failure call_2 read_file: trailing_data
}

// Structured calls sent without an id (key absent, null or "") are never dropped: each gets
// the id Airlock assigns from the round and its index, marked IDAssigned, and stays a
// candidate; a model's own id is kept and not marked; a non-string id still fails.
func TestParseAssignsMissingCallIDs(t *testing.T) {
	body := openAI("null", `[{"type":"function","function":{"name":"a","arguments":"{}"}},`+
		`{"id":"","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}},`+
		`{"id":null,"type":"function","function":{"name":"c","arguments":"{}"}},`+
		`{"id":"call_own","type":"function","function":{"name":"d","arguments":"{}"}},`+
		`{"id":7,"type":"function","function":{"name":"e","arguments":"{}"}}]`, "tool_calls")
	res, err := Parse(FormatOpenAI, body, Options{Round: 3})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []string{"airlock-r3-c0", "airlock-r3-c1", "airlock-r3-c2", "call_own", ""}
	if len(res.Calls) != len(wantIDs) {
		t.Fatalf("calls: %+v", res.Calls)
	}
	for i, c := range res.Calls {
		if c.CallID != wantIDs[i] {
			t.Errorf("call %d id %q, want %q", i, c.CallID, wantIDs[i])
		}
		assigned := i < 3
		if c.IDAssigned != assigned || c.Candidate() != (i < 4) {
			t.Errorf("call %d: assigned %v candidate %v (%s %s)", i, c.IDAssigned, c.Candidate(), c.Reason, c.Detail)
		}
	}
	if res.Calls[4].Reason != ReasonMissingCallID {
		t.Errorf("non-string id: %s", res.Calls[4].Reason)
	}
	if AssignedCallID("", 3, 1) != "airlock-r3-c1" || AssignedCallID("0a1b2c3d", 3, 1) != "airlock-0a1b2c3d-r3-c1" {
		t.Errorf("scheme: %s, %s", AssignedCallID("", 3, 1), AssignedCallID("0a1b2c3d", 3, 1))
	}
	tok := TurnToken("turn/c/1")
	if len(tok) != 8 || tok == TurnToken("turn/c/2") || WithoutTurn(AssignedCallID(tok, 3, 1)) != "airlock-r3-c1" || WithoutTurn("call_x") != "call_x" {
		t.Errorf("turn token %q; WithoutTurn %q", tok, WithoutTurn(AssignedCallID(tok, 3, 1)))
	}
	an, err := Parse(FormatAnthropic, anthropic(`[{"type":"tool_use","id":"","name":"f","input":{}},{"type":"tool_use","name":"g","input":{}}]`, "tool_use"), Options{Round: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(an.Calls) != 2 || an.Calls[0].CallID != "airlock-r2-c0" || an.Calls[1].CallID != "airlock-r2-c1" || !an.Calls[1].IDAssigned || !an.Calls[1].Candidate() {
		t.Errorf("anthropic: %+v", an.Calls)
	}
}

// Issue 11 review: an id Airlock assigns never collides with an id the model sent itself, so a
// valid message is not failed as duplicate_call_id because of Airlock; the turn enters the id.
func TestAssignedIDsAvoidTheModelsOwnIDs(t *testing.T) {
	body := openai(`[{"type":"function","function":{"name":"f","arguments":"{}"}},{"id":"airlock-r1-c0","type":"function","function":{"name":"g","arguments":"{}"}},{"id":"airlock-r1-c0-1","type":"function","function":{"name":"h","arguments":"{}"}}]`, "tool_calls")
	res, err := Parse(FormatOpenAI, body, Options{Round: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 3 {
		t.Fatalf("calls = %+v", res.Calls)
	}
	for _, c := range res.Calls {
		if !c.Candidate() {
			t.Fatalf("a valid message must not fail because of an assigned id: %+v", c)
		}
	}
	if res.Calls[0].CallID != "airlock-r1-c0-2" || !res.Calls[0].IDAssigned {
		t.Fatalf("assigned id = %q, want airlock-r1-c0-2", res.Calls[0].CallID)
	}
	res, err = Parse(FormatOpenAI, openai(`[{"type":"function","function":{"name":"f","arguments":"{}"}}]`, "tool_calls"), Options{Round: 2, Turn: TurnToken("turn/c/7")})
	if err != nil || res.Calls[0].CallID != "airlock-"+TurnToken("turn/c/7")+"-r2-c0" {
		t.Fatalf("turn-scoped id = %+v, %v", res.Calls, err)
	}
}

// Issue 11 review: many calls sharing one id parse in linear time with bounded details; a
// message of more than MaxCallsPerMessage calls is refused whole (issue 31).
func TestDuplicateIDDetailsAreBounded(t *testing.T) {
	var many strings.Builder
	for i := range 3000 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`{}`)
	}
	res, err := Parse(FormatOpenAI, openai("["+many.String()+"]", "tool_calls"), Options{})
	if err != nil || len(res.Calls) != 0 || res.Incomplete != ReasonUnreadPart || !strings.Contains(res.IncompleteDetail, "3000 tool calls") {
		t.Fatalf("3000 calls: %v %d calls, %s %s", err, len(res.Calls), res.Incomplete, res.IncompleteDetail)
	}
	var b strings.Builder
	for i := range MaxCallsPerMessage {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"id":"x","type":"function","function":{"name":"f","arguments":"{}"}}`)
	}
	res, err = Parse(FormatOpenAI, openai("["+b.String()+"]", "tool_calls"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, c := range res.Calls {
		if c.Reason != ReasonDuplicateCallID {
			t.Fatalf("call %d: %s", c.Index, c.Reason)
		}
		total += len(c.Detail)
		if len(c.Detail) > 400 {
			t.Fatalf("detail of %d bytes: %s", len(c.Detail), c.Detail[:200])
		}
	}
	if !strings.Contains(res.Calls[0].Detail, fmt.Sprintf("#1, #2, #3 and %d more", MaxCallsPerMessage-3)) {
		t.Fatalf("detail = %s", res.Calls[0].Detail)
	}
}

// Issue 11 review: the legacy function_call is read even beside an empty tool_calls array: a
// call is never dropped because it came in the other field.
func TestLegacyFunctionCallBesideEmptyToolCallsIsKept(t *testing.T) {
	body := json.RawMessage(`{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[],"function_call":{"name":"get_balance","arguments":"{}"}},"finish_reason":"function_call"}]}`)
	res, err := Parse(FormatOpenAI, body, Options{})
	if err != nil || len(res.Calls) != 1 || res.Calls[0].Name != "get_balance" || res.Calls[0].Reason != ReasonMissingCallID {
		t.Fatalf("legacy function_call beside tool_calls [] = %+v, %v", res.Calls, err)
	}
}
