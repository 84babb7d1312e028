package parse

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Format names the wire format of a raw provider response. The string values of FormatOpenAI
// and FormatAnthropic are those of internal/inference.Format, so a caller converts with
// parse.Format(resp.Format); this package does not import internal/inference.
type Format string

// Response formats Parse understands.
const (
	// FormatOpenAI is an OpenAI chat.completion body (choices[0].message; OpenAI, vLLM,
	// llama.cpp, …) or the Ollama /api/chat body (a top-level message and done_reason).
	FormatOpenAI Format = "openai"
	// FormatAnthropic is an Anthropic Messages API message (content blocks, stop_reason).
	FormatAnthropic Format = "anthropic"
	// FormatAuto asks Parse to pick the format with DetectFormat.
	FormatAuto Format = "auto"
	// FormatResponses is an OpenAI Responses API response object (output items, status).
	FormatResponses Format = "openai-responses"
)

// Options carries what the parser needs from the catalog of the request that produced the
// response. Versions maps a wire tool name to the capability version the catalog advertised
// for it; a name that is absent gets version 0 (resolve rejects it).
//
// Round is the 1-based inference round of the turn the response answers (0 when unknown, as in
// `airlock parse`); it only enters ids Airlock assigns (AssignedCallID).
type Options struct {
	Versions map[string]int
	Round    int
	// Turn is a short token naming the turn (TurnToken of its workflow id; "" when unknown,
	// as in `airlock parse`); it enters the ids Airlock assigns, so they do not repeat across
	// the turns of a conversation.
	Turn string
}

// AssignedCallID returns the id Airlock assigns to the structured call at 0-based index of the
// response of 1-based round of turn when the provider sent it with an empty id or none:
// "airlock-<turn>-r<round>-c<index>", or "airlock-r<round>-c<index>" when turn is "" (e.g.
// "airlock-r3-c1" for the second call of round 3). Derived from turn, round and index, it is
// deterministic (a replayed or retried round assigns the same ids) and does not repeat across
// the turns of a conversation. When the model itself sent that very id on another call of the
// message, "-1", "-2", … is appended until it is unique (Parse). Such calls carry IDAssigned,
// so the audit and evaluation show the id is not the model's.
func AssignedCallID(turn string, round, index int) string {
	if turn == "" {
		return "airlock-r" + strconv.Itoa(round) + "-c" + strconv.Itoa(index)
	}
	return "airlock-" + turn + "-r" + strconv.Itoa(round) + "-c" + strconv.Itoa(index)
}

// TurnToken is the turn segment of assigned ids: the first 8 hex digits of SHA-256 of the
// turn's workflow id ("" for an empty id).
func TurnToken(workflowID string) string {
	if workflowID == "" {
		return ""
	}
	h := sha256.Sum256([]byte(workflowID))
	return hex.EncodeToString(h[:4])
}

