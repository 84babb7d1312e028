package parse

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// streamBodies are every unstreamed body the tests know: each line of the case files (the
// approval cases' model responses included) and each body of the part-model table.
func streamBodies(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, path := range []string{providerCases, finishCases} {
		for _, c := range readCases(t, path) {
			out[c.ID] = c.Input
		}
	}
	for _, l := range readLines(t, approvalCases) {
		var c struct {
			ID    string `json:"id"`
			Input struct {
				ModelResponse    json.RawMessage `json:"model_response"`
				ReplayedResponse json.RawMessage `json:"replayed_model_response"`
			} `json:"input"`
		}
		if err := json.Unmarshal(l, &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Input.ModelResponse) > 0 {
			out[c.ID+"/model_response"] = c.Input.ModelResponse
		}
		if len(c.Input.ReplayedResponse) > 0 {
			out[c.ID+"/replayed_model_response"] = c.Input.ReplayedResponse
		}
	}
	out["multibyte"] = oa("", "", "", `{"id":"call_1","type":"function","function":{"name":"do_it","arguments":"{\"city\":\"Zürich 東京 😀\",\"esc\":\"\\ud83d\\ude00\\n\"}"}}`)
	out["multibyte content"] = []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Grüße aus 東京 😀 done"},"finish_reason":"stop"}]}`)
	out["anthropic multibyte"] = an("", `{"type":"text","text":"Grüße 😀"}`, "")
	out["anthropic multibyte input"] = []byte(`{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"t1","name":"do_it","input":{"q":"東京 😀"}},{"type":"tool_use","id":"t2","name":"do_it","input":{"q":"b"}}],"stop_reason":"tool_use","stop_sequence":null}`)
	return out
}

// TestStreamAssemblesToTheUnstreamedParse: every known body, streamed in pieces of 1, 2, 3
// and 7 bytes (cuts inside strings, escapes kept whole, cuts inside multi-byte characters),
// assembles to a body whose parse is exactly the unstreamed parse.
func TestStreamAssemblesToTheUnstreamedParse(t *testing.T) {
	bodies := streamBodies(t)
	formats := map[string]Format{}
	for _, tc := range partCases() {
		if tc.name == "openai chunk object" || tc.name == "ollama not done" {
			// A body that is itself one chunk (object chat.completion.chunk, done false)
			// has no streamed form: streamed, it is a stream that ends early, which
			// TestStreamFaults and TestOllamaStream refuse.
			continue
		}
		bodies["part/"+tc.name] = tc.body
		formats["part/"+tc.name] = tc.format
	}
	for name, body := range bodies {
		format := formats[name]
		if format == "" {
			format = DetectFormat(body)
		}
		if format == "" {
			t.Fatalf("%s: no format", name)
		}
		want, err := Parse(format, body, Options{Round: 1, Turn: "abcd0123"})
		if err != nil {
			t.Fatalf("%s: unstreamed parse: %v", name, err)
		}
		for _, n := range []int{1, 2, 3, 7} {
			events, err := Disassemble(format, body, n)
			if err != nil {
				t.Fatalf("%s: Disassemble: %v", name, err)
			}
			got, cut := assembleParse(t, format, body, events)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s (pieces of %d): streamed parse differs\n got %+v\nwant %+v\nassembled %s", name, n, got, want, cut)
			}
		}
	}
}

