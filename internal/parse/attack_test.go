package parse

import (
	"strings"
	"testing"
)

// TestHostilePartsAreNeverNothing: values an attacker (or a proxy) can put where a documented
// "nothing" goes are refused unless Airlock reads them as nothing: a filter hit in any shape,
// a value it cannot decode, an error saying a filter did not run (issue 31; found by an attack
// helper). Details stay escaped and bounded whatever the keys are.
func TestHostilePartsAreNeverNothing(t *testing.T) {
	body := func(choiceExtra, msgExtra string) string {
		return `{"object":"chat.completion","choices":[{"index":0` + choiceExtra + `,"message":{"role":"assistant","content":null` + msgExtra +
			`,"tool_calls":[{"id":"c1","type":"function","function":{"name":"send_money","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	}
	cases := []struct {
		name, raw string
		want      Reason
		has       string
	}{
		{"Azure custom blocklist array", body(`,"content_filter_results":{"custom_blocklists":[{"filtered":true,"id":"pizza"}]}`, ""), ReasonRefusal, "custom_blocklists"},
		{"Azure blocklist details", body(`,"content_filter_results":{"custom_blocklists":{"filtered":false,"details":[{"filtered":true,"id":"x"}]}}`, ""), ReasonRefusal, "filtered"},
		{"Azure duplicate key", body(`,"content_filter_results":{"hate":{"filtered":true,"filtered":true}}`, ""), ReasonUnreadPart, "duplicate"},
		{"Azure filter error", body(`,"content_filter_results":{"error":{"code":"content_filter_error","message":"down"}}`, ""), ReasonUnreadPart, "did not run"},
		{"Azure filtered not a boolean", body(`,"content_filter_results":{"hate":{"filtered":"yes"}}`, ""), ReasonUnreadPart, "not a boolean"},
		{"Azure results an array", body(`,"content_filter_results":[{"filtered":true}]`, ""), ReasonUnreadPart, "not a readable"},
		{"annotations with junk", body("", `,"annotations":[{"type":"url_citation"},"anything"]`), ReasonUnreadPart, "annotations[1]"},
		{"annotation duplicate type", body("", `,"annotations":[{"type":"file_citation","type":"url_citation"}]`), ReasonUnreadPart, "annotations[0]"},
		{"hostile key in a filter", body(`,"content_filter_results":{"\u202eevil\u001b[31m`+strings.Repeat("A", 5000)+`":{"filtered":true}}`, ""), ReasonRefusal, `\u202e`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Parse(FormatOpenAI, []byte(c.raw), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Incomplete != c.want || !strings.Contains(res.IncompleteDetail, c.has) {
				t.Fatalf("%s (%s), want %s naming %q", res.Incomplete, res.IncompleteDetail, c.want, c.has)
			}
			if len(res.IncompleteDetail) > MaxDetailBytes+64 || strings.ContainsAny(res.IncompleteDetail, "\u202e\x1b\n") {
				t.Fatalf("detail not bounded or not escaped: %d bytes", len(res.IncompleteDetail))
			}
			for _, call := range res.Calls {
				if call.Candidate() {
					t.Fatalf("call %s is a candidate of a refused message", call.Name)
				}
			}
		})
	}
	mod := `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],` +
		`"moderation":{"output":{"results":[{"flagged":true,"flagged":true}]}}}`
	if res, _ := Parse(FormatOpenAI, []byte(mod), Options{}); res.Incomplete != ReasonUnreadPart {
		t.Fatalf("moderation with a repeated flagged: %s %s", res.Incomplete, res.IncompleteDetail)
	}
}

// TestHostileStreamsAreFaults: what a stream says once cannot be taken back by a later piece
// (issue 31; found by an attack helper).
func TestHostileStreamsAreFaults(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	call := `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"send_money","arguments":"{}"}}]}`
	cases := []struct {
		name, framing, stream string
		want                  Reason
		has                   string
	}{
		{"a call after finish_reason", "sse", chunk(`{"role":"assistant","content":"Hello"}`, "null") + chunk(`{}`, `"stop"`) + chunk(call, "null"), ReasonStreamFault, "after its finish_reason"},
		{"a refused call extra hidden by a later one", "sse",
			chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","extra_content":{"openai":{"x":1}},"function":{"name":"f","arguments":"{}"}}]}`, "null") +
				chunk(`{"tool_calls":[{"index":0,"extra_content":null}]}`, `"tool_calls"`), ReasonUnreadPart, "extra_content"},
		{"the same index-less call twice", "sse",
			chunk(`{"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "null") +
				chunk(`{"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`, `"tool_calls"`), ReasonStreamFault, "sent twice"},
		{"Airlock's fault key from the provider", "sse", `data: {"object":"chat.completion.chunk","airlock_stream_fault":"fine","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}` + "\n\n", ReasonStreamFault, "Airlock's own member"},
		{"Ollama length then stop", "ndjson",
			`{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{}}}]},"done":false,"done_reason":"length"}` + "\n" +
				`{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}` + "\n", ReasonStreamFault, "second done_reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Read(FormatOpenAI, Framing(c.framing), strings.NewReader(c.stream), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Incomplete != c.want || !strings.Contains(res.IncompleteDetail, c.has) {
				t.Fatalf("%s (%s), want %s naming %q", res.Incomplete, res.IncompleteDetail, c.want, c.has)
			}
			for _, call := range res.Calls {
				if call.Candidate() {
					t.Fatalf("call %s is a candidate", call.Name)
				}
			}
		})
	}
}