// WithoutTurn returns an assigned id without its turn segment ("airlock-<turn>-r1-c0" →
// "airlock-r1-c0"), the form recordings key id-less calls by; any other id is returned as is.
func WithoutTurn(id string) string {
	rest, ok := strings.CutPrefix(id, "airlock-")
	if !ok {
		return id
	}
	if turn, tail, ok := strings.Cut(rest, "-"); ok && len(turn) == 8 && isHex(turn) && strings.HasPrefix(tail, "r") {
		return "airlock-" + tail
	}
	return id
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// NamePattern is the wire-name grammar a call's name must match exactly: 1 to 64 ASCII
// letters, digits, '_', '-' or '.'. It is OpenAI's function-name grammar plus '.', because a
// dotted name such as "multi_tool_use.parallel" (case B16) is well-formed and must reach
// resolve unmodified to be rejected there as unknown. Everything else — control tokens such as
// "<|channel|>" (case B05), spaces, ':', '/', non-ASCII, the empty name, 65+ bytes — is
// invalid_name. Names are never trimmed, stripped or case-folded.
const NamePattern = `^[A-Za-z0-9_.\-]{1,64}$`

var nameRE = regexp.MustCompile(NamePattern)

// ValidName reports whether name matches NamePattern.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// DetectFormat returns the format of raw from its top-level shape: FormatOpenAI for a body
// with "choices" or with a top-level "message" object (Ollama), FormatAnthropic for a body
// with "type":"message" or a "content" array beside "stop_reason"/"role". It returns "" when
// raw is not a JSON object or matches neither shape; it never returns FormatAuto.
func DetectFormat(raw []byte) Format {
	if !json.Valid(raw) {
		return ""
	}
	top, err := decodeObject(raw)
	if err != nil {
		return ""
	}
	return detect(top)
}

func detect(top object) Format {
	if top.has("choices") {
		return FormatOpenAI
	}
	if m, ok := top.get("message"); ok && kindOf(m) == '{' {
		return FormatOpenAI
	}
	if o, ok := top.get("object"); ok && isString(o, "response") {
		return FormatResponses
	}
	if t, ok := top.get("type"); ok {
		if s, err := unquoteStrict(t); err == nil && (s == "message" || (s == "error" && top.has("error"))) {
			return FormatAnthropic
		}
	}
	if c, ok := top.get("content"); ok && kindOf(c) == '[' && (top.has("stop_reason") || top.has("role")) {
		return FormatAnthropic
	}
	return ""
}

// Parse turns one raw provider response body into a Result: the assistant prose, the finish
// reason as the provider spelled it, and every proposal in emitted order, each either a
// candidate (Reason "") or a parse failure with a Reason. It implements strict,
// non-corrective parsing (DESIGN.md; ../shared/cases/README.md):
//
//   - Shapes: OpenAI reads choices[0] only (requests ask for one choice): message.content
//     (string, null, or an array whose "text" parts are concatenated), message.tool_calls
//     [{id, type, function{name, arguments}}] and finish_reason; Ollama reads the top-level
//     message and done_reason; Anthropic reads the content blocks ("text" blocks are the
//     prose, "tool_use" blocks {id, name, input} the calls, other blocks are neither) and
//     stop_reason. Keys match exactly (case-sensitive); a repeated key in a call is
//     invalid_json, in the envelope an error.
//   - Every part is read or refused (parts.go): each key of the envelope, choice, message,
//     content part, tool call and content block is read, explicitly ignorable, or refused. A
//     refused part (a refusal, an error object, a second choice, audio, a non-function tool
//     call, a server tool block, an unknown key, ...) fails every call of the message with
//     refusal, provider_error or unread_part and sets Incomplete and IncompleteDetail; it
//     takes the place of a finish-reason failure, which its detail then also names.
//   - raw is read as bytes; values are kept as json.RawMessage, so a candidate's Arguments
//     (and Raw) are the exact bytes the model emitted: OpenAI's "arguments" string unescaped,
//     Anthropic's "input" object and Ollama's "arguments" object verbatim. Integers keep every
//     digit; nothing is re-encoded or compacted.
//   - OpenAI "arguments" (a string): key absent or null → arguments_missing; "" or whitespace
//     only → arguments_empty; then the rules of checkArguments (invalid_unicode, invalid_json,
//     trailing_data, arguments_not_object, duplicate keys → invalid_json). A non-string
//     "arguments" in the OpenAI shape (an object, as some servers send) is
//     arguments_not_object: the wire format says string, and accepting an object would mean
//     trusting a server's re-serialization of what the model emitted. Ollama's /api/chat
//     documents "arguments" as an object, so in the Ollama shape an object is accepted
//     verbatim and a string is arguments_not_object (strings are never decoded). Anthropic
//     "input" likewise: object accepted verbatim; string (case B10), array, number →
//     arguments_not_object; absent or null → arguments_missing.
//   - The name must match NamePattern, else invalid_name.
//   - A structured OpenAI or Anthropic call sent with no id (key absent or null) or an empty
//     id (Gemini and Command-R style, some OpenAI-compatible servers) is never dropped: it gets
//     the id AssignedCallID(opts.Round, index) and IDAssigned, and is parsed like any other
//     call. A non-string id, and the deprecated message.function_call (which has no id and is
//     answered by another message shape), fail with missing_call_id. Ollama sends no ids: a
//     call without one gets the synthetic id "call_<index>", also marked IDAssigned.
//   - When two calls of the message share an id, every call of the message fails with
//     duplicate_call_id, those with a unique id or an assigned one included (cases B08, B27):
//     the message was assembled wrongly. Ids are never renumbered.
//   - A call is a candidate only when its message ended normally (normalFinish: OpenAI
//     finish_reason "tool_calls", "stop" or "function_call", Ollama done_reason "stop",
//     Anthropic stop_reason "tool_use" or "end_turn"). finish_reason/done_reason "length",
//     stop_reason "max_tokens" or "model_context_window_exceeded": every call fails with
//     truncated, whether or not its arguments parse (case B14). Any other reason, published
//     or not, a different spelling or case, and a missing, null or empty reason: every call
//     fails with abnormal_finish (case B37).
//   - Precedence for a call with several faults: duplicate_call_id, invalid_name,
//     truncated/abnormal_finish, missing_call_id, then the argument reasons. The first two
//     come before the finish reason because they decide whether the call may be echoed back
//     to the provider at all (workflows' answerable); their Detail then also names the
//     finish reason.
//   - With no structured call, prose that looks like a tool call (see detectEmbedded) yields
//     exactly one failure embedded_tool_call_text with CallID "", the name when obvious and Raw
//     the whole text (cases B11-B13). With structured calls, text is prose and is ignored
//     (case B23). Text is never promoted to a call.
//   - Version is opts.Versions[name] (0 when absent).
//
// format FormatAuto (or "") uses DetectFormat. Per-call problems are never errors. The error,
// always wrapping ErrUnrecognized, is returned only when raw is not a JSON object, names an
// unknown format, or has no recognizable message in the given format (e.g. no choices, a
// tool_calls that is not an array). An error body in the given format (OpenAI {"error":…},
// Anthropic {"type":"error",…}) is a Result with Incomplete provider_error and no call.
func Parse(format Format, raw []byte, opts Options) (Result, error) {
	if !json.Valid(raw) {
		return Result{}, fmt.Errorf("%w: body is not valid JSON", ErrUnrecognized)
	}
	top, err := decodeObject(raw)
	if err != nil {
		return Result{}, fmt.Errorf("%w: body: %w", ErrUnrecognized, err)
	}
	if format == FormatAuto || format == "" {
		format = detect(top)
		if format == "" {
			return Result{}, fmt.Errorf("%w: neither an OpenAI/Ollama nor an Anthropic response", ErrUnrecognized)
		}
	}
	var res Result
	switch format {
	case FormatOpenAI:
		res, err = parseOpenAI(top, idScope{turn: opts.Turn, round: opts.Round})
	case FormatAnthropic:
		res, err = parseAnthropic(top, idScope{turn: opts.Turn, round: opts.Round})
	case FormatResponses:
		res, err = parseResponses(top, idScope{turn: opts.Turn, round: opts.Round})
	default:
		return Result{}, fmt.Errorf("%w: unknown format %q", ErrUnrecognized, string(format))
	}
	if err != nil {
		return Result{}, err
	}
	for i := range res.Calls {
		res.Calls[i].Version = opts.Versions[res.Calls[i].Name]
		res.Calls[i].Detail = cleanDetail(res.Calls[i].Detail)
	}
	res.IncompleteDetail = cleanDetail(res.IncompleteDetail)
	if res.Incomplete != "" {
		// What the provider wants back is kept only from a message read whole: a refused
		// message's parts were not judged safe to send anywhere.
		res.ProviderState = nil
		for i := range res.Calls {
			res.Calls[i].ProviderState = nil
		}
	}
	return res, nil
}

// cleanDetail makes a Detail safe to show and store: every control, format (bidi) or
// non-printable character escaped as \uXXXX, and cut to MaxDetailBytes on a character
// boundary. Details quote provider text through quoteBounded already; this holds the bound for
// any excerpt that was not.
func cleanDetail(s string) string {
	clean := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError || (r >= 0x80 && (!unicode.IsPrint(r) || unicode.Is(unicode.Cf, r))) {
			clean = false
			break
		}
	}
	if clean && len(s) <= MaxDetailBytes {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= MaxDetailBytes {
			fmt.Fprintf(&b, "... (%d bytes in all)", len(s))
			break
		}
		if r < 0x20 || r == 0x7f || r == utf8.RuneError || (r >= 0x80 && (!unicode.IsPrint(r) || unicode.Is(unicode.Cf, r))) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// proposal is one call as read from the wire, before the response-wide rules run.
type proposal struct {
	call   Call   // Index, CallID, Name, Arguments, Raw; Reason/Detail of its own faults
	hasID  bool   // a non-empty id was emitted (or synthesized for Ollama)
	idNote string // why the id is missing, for Detail
	broken bool   // the call or its function is not a JSON object: invalid_json stands
}

// settle finishes a proposal: a bad name already failed it; otherwise the argument reason,
// if any, fails it; else the raw argument bytes become the candidate's arguments.
func (p proposal) settle(nameOK bool, reason Reason, detail string) proposal {
	if !nameOK {
		return p
	}
	if reason != "" {
		p.call.Reason, p.call.Detail = reason, detail
		return p
	}
	p.call.Arguments = json.RawMessage(p.call.Raw)
	return p
}

// withPart lets a refused part fail the whole message: its reason is the message's, and a
// finish reason that also failed it is named in the detail.
func withPart(failReason Reason, failDetail string, part refusedPart) (Reason, string) {
	if part.none() {
		return failReason, failDetail
	}
	if failReason != "" {
		return part.reason, part.detail + "; also: " + failDetail
	}
	return part.reason, part.detail
}

// errorResult is the Result of a body that is an error report: no prose, no call, incomplete.
func errorResult(part refusedPart) Result {
	return Result{Incomplete: part.reason, IncompleteDetail: part.detail}
}

func unrecognized(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnrecognized, fmt.Sprintf(format, args...))
}

// parseOpenAI reads an OpenAI chat.completion (choices[0]) or an Ollama /api/chat body.
func parseOpenAI(top object, round idScope) (Result, error) {
	var (
		msgRaw     json.RawMessage
		finishRaw  json.RawMessage
		ollama     bool
		choice     object
		choiceList []json.RawMessage
		err        error
	)
	if choices, ok := top.get("choices"); ok && kindOf(choices) != 'n' {
		var list []json.RawMessage
		if kindOf(choices) == '[' && json.Unmarshal(choices, &list) == nil && len(list) == 0 && top.has("error") {
			e, _ := top.get("error") // an error report with an empty choice list (streamed)
			return errorResult(errorPart("error", e)), nil
		}
		if kindOf(choices) != '[' || json.Unmarshal(choices, &list) != nil || len(list) == 0 {
			return Result{}, unrecognized("choices is not a non-empty array")
		}
		choice, err = decodeObject(list[0])
		if err != nil {
			return Result{}, unrecognized("choices[0]: %v", err)
		}
		choiceList = list
		if msgRaw, ok = choice.get("message"); !ok {
			return Result{}, unrecognized("choices[0] has no message")
		}
		finishRaw, _ = choice.get("finish_reason")
	} else if m, ok := top.get("message"); ok {
		msgRaw, ollama = m, true
		finishRaw, _ = top.get("done_reason")
	} else if top.has("error") {
		// An error report in place of a message (a 2xx body some servers send): named, never
		// mistaken for an empty answer.
		e, _ := top.get("error")
		return errorResult(errorPart("error", e)), nil
	} else {
		return Result{}, unrecognized("no choices and no message")
	}
	msg, err := decodeObject(msgRaw)
	if err != nil {
		return Result{}, unrecognized("message: %v", err)
	}
	finish, err := optString(finishRaw)
	if err != nil {
		return Result{}, unrecognized("finish reason: %v", err)
	}
	w := wireOpenAI
	if ollama {
		w = wireOllama
	}
	present := len(finishRaw) > 0 && kindOf(finishRaw) != 'n'
	failReason, failDetail := classifyFinish(w, finish, present)
	if ollama && len(finishRaw) == 0 && ollamaDone(top) {
		// Ollama before 0.3 (and its documentation's examples) end a finished answer with
		// done:true and no done_reason key (its Go type omits an empty one): done is the
		// finish signal there, so the answer ended normally. A done_reason that is sent,
		// null and "" included, is judged as always.
		failReason, failDetail = "", ""
	}
	var part refusedPart
	if ollama {
		part = ollamaParts(top, msg)
	} else {
		part = openAIParts(top, choiceList, choice, msg)
	}
	failReason, failDetail = withPart(failReason, failDetail, part)
	text, err := openAIText(msg)
	if err != nil {
		return Result{}, err
	}

	var props []proposal
	if tc, ok := msg.get("tool_calls"); ok && kindOf(tc) != 'n' {
		var list []json.RawMessage
		if kindOf(tc) != '[' || json.Unmarshal(tc, &list) != nil {
			return Result{}, unrecognized("message.tool_calls is not an array")
		}
		for i, entry := range list {
			props = append(props, openAICall(i, entry, ollama, round))
		}
	}
	// The deprecated single function_call is read whenever present (also beside an empty or a
	// non-empty tool_calls array): a call is never dropped because it came in the other field.
	if fc, ok := msg.get("function_call"); ok && kindOf(fc) != 'n' {
		// The deprecated single function_call carries no id. It is surfaced as a parse
		// failure rather than dropped (never silently lost, never executed).
		p := openAICall(len(props), []byte(`{"function":`+string(fc)+`}`), false, idScope{round: -1})
		p.idNote = "legacy message.function_call has no call id"
		props = append(props, p)
	}
	res := finish1(text, finish, failReason, failDetail, props)
	if !ollama {
		res.ProviderState = stateOf(msg, "extra_content", "thought_signature")
	}
	return res, nil
}

// stateOf is the object of obj's members named keys that are present and not null, verbatim
// (nil when none is): the provider state a message or call carries back (Result.ProviderState).
func stateOf(obj object, keys ...string) json.RawMessage {
	var b bytes.Buffer
	for _, k := range keys {
		v, ok := obj.get(k)
		if !ok || kindOf(v) == 'n' {
			continue
		}
		if b.Len() == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		writeJSONKey(&b, k)
		b.Write(v)
	}
	if b.Len() == 0 {
		return nil
	}
	b.WriteByte('}')
	return b.Bytes()
}

// ollamaDone reports an Ollama body's done:true.
func ollamaDone(top object) bool {
	d, ok := top.get("done")
	return ok && strings.TrimSpace(string(d)) == "true"
}

// openAIText returns message.content: a string, null/absent, or an array of parts whose
// "text" parts are concatenated (other part types carry no prose and are skipped).
func openAIText(msg object) (string, error) {
	c, ok := msg.get("content")
	if !ok || kindOf(c) == 'n' {
		return "", nil
	}
	switch kindOf(c) {
	case '"':
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return "", unrecognized("message.content: %v", err)
		}
		return s, nil
	case '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(c, &parts); err != nil {
			return "", unrecognized("message.content: %v", err)
		}
		var b bytes.Buffer
		for i, p := range parts {
			part, err := decodeObject(p)
			if err != nil {
				return "", unrecognized("message.content[%d]: %v", i, err)
			}
			if t, _ := optStringField(part, "type"); t != "text" {
				continue
			}
			s, err := optStringField(part, "text")
			if err != nil {
				return "", unrecognized("message.content[%d].text: %v", i, err)
			}
			b.WriteString(s)
		}
		return b.String(), nil
	}
	return "", unrecognized("message.content is a JSON %s", kindName(c))
}