// assembleParse folds events through the format's assembler and parses the result.
func assembleParse(t *testing.T, format Format, body []byte, events [][]byte) (Result, []byte) {
	t.Helper()
	var asm Assembler
	if IsOllamaBody(body) {
		asm = NewOllamaAssembler()
	} else {
		var err error
		if asm, err = NewAssembler(format); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range events {
		asm.Add(e)
	}
	assembled := asm.Body()
	res, err := Parse(format, assembled, Options{Round: 1, Turn: "abcd0123"})
	if err != nil {
		t.Fatalf("assembled body does not parse: %v\n%s", err, assembled)
	}
	return res, assembled
}

// TestStreamCutsInsideMultibyteCharacters checks that the pieces really do cut characters:
// with pieces of 1 byte, a four-byte emoji spreads over four events, none valid UTF-8 alone.
func TestStreamCutsInsideMultibyteCharacters(t *testing.T) {
	body := streamBodies(t)["multibyte"]
	events, err := Disassemble(FormatOpenAI, body, 1)
	if err != nil {
		t.Fatal(err)
	}
	invalid := 0
	for _, e := range events {
		if !utf8.Valid(e) {
			invalid++
		}
	}
	if invalid < 4 {
		t.Fatalf("only %d events hold a cut character", invalid)
	}
	res, _ := assembleParse(t, FormatOpenAI, body, events)
	if len(res.Calls) != 1 || !res.Calls[0].Candidate() || !strings.Contains(string(res.Calls[0].Arguments), "😀") {
		t.Fatalf("got %+v", res.Calls)
	}
}

// TestStreamDeltas: the deltas of a stream show the prose and the calls as they arrive.
func TestStreamDeltas(t *testing.T) {
	body := []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Looking","tool_calls":[` + okCall + `]},"finish_reason":"tool_calls"}]}`)
	events, err := Disassemble(FormatOpenAI, body, 3)
	if err != nil {
		t.Fatal(err)
	}
	asm, _ := NewAssembler(FormatOpenAI)
	var text, args strings.Builder
	var starts []Delta
	for _, e := range events {
		for _, d := range asm.Add(e) {
			switch d.Kind {
			case DeltaText:
				text.WriteString(d.Text)
			case DeltaCallStart:
				starts = append(starts, d)
			case DeltaCallArgs:
				args.WriteString(d.Text)
			}
		}
	}
	if text.String() != "Looking" || args.String() != `{"a":1}` || len(starts) != 1 || starts[0].ID != "call_1" || starts[0].Name != "do_it" {
		t.Fatalf("text %q args %q starts %+v", text.String(), args.String(), starts)
	}
	if !asm.Done() {
		t.Fatal("not done after the finish chunk")
	}
}

// TestStreamFaults: each way a stream cannot be one message fails the whole message with
// stream_fault (or the part model's reason for a carried part).
func TestStreamFaults(t *testing.T) {
	head := `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"do_it","arguments":""}}]},"finish_reason":null}]}`
	args := `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":null}]}`
	fin := `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`
	anthStart := `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null}}`
	anthTool := `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"do_it","input":{}}}`
	anthStop := `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null}}`
	tests := []struct {
		name   string
		format Format
		events []string
		want   Reason
	}{
		{"openai complete", FormatOpenAI, []string{head, args, fin}, ""},
		{"openai obfuscation and usage chunk", FormatOpenAI, []string{strings.Replace(head, `{"object"`, `{"obfuscation":"x7Qp","object"`, 1), args, fin, `{"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3},"obfuscation":"k"}`}, ""},
		{"openai ended before finish", FormatOpenAI, []string{head, args}, ReasonStreamFault},
		{"openai unknown chunk member", FormatOpenAI, []string{head, args, strings.Replace(fin, `{"object"`, `{"tool_use":{"name":"x"},"object"`, 1)}, ReasonUnreadPart},
		{"ollama-style call without index", FormatOpenAI, []string{`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_9","type":"function","function":{"name":"do_it","arguments":"{}"}}]},"finish_reason":null}]}`, fin}, ""},
		{"openai second id for one call", FormatOpenAI, []string{head, strings.Replace(head, `"arguments":""`, `"arguments":"{}"`, 1), strings.Replace(head, `call_1`, `call_2`, 1), fin}, ReasonStreamFault},
		{"openai chunk not JSON", FormatOpenAI, []string{head, `{"choices":[`, args, fin}, ReasonStreamFault},
		{"openai two finish reasons", FormatOpenAI, []string{head, args, fin, strings.Replace(fin, "tool_calls", "length", 1)}, ReasonStreamFault},
		{"openai error chunk", FormatOpenAI, []string{head, `{"error":{"message":"upstream reset"}}`, fin}, ReasonProviderError},
		{"openai audio delta carried", FormatOpenAI, []string{head, `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"audio":{"id":"a","data":"AA"}},"finish_reason":null}]}`, args, fin}, ReasonUnreadPart},
		{"openai second choice", FormatOpenAI, []string{head, strings.Replace(head, `"index":0,"delta"`, `"index":1,"delta"`, 1), args, fin, strings.Replace(fin, `"index":0`, `"index":1`, 1)}, ReasonUnreadPart},
		{"openai second choice never finished", FormatOpenAI, []string{head, strings.Replace(head, `"index":0,"delta"`, `"index":1,"delta"`, 1), args, fin}, ReasonStreamFault},
		{"openai refusal delta", FormatOpenAI, []string{head, `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"refusal":"I can't"},"finish_reason":null}]}`, args, fin}, ReasonRefusal},
		{"anthropic complete", FormatAnthropic, []string{anthStart, anthTool, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}`, `{"type":"content_block_stop","index":0}`, anthStop, `{"type":"ping"}`, `{"type":"message_stop"}`}, ""},
		{"anthropic no message_stop", FormatAnthropic, []string{anthStart, anthTool, anthStop}, ReasonStreamFault},
		{"anthropic unknown event", FormatAnthropic, []string{anthStart, anthTool, `{"type":"tool_call","name":"x"}`, anthStop, `{"type":"message_stop"}`}, ReasonStreamFault},
		{"anthropic unknown delta", FormatAnthropic, []string{anthStart, anthTool, `{"type":"content_block_delta","index":0,"delta":{"type":"command_delta","command":"rm"}}`, anthStop, `{"type":"message_stop"}`}, ReasonStreamFault},
		{"anthropic delta for unknown block", FormatAnthropic, []string{anthStart, `{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}`, anthTool, anthStop, `{"type":"message_stop"}`}, ReasonStreamFault},
		{"anthropic error event", FormatAnthropic, []string{anthStart, anthTool, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, ReasonProviderError},
		{"anthropic server tool block", FormatAnthropic, []string{anthStart, anthTool, `{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}`, anthStop, `{"type":"message_stop"}`}, ReasonUnreadPart},
		{"anthropic max_tokens inside tool_use", FormatAnthropic, []string{anthStart, anthTool, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"/et"}}`, `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null}}`, `{"type":"message_stop"}`}, ReasonTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asm, _ := NewAssembler(tc.format)
			for _, e := range tc.events {
				asm.Add([]byte(e))
			}
			body := asm.Body()
			res, err := Parse(tc.format, body, Options{Round: 1})
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, body)
			}
			if res.Incomplete != tc.want {
				t.Fatalf("Incomplete %q (%s), want %q\n%s", res.Incomplete, res.IncompleteDetail, tc.want, body)
			}
			for _, c := range res.Calls {
				if tc.want != "" && c.Candidate() {
					t.Errorf("call %d is a candidate", c.Index)
				}
				if tc.want == "" && !c.Candidate() {
					t.Errorf("call %d failed: %s %s", c.Index, c.Reason, c.Detail)
				}
			}
			if tc.want == "" && len(res.Calls) != 1 {
				t.Fatalf("calls %+v", res.Calls)
			}
		})
	}
}

