package parse

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Bodies with two well-formed calls and a finish reason given as raw JSON (a quoted string,
// null, or "" for no key at all).
func openAIFinish(finishJSON string) []byte {
	reason := ""
	if finishJSON != "" {
		reason = `,"finish_reason":` + finishJSON
	}
	return []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"ls\"}"}}]}` + reason + `}]}`)
}

func ollamaFinish(finishJSON string) []byte {
	reason := ""
	if finishJSON != "" {
		reason = `,"done_reason":` + finishJSON
	}
	return []byte(`{"model":"m","message":{"role":"assistant","content":"","tool_calls":[` +
		`{"function":{"name":"read_file","arguments":{"path":"a"}}},{"function":{"name":"run_command","arguments":{"command":"ls"}}}]}` + reason + `,"done":true}`)
}

func anthropicFinish(stopJSON string) []byte {
	reason := ""
	if stopJSON != "" {
		reason = `,"stop_reason":` + stopJSON
	}
	return []byte(`{"id":"msg","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"},` +
		`{"type":"tool_use","id":"toolu_a","name":"read_file","input":{"path":"a"}},{"type":"tool_use","id":"toolu_b","name":"run_command","input":{"command":"ls"}}]` + reason + `}`)
}

// TestFinishReasons maps each dialect's finish or stop reasons: the normal ends leave both
// calls candidates; token limits fail both with truncated; every other reason — published,
// unpublished, differently spelled, empty, null or absent — fails both with abnormal_finish
// and a Detail naming it.
func TestFinishReasons(t *testing.T) {
	dialects := []struct {
		name      string
		format    Format
		body      func(string) []byte
		normal    []string
		truncated []string
		abnormal  []string
	}{
		{"openai", FormatOpenAI, openAIFinish,
			[]string{`"tool_calls"`, `"stop"`, `"function_call"`},
			[]string{`"length"`},
			[]string{`"content_filter"`, `"refusal"`, `"quantum_interrupt"`, `""`, `null`, ``, `"TOOL_CALLS"`, `"Stop"`, `" stop"`, `"stop\n"`,
				`"end_turn"`, `"tool_use"`, `"max_tokens"`, `"error"`, `"abort"`, `"insufficient_system_resource"`, `"model_length"`}},
		{"ollama", FormatOpenAI, ollamaFinish,
			// No done_reason key beside done:true is a normal end (older Ollama; issue 31).
			[]string{`"stop"`, ``},
			[]string{`"length"`},
			[]string{`"load"`, `"unload"`, `"tool_calls"`, `"quantum_interrupt"`, `""`, `null`}},
		{"anthropic", FormatAnthropic, anthropicFinish,
			[]string{`"tool_use"`, `"end_turn"`},
			[]string{`"max_tokens"`, `"model_context_window_exceeded"`},
			[]string{`"refusal"`, `"stop_sequence"`, `"pause_turn"`, `"content_filter"`, `"quantum_interrupt"`, `""`, `null`, ``,
				`"TOOL_USE"`, `"tool_calls"`, `"stop"`, `"length"`}},
	}
	for _, d := range dialects {
		for _, group := range []struct {
			reason Reason
			list   []string
		}{{"", d.normal}, {ReasonTruncated, d.truncated}, {ReasonAbnormalFinish, d.abnormal}} {
			for _, fin := range group.list {
				t.Run(d.name+"/"+fin, func(t *testing.T) {
					for _, f := range []Format{d.format, FormatAuto} {
						res, err := Parse(f, d.body(fin), Options{})
						if err != nil {
							t.Fatalf("Parse(%s): %v", f, err)
						}
						if len(res.Calls) != 2 {
							t.Fatalf("got %d calls, want 2: %+v", len(res.Calls), res.Calls)
						}
						for _, c := range res.Calls {
							if c.Reason != group.reason {
								t.Fatalf("call %d: reason %q (%s), want %q", c.Index, c.Reason, c.Detail, group.reason)
							}
							if group.reason == "" {
								if c.Arguments == nil {
									t.Errorf("candidate %d has no arguments", c.Index)
								}
								continue
							}
							if c.Arguments != nil {
								t.Errorf("failed call %d carries Arguments", c.Index)
							}
							if strings.HasPrefix(fin, `"`) && len(fin) > 2 && !strings.Contains(c.Detail, fin[:len(fin)-1]) {
								t.Errorf("call %d: Detail %q does not name the reason %s", c.Index, c.Detail, fin)
							}
							if group.reason == ReasonAbnormalFinish && !strings.HasPrefix(fin, `"`) && !strings.Contains(c.Detail, "no finish reason") {
								t.Errorf("call %d: Detail %q does not say the reason is missing", c.Index, c.Detail)
							}
							if fin == `""` && !strings.Contains(c.Detail, "empty") {
								t.Errorf("call %d: Detail %q does not say the reason is empty", c.Index, c.Detail)
							}
						}
					}
				})
			}
		}
	}
}