// openAICall reads one entry of message.tool_calls.
func openAICall(i int, entry json.RawMessage, ollama bool, round idScope) proposal {
	p := proposal{call: Call{Index: i}}
	call, err := decodeObject(entry)
	if err != nil {
		p.call.Reason, p.call.Detail = ReasonInvalidJSON, "tool call: "+err.Error()
		p.call.Raw = string(entry)
		p.broken = true
		return p
	}
	if ollama {
		readID(&p, call, idScope{round: -1})
		if !p.hasID && p.idNote != idNotString {
			// Ollama's /api/chat has no call ids: synthesize a deterministic one.
			p.call.CallID, p.hasID, p.idNote, p.call.IDAssigned = "call_"+strconv.Itoa(i), true, "", true
		}
	} else {
		readID(&p, call, round)
		p.call.ProviderState = stateOf(call, "extra_content")
	}
	// Function.
	var fn object
	if fnRaw, ok := call.get("function"); ok {
		if fn, err = decodeObject(fnRaw); err != nil {
			p.call.Reason, p.call.Detail = ReasonInvalidJSON, "function: "+err.Error()
			p.call.Raw = string(fnRaw)
			p.broken = true
			return p
		}
	}
	nameOK := readName(&p, fn)
	argRaw, present := fn.get("arguments")
	var reason Reason
	var detail string
	switch {
	case !present || kindOf(argRaw) == 'n':
		reason, detail = ReasonArgumentsMissing, "function.arguments is missing"
	case ollama && kindOf(argRaw) == '{':
		p.call.Raw = string(argRaw)
		reason, detail = checkArguments(argRaw)
	case ollama && kindOf(argRaw) == '"':
		// A string is never decoded into arguments; the reason says what the text is: JSON
		// of another kind or double-encoded (arguments_not_object), or not JSON at all.
		p.call.Raw = string(argRaw)
		reason, detail = ReasonArgumentsNotObject, "Ollama function.arguments is a JSON string, not an object (strings are not decoded)"
		if text, err := unquoteStrict(argRaw); err == nil {
			if r, d := checkArguments([]byte(text)); r != "" && r != ReasonArgumentsNotObject {
				reason, detail = r, "Ollama function.arguments is a string that is not JSON: "+d
			}
		}
	case ollama:
		p.call.Raw = string(argRaw)
		reason, detail = ReasonArgumentsNotObject, "Ollama function.arguments is a JSON "+kindName(argRaw)+", not an object"
	case kindOf(argRaw) != '"':
		p.call.Raw = string(argRaw)
		reason, detail = ReasonArgumentsNotObject, "function.arguments is a JSON "+kindName(argRaw)+"; the OpenAI wire format requires a string holding a JSON object"
	default:
		s, err := unquoteStrict(argRaw)
		switch {
		case errors.Is(err, errInvalidUnicode):
			p.call.Raw = string(argRaw)
			reason, detail = ReasonInvalidUnicode, "function.arguments: "+err.Error()
		case err != nil:
			p.call.Raw = string(argRaw)
			reason, detail = ReasonInvalidJSON, "function.arguments: "+err.Error()
		case isBlank(s):
			p.call.Raw = s
			reason, detail = ReasonArgumentsEmpty, "function.arguments is empty or whitespace"
		default:
			p.call.Raw = s
			reason, detail = checkArguments([]byte(s))
		}
	}
	return p.settle(nameOK, reason, detail)
}