// TestOllamaStream: Ollama's NDJSON lines assemble to the body, and a stream cut before done
// fails the message.
func TestOllamaStream(t *testing.T) {
	body := ol("", `"thinking":"let me see"`, "")
	lines, err := Disassemble(FormatOpenAI, body, 2)
	if err != nil {
		t.Fatal(err)
	}
	asm := NewOllamaAssembler()
	for _, l := range lines[:len(lines)-1] {
		asm.Add(l)
	}
	res, err := Parse(FormatOpenAI, asm.Body(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete != ReasonStreamFault {
		t.Fatalf("cut stream: Incomplete %q", res.Incomplete)
	}
	asm.Add(lines[len(lines)-1])
	res, err = Parse(FormatOpenAI, asm.Body(), Options{})
	if err != nil || res.Incomplete != "" || len(res.Calls) != 1 || !res.Calls[0].Candidate() {
		t.Fatalf("full stream: %+v %v\n%s", res, err, asm.Body())
	}
	if !bytes.Contains(asm.Body(), []byte(`"thinking":"let me see"`)) {
		t.Errorf("thinking not joined: %s", asm.Body())
	}
}

// TestStreamDeltasKeepCharactersWhole: with pieces of one byte, every multi-byte character is
// cut, yet the deltas shown join to the exact text and arguments, and no delta holds U+FFFD.
func TestStreamDeltasKeepCharactersWhole(t *testing.T) {
	for _, format := range []Format{FormatOpenAI, FormatAnthropic} {
		body := streamBodies(t)["multibyte content"]
		wantText, wantArgs := "Grüße aus 東京 😀 done", ""
		if format == FormatAnthropic {
			body = streamBodies(t)["anthropic multibyte input"]
			wantText, wantArgs = "", `{"q":"東京 😀"}{"q":"b"}`
		}
		events, err := Disassemble(format, body, 1)
		if err != nil {
			t.Fatal(err)
		}
		asm, _ := NewAssembler(format)
		var text, args strings.Builder
		for _, e := range events {
			for _, d := range asm.Add(e) {
				if strings.ContainsRune(d.Text, utf8.RuneError) {
					t.Fatalf("%s: delta %q holds U+FFFD", format, d.Text)
				}
				switch d.Kind {
				case DeltaText:
					text.WriteString(d.Text)
				case DeltaCallArgs:
					args.WriteString(d.Text)
				}
			}
		}
		if text.String() != wantText || args.String() != wantArgs {
			t.Errorf("%s: text %q args %q", format, text.String(), args.String())
		}
	}
}
