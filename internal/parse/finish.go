package parse

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// wire names the dialect whose finish or stop reason is being classified.
type wire int

const (
	wireOpenAI    wire = iota // choices[0].finish_reason of a chat.completion
	wireOllama                // done_reason of an Ollama /api/chat body
	wireAnthropic             // stop_reason of an Anthropic message
)

// MaxReasonQuote is the number of bytes of a provider-controlled string (a finish reason, a
// call id) that a Detail quotes; the rest is counted, not shown.
const MaxReasonQuote = 64

// Finish reasons that end a message normally, by dialect. Everything else — the published
// abnormal reasons, reasons no provider has published yet, a different spelling or case, and
// a missing, null or empty reason — fails every call of the message. Matching is exact: a
// reason is never trimmed or case-folded.
//
// OpenAI chat completions (also vLLM, llama.cpp, and other OpenAI-compatible servers):
//   - "tool_calls": the model stopped to call tools.
//   - "stop": the model ended its turn. OpenAI itself reports "stop" when tool_choice names a
//     function, and many compatible servers report "stop" for every finished message with
//     tool calls. A "stop" can also mean a caller stop sequence was hit, but Airlock never
//     sends stop sequences, so here it is the model's own end.
//   - "function_call": the legacy (deprecated functions API) spelling of "tool_calls": the
//     model stopped to call a function. It means a finished message; the legacy
//     message.function_call it accompanies has no id and fails missing_call_id anyway.
//
// Ollama /api/chat: "stop" is the only normal end (Ollama reports it for tool calls too);
// "load" and "unload" are model-management answers, not generations.
//
// Anthropic Messages:
//   - "tool_use": the model stopped to call tools.
//   - "end_turn": the model ended its turn.
//   - not "stop_sequence": generation was cut where a caller stop sequence matched, not
//     where the model chose to end; Airlock never sends stop sequences, so one in a response
//     means a proxy or another client changed the request, and what precedes the cut is
//     treated like output cut by length.
//   - not "pause_turn": the API paused a long turn (server tools) and expects the message to be
//     sent back so the model can continue: the turn is not finished, so its tool_use blocks are
//     not a decision the model completed.
//   - not "refusal": the safety system stopped the model (case B37); a tool_use block left in
//     the message is not a call the model completed.
//
// Missing, null or empty reason: a complete non-streamed response always carries one (it is
// null only in a stream's opening event), so its absence is what an interrupted or wrongly
// assembled stream looks like; Airlock cannot tell that the message ended normally and does
// not guess.
var normalFinish = map[wire]map[string]bool{
	wireOpenAI:    {"tool_calls": true, "stop": true, "function_call": true},
	wireOllama:    {"stop": true},
	wireAnthropic: {"tool_use": true, "end_turn": true},
}

// truncatedFinish are the reasons that say the output was cut off by a token limit; they fail
// with truncated (case B14) rather than abnormal_finish, so the model is told to say less.
var truncatedFinish = map[wire]map[string]bool{
	wireOpenAI:    {"length": true},
	wireOllama:    {"length": true},
	wireAnthropic: {"max_tokens": true, "model_context_window_exceeded": true},
}

// classifyFinish returns the reason that fails every call of a message that ended with
// finish reason finish in dialect w ("" when the message ended normally), and its Detail.
// present is false when the reason was absent or null.
func classifyFinish(w wire, finish string, present bool) (Reason, string) {
	switch {
	case normalFinish[w][finish]:
		return "", ""
	case truncatedFinish[w][finish]:
		return ReasonTruncated, fmt.Sprintf("finish reason %s: output was cut off; every call of the message is rejected", quoteBounded(finish))
	case !present:
		return ReasonAbnormalFinish, "the message has no finish reason, so it cannot be known to have ended normally; every call of the message is rejected"
	case finish == "":
		return ReasonAbnormalFinish, "the finish reason is empty, so the message cannot be known to have ended normally; every call of the message is rejected"
	}
	return ReasonAbnormalFinish, fmt.Sprintf("finish reason %s is not a normal end of message; every call of the message is rejected", quoteBounded(finish))
}

// quoteBounded quotes s for a Detail: at most MaxReasonQuote bytes of it (cut on a rune
// boundary), escaped as a Go string literal with only printable ASCII (control characters,
// bidi controls and invalid UTF-8 become escapes), followed by the total length when cut.
func quoteBounded(s string) string {
	if len(s) <= MaxReasonQuote {
		return strconv.QuoteToASCII(s)
	}
	cut := MaxReasonQuote
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if cut == 0 {
		cut = MaxReasonQuote // no rune start: invalid UTF-8, escaped byte by byte anyway
	}
	return fmt.Sprintf("%s... (%d bytes in all)", strconv.QuoteToASCII(s[:cut]), len(s))
}