const idNotString = "id is not a valid JSON string"

// readID sets p's call id from obj["id"]. A structured call sent with no id (key absent or
// null) or an empty id gets AssignedCallID(round, index), marked IDAssigned, when round >= 0;
// a non-string id, or a missing one with round < 0, is noted for missing_call_id.
func readID(p *proposal, obj object, round idScope) {
	idRaw, ok := obj.get("id")
	if !ok || kindOf(idRaw) == 'n' {
		p.idNote = "id is missing"
		p.assign(round)
		return
	}
	id, err := unquoteStrict(idRaw)
	switch {
	case err != nil:
		p.idNote = idNotString
	case id == "":
		p.idNote = "id is empty"
		p.assign(round)
	default:
		p.call.CallID, p.hasID = id, true
	}
}

// idScope is what ids Airlock assigns are derived from: the turn token and the round
// (round < 0: assign none).
type idScope struct {
	turn  string
	round int
}

// assign gives a call without an id the id Airlock assigns (round >= 0 only).
func (p *proposal) assign(at idScope) {
	if at.round < 0 {
		return
	}
	p.call.CallID, p.call.IDAssigned, p.hasID, p.idNote = AssignedCallID(at.turn, at.round, p.call.Index), true, true, ""
}

// readName sets p's name from fn["name"] and records invalid_name when it does not match
// NamePattern. It reports whether the name is valid.
func readName(p *proposal, fn object) bool {
	nameRaw, ok := fn.get("name")
	if !ok || kindOf(nameRaw) == 'n' {
		p.call.Reason, p.call.Detail = ReasonInvalidName, "name is missing"
		return false
	}
	name, err := unquoteStrict(nameRaw)
	if err != nil {
		p.call.Reason, p.call.Detail = ReasonInvalidName, "name is not a valid string: "+err.Error()
		p.call.Name = string(nameRaw)
		return false
	}
	p.call.Name = name
	if !ValidName(name) {
		p.call.Reason, p.call.Detail = ReasonInvalidName, fmt.Sprintf("name %q does not match %s", name, NamePattern)
		return false
	}
	return true
}

