package parse

import (
	"errors"
	"strings"
	"testing"
)

// TestResponsesParts: the Responses API's parts are read or refused as its part model says:
// prose from output_text, a refusal part refuses, a content part that does not decode makes
// the response unreadable (it could be a refusal: never skipped), tools the API ran and
// unknown items are refused, a failed response is a provider error.
func TestResponsesParts(t *testing.T) {
	wrap := func(status, items string) string {
		return `{"object":"response","status":"` + status + `","error":null,"output":[` + items + `]}`
	}
	msg := func(parts string) string {
		return `{"type":"message","id":"m","role":"assistant","status":"completed","content":[` + parts + `]}`
	}
	cases := []struct {
		name, body string
		text       string
		want       Reason
		has        string
		unreadable bool
	}{
		{"text", wrap("completed", msg(`{"type":"output_text","text":"Hi ","annotations":[]},{"type":"output_text","text":"there","annotations":[]}`)), "Hi there", "", "", false},
		{"refusal part", wrap("completed", msg(`{"type":"refusal","refusal":"I can't"}`)), "", ReasonRefusal, "I can't", false},
		{"undecodable part", wrap("completed", msg(`{"type":"refusal","refusal":"no","refusal":"x"}`)), "", "", "duplicate object key", true},
		{"content not an array", wrap("completed", `{"type":"message","role":"assistant","content":"x"}`), "", "", "not an array", true},
		{"web search item", wrap("completed", `{"type":"web_search_call","id":"ws","status":"completed"}`), "", ReasonUnreadPart, "web_search_call", false},
		{"unknown key", `{"object":"response","status":"completed","output":[],"tool_runs":[]}`, "", ReasonUnreadPart, "tool_runs", false},
		{"failed", `{"object":"response","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`, "", ReasonProviderError, "boom", false},
		{"in progress", wrap("in_progress", ""), "", ReasonAbnormalFinish, "in_progress", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Parse(FormatResponses, []byte(c.body), Options{})
			if c.unreadable {
				if !errors.Is(err, ErrUnrecognized) || !strings.Contains(err.Error(), c.has) {
					t.Fatalf("err %v, want unrecognized naming %q", err, c.has)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != c.text || res.Incomplete != c.want || !strings.Contains(res.IncompleteDetail, c.has) {
				t.Fatalf("%+v, want text %q incomplete %q naming %q", res, c.text, c.want, c.has)
			}
		})
	}
}

// TestAnthropicStreamErrorEventWithoutError: an error event with no error member is still a
// provider error, never dropped.
func TestAnthropicStreamErrorEventWithoutError(t *testing.T) {
	body := "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\"}}\n\ndata: {\"type\":\"error\"}\n\n"
	res, err := Read(FormatAnthropic, FramingSSE, strings.NewReader(body), Options{})
	if err != nil || res.Incomplete != ReasonProviderError {
		t.Fatalf("%v %+v", err, res)
	}
}