// TestHostileFinishReason: a 10 KB reason full of control, bidi and invisible characters is
// named in the Detail escaped to printable ASCII and cut, with its full length.
func TestHostileFinishReason(t *testing.T) {
	unit := "\u0000\u001b[31m\r\n\u202e\u200bevil"
	reason := strings.Repeat(unit, 10<<10/len(unit)+1)
	for name, body := range map[string][]byte{
		"openai":    openAIFinish(quote(reason)),
		"ollama":    ollamaFinish(quote(reason)),
		"anthropic": anthropicFinish(quote(reason)),
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Parse(FormatAuto, body, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.FinishReason != reason {
				t.Errorf("FinishReason not kept as the provider spelled it")
			}
			for _, c := range res.Calls {
				if c.Reason != ReasonAbnormalFinish {
					t.Fatalf("call %d: reason %q, want abnormal_finish", c.Index, c.Reason)
				}
				if len(c.Detail) > 300 {
					t.Errorf("Detail is %d bytes, want it bounded", len(c.Detail))
				}
				for _, r := range c.Detail {
					if r > unicode.MaxASCII || !unicode.IsPrint(r) {
						t.Fatalf("Detail holds %U: %q", r, c.Detail)
					}
				}
				if !strings.Contains(c.Detail, `\x00\x1b[31m\r\n\u202e\u200bevil`) {
					t.Errorf("Detail %q does not show the reason escaped", c.Detail)
				}
				if want := "(" + strconv.Itoa(len(reason)) + " bytes in all)"; !strings.Contains(c.Detail, want) {
					t.Errorf("Detail %q does not give the length %s", c.Detail, want)
				}
			}
		})
	}
}

// TestDuplicateIDsFailWholeMessage: one shared id fails every call of the message, those with
// a unique id and those with no id included, in both formats; and duplicate_call_id and
// invalid_name stand over an abnormal finish (their Detail also names the finish reason).
func TestDuplicateIDsFailWholeMessage(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		body   []byte
		want   []Reason
		also   string // text every Detail must contain
	}{
		{"openai shared id, unique id, no id", FormatOpenAI, openAI("null", `[
			{"id":"call_x","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}},
			{"id":"call_unique","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"b\"}"}},
			{"type":"function","function":{"name":"read_file","arguments":"{}"}},
			{"id":"call_x","type":"function","function":{"name":"delete_file","arguments":"{\"path\":\"c\"}"}}]`, "tool_calls"),
			[]Reason{ReasonDuplicateCallID, ReasonDuplicateCallID, ReasonDuplicateCallID, ReasonDuplicateCallID}, `"call_x"`},
		{"openai two pairs", FormatOpenAI, openAI("null", `[
			{"id":"p","type":"function","function":{"name":"f","arguments":"{}"}},
			{"id":"q","type":"function","function":{"name":"g","arguments":"{}"}},
			{"id":"p","type":"function","function":{"name":"f","arguments":"{}"}},
			{"id":"q","type":"function","function":{"name":"g","arguments":"{}"}}]`, "tool_calls"),
			[]Reason{ReasonDuplicateCallID, ReasonDuplicateCallID, ReasonDuplicateCallID, ReasonDuplicateCallID}, "assembled wrongly"},
		{"anthropic shared id and unique id", FormatAnthropic, anthropic(`[
			{"type":"tool_use","id":"toolu_x","name":"read_file","input":{"path":"a"}},
			{"type":"tool_use","id":"toolu_unique","name":"read_file","input":{"path":"b"}},
			{"type":"tool_use","id":"toolu_x","name":"delete_file","input":{"path":"c"}}]`, "tool_use"),
			[]Reason{ReasonDuplicateCallID, ReasonDuplicateCallID, ReasonDuplicateCallID}, `"toolu_x"`},
		{"duplicate over refusal", FormatAnthropic, anthropic(`[
			{"type":"tool_use","id":"t","name":"f","input":{}},
			{"type":"tool_use","id":"u","name":"g","input":{}},
			{"type":"tool_use","id":"t","name":"h","input":{}}]`, "refusal"),
			[]Reason{ReasonDuplicateCallID, ReasonDuplicateCallID, ReasonDuplicateCallID}, `"refusal"`},
		{"invalid name over abnormal finish", FormatOpenAI, openAI("null", `[
			{"id":"a","type":"function","function":{"name":"bad name","arguments":"{}"}},
			{"id":"b","type":"function","function":{"name":"good","arguments":"{}"}}]`, "content_filter"),
			[]Reason{ReasonInvalidName, ReasonAbnormalFinish}, `"content_filter"`},
		{"abnormal finish over missing id and bad arguments", FormatOpenAI, openAI("null", `[
			{"type":"function","function":{"name":"f","arguments":"{}"}},
			{"id":"b","type":"function","function":{"name":"g","arguments":"{bad"}}]`, "refusal"),
			[]Reason{ReasonAbnormalFinish, ReasonAbnormalFinish}, `"refusal"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Parse(tc.format, tc.body, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Calls) != len(tc.want) {
				t.Fatalf("got %d calls, want %d: %+v", len(res.Calls), len(tc.want), res.Calls)
			}
			for i, c := range res.Calls {
				if c.Reason != tc.want[i] || c.Candidate() || c.Arguments != nil {
					t.Errorf("call %d (%q, id %q): reason %q (%s), want %q and no arguments", i, c.Name, c.CallID, c.Reason, c.Detail, tc.want[i])
				}
				if !strings.Contains(c.Detail, tc.also) {
					t.Errorf("call %d: Detail %q does not contain %s", i, c.Detail, tc.also)
				}
			}
		})
	}
}

// TestAbnormalFinishWithoutCalls: a message with no structured call is unaffected by its finish
// reason: prose stays prose, tool-call-shaped text stays embedded_tool_call_text.
func TestAbnormalFinishWithoutCalls(t *testing.T) {
	res, err := Parse(FormatOpenAI, openAI(`"I cannot help with that."`, "", "content_filter"), Options{})
	if err != nil || len(res.Calls) != 0 || res.FinishReason != "content_filter" {
		t.Fatalf("prose: %+v, %v", res, err)
	}
	res, err = Parse(FormatAnthropic, anthropic(`[{"type":"text","text":"<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"}]`, "refusal"), Options{})
	if err != nil || len(res.Calls) != 1 || res.Calls[0].Reason != ReasonEmbeddedToolCallText {
		t.Fatalf("embedded: %+v, %v", res, err)
	}
}