// parseAnthropic reads an Anthropic message: text blocks are the prose, tool_use blocks the
// calls; other block types (thinking, server tools, …) are neither.
func parseAnthropic(top object, round idScope) (Result, error) {
	if t, ok := top.get("type"); ok {
		s, err := unquoteStrict(t)
		if err == nil && s == "error" {
			e, _ := top.get("error")
			if kindOf(e) == 'n' || len(e) == 0 {
				e = json.RawMessage(`"type is \"error\""`)
			}
			return errorResult(errorPart("error", e)), nil
		}
		if err != nil || s != "message" {
			return Result{}, unrecognized("type is not \"message\"")
		}
	}
	part := streamFault(top)
	if part.none() {
		part = checkKeys("", top, anthropicTop)
	}
	contentRaw, ok := top.get("content")
	if !ok || kindOf(contentRaw) != '[' {
		return Result{}, unrecognized("content is not an array of blocks")
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(contentRaw, &blocks); err != nil {
		return Result{}, unrecognized("content: %v", err)
	}
	stopRaw, _ := top.get("stop_reason")
	stop, err := optString(stopRaw)
	if err != nil {
		return Result{}, unrecognized("stop_reason: %v", err)
	}
	var text bytes.Buffer
	var props []proposal
	for bi, braw := range blocks {
		block, err := decodeObject(braw)
		if err != nil {
			return Result{}, unrecognized("content[%d]: %v", bi, err)
		}
		typ, _ := optStringField(block, "type")
		if part.none() {
			part = anthropicBlock(fmt.Sprintf("content[%d]", bi), block, typ)
		}
		switch typ {
		case "text":
			s, err := optStringField(block, "text")
			if err != nil {
				return Result{}, unrecognized("content[%d].text: %v", bi, err)
			}
			text.WriteString(s)
		case "tool_use":
			props = append(props, anthropicCall(len(props), block, round))
		}
	}
	failReason, failDetail := classifyFinish(wireAnthropic, stop, len(stopRaw) > 0 && kindOf(stopRaw) != 'n')
	failReason, failDetail = withPart(failReason, failDetail, part)
	return finish1(text.String(), stop, failReason, failDetail, props), nil
}

// anthropicCall reads one tool_use block.
func anthropicCall(i int, block object, round idScope) proposal {
	p := proposal{call: Call{Index: i}}
	readID(&p, block, round)
	nameOK := readName(&p, block)
	in, present := block.get("input")
	partial, isPartial := block.get(PartialInputKey)
	var reason Reason
	var detail string
	switch {
	case isPartial:
		// The streamed input's pieces did not join into one JSON value: judged as the
		// argument text it is, never as arguments.
		text, _ := unquoteStrict(partial)
		p.call.Raw = text
		if reason, detail = checkArguments([]byte(text)); reason == "" {
			reason, detail = ReasonInvalidJSON, "the streamed input is not one JSON value"
		} else {
			detail = "the streamed input (input_json_delta pieces joined): " + detail
		}
	case !present || kindOf(in) == 'n':
		reason, detail = ReasonArgumentsMissing, "tool_use.input is missing"
	case kindOf(in) != '{':
		p.call.Raw = string(in)
		reason, detail = ReasonArgumentsNotObject, "tool_use.input is a JSON "+kindName(in)+", not an object (strings are not decoded)"
	default:
		p.call.Raw = string(in)
		reason, detail = checkArguments(in)
	}
	return p.settle(nameOK, reason, detail)
}

// finish1 applies the message-wide rules and builds the Result. failReason is what the
// finish reason makes of every call (truncated, abnormal_finish, or "" for a normal end) and
// failDetail its Detail. A shared id fails every call of the message with duplicate_call_id,
// those with a unique id or no id included: the message was assembled wrongly, so none of its
// calls can be trusted.
func finish1(text, finish string, failReason Reason, failDetail string, props []proposal) Result {
	res := Result{Text: text, FinishReason: finish, Incomplete: failReason}
	if failReason != "" {
		res.IncompleteDetail = failDetail
	}
	if len(props) > MaxCallsPerMessage {
		res.Incomplete = ReasonUnreadPart
		res.IncompleteDetail = fmt.Sprintf("%d tool calls in one message, over the limit of %d; the whole message is rejected and no call of it is read", len(props), MaxCallsPerMessage)
		return res
	}
	if len(props) == 0 {
		if name, how, ok := detectEmbedded(text); ok {
			res.Calls = []Call{{
				Index:  0,
				Name:   name,
				Raw:    text,
				Reason: ReasonEmbeddedToolCallText,
				Detail: "tool-call-shaped text in content (" + how + ") with no structured call; text is never promoted to a call",
			}}
		}
		return res
	}
	unclash(props)
	count := make(map[string]int)
	var shared []int // indexes of calls whose id another call also uses
	for _, p := range props {
		if p.hasID {
			count[p.call.CallID]++
		}
	}
	lists := indexLists{} // id → "#1, #4, #9 and 3 more", built once per id
	for i, p := range props {
		if p.hasID && count[p.call.CallID] > 1 {
			shared = append(shared, i)
		}
	}
	also := ""
	if failReason != "" {
		also = "; also: " + failDetail
	}
	res.Calls = make([]Call, len(props))
	for i, p := range props {
		c := p.call
		switch {
		case len(shared) > 0 && p.hasID && count[c.CallID] > 1:
			c.Reason, c.Detail = ReasonDuplicateCallID, fmt.Sprintf("call id %s is used by %d calls of the message (calls %s), so the message was assembled wrongly and none of its calls is trusted%s", quoteBounded(c.CallID), count[c.CallID], lists.of(props, c.CallID), also)
		case len(shared) > 0:
			first := props[shared[0]].call.CallID
			own := "this call's id is unique"
			if !p.hasID {
				own = "this call has no id"
			}
			c.Reason, c.Detail = ReasonDuplicateCallID, fmt.Sprintf("%s, but call id %s is used by %d calls of the same message (calls %s), so the message was assembled wrongly and none of its calls is trusted%s", own, quoteBounded(first), count[first], lists.of(props, first), also)
		case c.Reason == ReasonInvalidName:
			c.Detail += also
		case failReason != "":
			c.Reason, c.Detail = failReason, failDetail
		case !p.hasID && !p.broken:
			c.Reason, c.Detail = ReasonMissingCallID, p.idNote
		}
		if c.Reason != "" {
			c.Arguments = nil
		}
		res.Calls[i] = c
	}
	return res
}

// indexLists caches, per id, the bounded list of the calls (1-based) that use it.
type indexLists map[string]string

// maxListedCalls bounds how many calls a duplicate_call_id detail names: a hostile message
// of thousands of calls sharing one id must not make details (and the parse result kept in
// workflow history) grow with the square of its size.
const maxListedCalls = 3

// of names, 1-based, the calls whose id is id, e.g. "#1 and #3", or "#1, #2, #3 and 997 more".
func (l indexLists) of(props []proposal, id string) string {
	if s, ok := l[id]; ok {
		return s
	}
	var named []string
	n := 0
	for i, p := range props {
		if p.hasID && p.call.CallID == id {
			if n < maxListedCalls {
				named = append(named, "#"+strconv.Itoa(i+1))
			}
			n++
		}
	}
	var s string
	switch {
	case n > len(named):
		s = strings.Join(named, ", ") + " and " + strconv.Itoa(n-len(named)) + " more"
	case len(named) > 1:
		s = strings.Join(named[:len(named)-1], ", ") + " and " + named[len(named)-1]
	case len(named) == 1:
		s = named[0]
	}
	l[id] = s
	return s
}

// unclash keeps an id Airlock assigned from equalling an id the model sent on another call of
// the message: it appends "-1", "-2", … until the id is unique, so a valid message is never
// failed as duplicate_call_id because of Airlock's own id (deterministic: same input, same ids).
func unclash(props []proposal) {
	taken := map[string]bool{}
	for _, p := range props {
		if p.hasID && !p.call.IDAssigned {
			taken[p.call.CallID] = true
		}
	}
	for i := range props {
		p := &props[i]
		if !p.hasID || !p.call.IDAssigned {
			continue
		}
		id := p.call.CallID
		for k := 1; taken[id]; k++ {
			id = p.call.CallID + "-" + strconv.Itoa(k)
		}
		p.call.CallID = id
		taken[id] = true
	}
}

// optString decodes an optional string value (absent or null → "").
func optString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || kindOf(raw) == 'n' {
		return "", nil
	}
	var s string
	if kindOf(raw) != '"' {
		return "", fmt.Errorf("a JSON %s, not a string", kindName(raw))
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

// optStringField decodes obj[key] as an optional string.
func optStringField(obj object, key string) (string, error) {
	v, _ := obj.get(key)
	return optString(v)
}

// isBlank reports whether s is empty or only whitespace (Unicode white space included).
func isBlank(s string) bool { return len(bytes.TrimSpace([]byte(s))) == 0 }
