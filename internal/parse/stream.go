package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file assembles the streamed forms of the three formats into the body the same response
// has unstreamed, so one parser (and one part model) judges both (issue 22, items 2 and 3).
// The assemblers never decode what the model wrote: string deltas are joined as the raw bytes
// between their quotes (a cut inside a multi-byte character or between the two halves of a
// surrogate pair is joined back exactly), and the strict parser reads the joined literal.
// Every part of an event the assembler does not fold is carried over to the assembled
// message, where the part model refuses it; an event sequence that cannot be one message
// (conflicting ids, an undocumented event, no final event) is recorded under StreamFaultKey,
// which fails the message with ReasonStreamFault.

// ReasonStreamFault: the streamed response could not be assembled into one message: a chunk or
// event that is not a JSON object, an event type or delta type no provider documents, two
// different ids or types for one call, a delta of the wrong JSON kind, or a stream that ended
// before its final event (OpenAI: a finish_reason; Anthropic: message_stop; Ollama: done).
// Every call of the message fails.
const ReasonStreamFault Reason = "stream_fault"

// StreamFaultKey is the top-level member an assembled body carries when its stream was faulty;
// its value is the detail. The part model refuses any body that has it.
const StreamFaultKey = "airlock_stream_fault"

func streamFaultRule(where string, raw json.RawMessage) refusedPart {
	s, err := unquoteStrict(raw)
	if err != nil {
		s = string(raw)
	}
	return refusedPart{ReasonStreamFault, "the stream could not be assembled into one message: " + quoteBounded(s) + "; the whole message is rejected"}
}

// streamFault is the refused part of an assembled body whose stream was faulty: it comes
// before every other part, since what follows from a faulty stream is not what was sent.
func streamFault(top object) refusedPart {
	if v, ok := top.get(StreamFaultKey); ok {
		return streamFaultRule(StreamFaultKey, v)
	}
	return refusedPart{}
}

func init() {
	openAITop[StreamFaultKey] = streamFaultRule
	ollamaTop[StreamFaultKey] = streamFaultRule
	anthropicTop[StreamFaultKey] = streamFaultRule
}

// DeltaKind names what a Delta carries.
type DeltaKind string

// Delta kinds, in the order a message's parts arrive.
const (
	// DeltaText is a piece of the answer's prose (Text).
	DeltaText DeltaKind = "text"
	// DeltaCallStart opens call Call (0-based in the message) with ID and Name as the provider
	// sent them so far.
	DeltaCallStart DeltaKind = "call_start"
	// DeltaCallArgs is a piece of call Call's argument text (Text).
	DeltaCallArgs DeltaKind = "call_args"
)

// Delta is one displayable piece of a streamed message, for client apps while the message
// streams. It is display only: no call is acted on before the whole message is assembled and
// parsed. Text is the piece decoded for display: a character cut between pieces is held back
// until it is whole, bytes that are not UTF-8 show as U+FFFD (here only, never in the
// assembled body).
type Delta struct {
	Kind DeltaKind `json:"kind"`
	Call int       `json:"call,omitempty"`
	ID   string    `json:"id,omitempty"`
	Name string    `json:"name,omitempty"`
	Text string    `json:"text,omitempty"`
}

// Assembler folds one provider stream, event by event, into the body of the same response
// unstreamed. Add takes one event's data (an SSE data payload or an NDJSON line) and returns
// its displayable deltas; Body returns the assembled body for Parse. Neither fails on what
// the provider sent: faults are carried in the body (StreamFaultKey, refused parts).
type Assembler interface {
	Add(event []byte) []Delta
	Body() []byte
	// Done reports that the stream's final event arrived (a later event is a fault).
	Done() bool
}

// NewAssembler returns the assembler of format: FormatOpenAI for chat.completion.chunk SSE
// data, FormatAnthropic for Messages stream event data; NewOllamaAssembler reads Ollama's
// NDJSON lines.
func NewAssembler(format Format) (Assembler, error) {
	switch format {
	case FormatOpenAI:
		return &openAIAssembler{choices: map[int]*choiceAsm{}}, nil
	case FormatAnthropic:
		return &anthropicAssembler{}, nil
	}
	return nil, fmt.Errorf("%w: no stream assembler for format %q", ErrUnrecognized, string(format))
}

// NewOllamaAssembler returns the assembler of Ollama /api/chat NDJSON streams.
func NewOllamaAssembler() Assembler { return &ollamaAssembler{} }

// ---- shared pieces ----

// members is an ordered JSON object under construction (first insertion fixes the order).
type members struct {
	keys []string
	vals map[string]json.RawMessage
}

func (m *members) set(k string, v json.RawMessage) {
	if m.vals == nil {
		m.vals = map[string]json.RawMessage{}
	}
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = append(json.RawMessage(nil), v...)
}

func (m *members) has(k string) bool { _, ok := m.vals[k]; return ok }

func (m *members) write(b *bytes.Buffer, first bool) bool {
	for _, k := range m.keys {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONKey(b, k)
		b.Write(m.vals[k])
	}
	return first
}

func writeJSONKey(b *bytes.Buffer, k string) {
	kb, _ := json.Marshal(k) // a key decoded from JSON always encodes
	b.Write(kb)
	b.WriteByte(':')
}

// strcat joins string deltas as raw literal bytes. A non-string value is kept as sent when it
// is the only one (so the parser judges it as the unstreamed body would); mixed with string
// pieces it is a fault.
type strcat struct {
	inner bytes.Buffer
	seen  bool
	other json.RawMessage
	shown shower
}

// shower turns pieces of text into displayable deltas: a multi-byte character cut between
// two pieces is held back until its last byte arrives, so a client sees it whole; bytes that
// are not UTF-8 show as U+FFFD (the assembled body keeps them as they are).
type shower struct{ carry []byte }

func (sh *shower) show(piece []byte) string {
	buf := append(sh.carry, piece...)
	end := len(buf)
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				end = i
			}
			break
		}
	}
	sh.carry = append([]byte(nil), buf[end:]...)
	return strings.ToValidUTF8(string(buf[:end]), "\uFFFD")
}

// add folds one value; it returns the piece decoded for display and a fault ("" none).
func (s *strcat) add(v json.RawMessage) (string, string) {
	v = bytes.TrimSpace(v)
	switch {
	case kindOf(v) == 'n':
		return "", ""
	case kindOf(v) == '"' && s.other == nil:
		s.seen = true
		s.inner.Write(v[1 : len(v)-1])
		return s.shown.show([]byte(rawInner(v))), ""
	case !s.seen && s.other == nil:
		s.other = append(json.RawMessage(nil), v...)
		return "", ""
	}
	return "", "a delta of kind " + kindName(v) + " mixed with string deltas"
}

func (s *strcat) present() bool { return s.seen || s.other != nil }

func (s *strcat) value() json.RawMessage {
	if s.other != nil {
		return s.other
	}
	return json.RawMessage(`"` + s.inner.String() + `"`)
}

// faults collects the first few stream faults.
type faults []string

func (f *faults) add(format string, args ...any) {
	if len(*f) < 4 {
		*f = append(*f, fmt.Sprintf(format, args...))
	}
}

func (f faults) write(b *bytes.Buffer, first bool) bool {
	if len(f) == 0 {
		return first
	}
	if !first {
		b.WriteByte(',')
	}
	writeJSONKey(b, StreamFaultKey)
	v, _ := json.Marshal(strings.Join(f, "; "))
	b.Write(v)
	return false
}

// ---- OpenAI chat.completion.chunk ----

type openAIAssembler struct {
	top     members // top-level members other than object and choices (last value wins)
	object  json.RawMessage
	choices map[int]*choiceAsm
	faults  faults
	events  int
}

type choiceAsm struct {
	extra    members // choice members other than index, delta, finish_reason, logprobs
	finish   json.RawMessage
	role     json.RawMessage
	strs     map[string]*strcat // content, refusal, reasoning_content, reasoning
	strOrder []string
	msg      members // other message members (carried for the part model)
	calls    []*callAsm
	byIndex  map[int]*callAsm
	fc       *callAsm // legacy function_call
	lp       bool
	lpParts  map[string][]json.RawMessage // logprobs content / refusal entries
}

type callAsm struct {
	verbatim json.RawMessage // an entry without index, or one that is not an object
	id, typ  json.RawMessage
	extra    members
	fnExtra  members
	hasFn    bool
	name     strcat
	args     strcat
}

var openAIStreamStrings = map[string]bool{"content": true, "refusal": true, "reasoning_content": true, "reasoning": true}

func (a *openAIAssembler) Done() bool {
	for _, c := range a.choices {
		if len(c.finish) == 0 || kindOf(c.finish) == 'n' {
			return false
		}
	}
	return len(a.choices) > 0
}

func (a *openAIAssembler) Add(event []byte) []Delta {
	a.events++
	top, err := decodeObject(bytes.TrimSpace(event))
	if err != nil {
		a.faults.add("chunk %d is not a JSON object: %v", a.events, err)
		return nil
	}
	var out []Delta
	noChoice := false
	if ch, ok := top.get("choices"); ok && strings.TrimSpace(string(ch)) == "[]" {
		noChoice = true
	}
	for _, f := range top {
		switch f.key {
		case "object":
			s, err := unquoteStrict(f.val)
			switch {
			case err == nil && s == "chat.completion.chunk":
			case err == nil && s == "" && noChoice:
				// Azure OpenAI's first chunk annotates the prompt (prompt_filter_results)
				// with an empty object, id and model and no choice: it carries no part of
				// the message, so its empty object names nothing.
			default:
				a.object = f.val // carried: the part model refuses it
			}
		case "obfuscation":
			// Stream-only padding OpenAI adds to chunks (length hiding); carries nothing.
		case "choices":
			var list []json.RawMessage
			if kindOf(f.val) != '[' || json.Unmarshal(f.val, &list) != nil {
				a.faults.add("chunk %d: choices is not an array", a.events)
				continue
			}
			for _, c := range list {
				out = append(out, a.addChoice(c)...)
			}
		case "error":
			if kindOf(f.val) != 'n' && !a.top.has("error") {
				a.top.set("error", f.val) // the first error is kept
			}
		default:
			a.top.set(f.key, f.val)
		}
	}
	return out
}

func (a *openAIAssembler) addChoice(raw json.RawMessage) []Delta {
	ch, err := decodeObject(raw)
	if err != nil {
		a.faults.add("chunk %d: a choice is not a JSON object", a.events)
		return nil
	}
	idxRaw, _ := ch.get("index")
	idx, err := strconv.Atoi(strings.TrimSpace(string(idxRaw)))
	if err != nil || idx < 0 || idx > 1<<16 {
		a.faults.add("chunk %d: a choice's index is %s", a.events, quoteBounded(string(idxRaw)))
		return nil
	}
	c := a.choices[idx]
	if c == nil {
		c = &choiceAsm{strs: map[string]*strcat{}, byIndex: map[int]*callAsm{}, lpParts: map[string][]json.RawMessage{}}
		a.choices[idx] = c
	}
	var out []Delta
	for _, f := range ch {
		switch f.key {
		case "index":
		case "finish_reason":
			if kindOf(f.val) == 'n' {
				continue
			}
			if len(c.finish) > 0 && !bytes.Equal(c.finish, f.val) {
				a.faults.add("choice %d has two finish reasons", idx)
			}
			c.finish = append(json.RawMessage(nil), f.val...)
		case "logprobs":
			a.addLogprobs(c, f.val)
		case "delta":
			out = append(out, a.addDelta(idx, c, f.val)...)
		default:
			c.extra.set(f.key, f.val)
		}
	}
	if idx != 0 {
		return nil // only the first choice is shown; another one fails the message anyway
	}
	return out
}

func (a *openAIAssembler) addLogprobs(c *choiceAsm, v json.RawMessage) {
	if kindOf(v) == 'n' {
		return
	}
	obj, err := decodeObject(v)
	if err != nil {
		a.faults.add("logprobs is not a JSON object")
		return
	}
	c.lp = true
	for _, f := range obj {
		var list []json.RawMessage
		if kindOf(f.val) == 'n' {
			if _, ok := c.lpParts[f.key]; !ok {
				c.lpParts[f.key] = nil
			}
			continue
		}
		if kindOf(f.val) != '[' || json.Unmarshal(f.val, &list) != nil {
			a.faults.add("logprobs.%s is not an array", quoteBounded(f.key))
			continue
		}
		c.lpParts[f.key] = append(c.lpParts[f.key], list...)
	}
}

func (a *openAIAssembler) addDelta(idx int, c *choiceAsm, v json.RawMessage) []Delta {
	if kindOf(v) == 'n' {
		return nil
	}
	d, err := decodeObject(v)
	if err != nil {
		a.faults.add("chunk %d: delta is not a JSON object", a.events)
		return nil
	}
	var out []Delta
	reasoningOnly := true
	for _, f := range d {
		switch f.key {
		case "channel", "reasoning", "reasoning_content", "role":
		default:
			reasoningOnly = false
		}
	}
	for _, f := range d {
		switch {
		case f.key == "channel" && reasoningOnly && isString(f.val, "analysis"):
			// gpt-oss on Groq labels its reasoning deltas with the harmony channel
			// "analysis"; on a delta that carries only reasoning it says nothing more. On
			// any other delta it is carried and refused (the part model's channel rule).
		case f.key == "role":
			if kindOf(f.val) == 'n' {
				continue
			}
			if len(c.role) > 0 && !bytes.Equal(c.role, f.val) {
				a.faults.add("choice %d has two roles", idx)
			}
			c.role = append(json.RawMessage(nil), f.val...)
		case openAIStreamStrings[f.key]:
			s := c.strs[f.key]
			if s == nil {
				s = &strcat{}
				c.strs[f.key] = s
				c.strOrder = append(c.strOrder, f.key)
			}
			shown, fault := s.add(f.val)
			if fault != "" {
				a.faults.add("delta.%s: %s", f.key, fault)
			}
			if f.key == "content" && shown != "" {
				out = append(out, Delta{Kind: DeltaText, Text: shown})
			}
		case f.key == "tool_calls":
			out = append(out, a.addCalls(c, f.val)...)
		case f.key == "function_call":
			if kindOf(f.val) == 'n' {
				continue
			}
			if c.fc == nil {
				c.fc = &callAsm{}
			}
			fn, err := decodeObject(f.val)
			if err != nil {
				c.fc.verbatim = append(json.RawMessage(nil), f.val...)
				continue
			}
			a.addFunction("function_call", c.fc, fn)
		default:
			// audio, annotations, anything undocumented: carried whole (the last one wins,
			// and any non-null value of an unread part fails the message all the same).
			c.msg.set(f.key, f.val)
		}
	}
	return out
}

func (a *openAIAssembler) addCalls(c *choiceAsm, v json.RawMessage) []Delta {
	if kindOf(v) == 'n' {
		return nil
	}
	var list []json.RawMessage
	if kindOf(v) != '[' || json.Unmarshal(v, &list) != nil {
		a.faults.add("delta.tool_calls is not an array")
		return nil
	}
	var out []Delta
	for _, e := range list {
		obj, err := decodeObject(e)
		idxRaw, hasIdx := obj.get("index")
		if err != nil || !hasIdx {
			// A complete call sent without a stream index (or not an object): kept verbatim,
			// as the unstreamed body would have it.
			c.calls = append(c.calls, &callAsm{verbatim: append(json.RawMessage(nil), e...)})
			continue
		}
		idx, err := strconv.Atoi(strings.TrimSpace(string(idxRaw)))
		if err != nil || idx < 0 {
			a.faults.add("a tool call's index is %s", quoteBounded(string(idxRaw)))
			continue
		}
		call := c.byIndex[idx]
		fresh := call == nil
		if fresh {
			call = &callAsm{}
			c.byIndex[idx] = call
			c.calls = append(c.calls, call)
		}
		pos := slicesIndex(c.calls, call)
		var argPieces []string
		for _, f := range obj {
			switch f.key {
			case "index":
			case "id", "type":
				dst := &call.id
				if f.key == "type" {
					dst = &call.typ
				}
				if kindOf(f.val) == 'n' {
					continue
				}
				// "" is a server's way of sending no id or type on a continuation chunk:
				// it neither conflicts with nor replaces the value the call already has.
				if isEmptyString(f.val) && len(*dst) > 0 {
					continue
				}
				if len(*dst) > 0 && !isEmptyString(*dst) && !bytes.Equal(*dst, f.val) {
					a.faults.add("tool call %d has two different %ss (%s, then %s)", idx, f.key, excerptJSON(*dst), excerptJSON(f.val))
				}
				*dst = append(json.RawMessage(nil), f.val...)
			case "function":
				fn, err := decodeObject(f.val)
				if err != nil {
					a.faults.add("tool call %d: function is not a JSON object", idx)
					continue
				}
				argPieces = append(argPieces, a.addFunction(fmt.Sprintf("tool call %d", idx), call, fn)...)
			default:
				call.extra.set(f.key, f.val)
			}
		}
		if fresh {
			var id, name string
			_ = json.Unmarshal(call.id, &id)
			if call.name.seen {
				name, _ = unquoteStrict(call.name.value())
			}
			out = append(out, Delta{Kind: DeltaCallStart, Call: pos, ID: id, Name: name})
		}
		for _, p := range argPieces {
			out = append(out, Delta{Kind: DeltaCallArgs, Call: pos, Text: p})
		}
	}
	return out
}

// addFunction folds a function delta (name and arguments pieces) and returns the shown
// argument pieces. A name arrives whole in one delta (OpenAI and every documented compatible
// server): a second non-empty name for the same call is a stream fault, whether it repeats
// the first (servers that resend the name with every chunk) or differs, because joining the
// pieces would invent a name ("read_fileread_file") and picking one would be a guess.
func (a *openAIAssembler) addFunction(label string, call *callAsm, fn object) []string {
	call.hasFn = true
	var pieces []string
	for _, f := range fn {
		switch f.key {
		case "name":
			if call.name.seen && call.name.inner.Len() > 0 && kindOf(f.val) == '"' && !isEmptyString(f.val) {
				a.faults.add("%s: name sent again (%s after %s): the stream cannot be assembled exactly", label, excerptJSON(f.val), quoteBounded(call.name.inner.String()))
				continue
			}
			if _, fault := call.name.add(f.val); fault != "" {
				a.faults.add("function.name: %s", fault)
			}
		case "arguments":
			shown, fault := call.args.add(f.val)
			if fault != "" {
				a.faults.add("function.arguments: %s", fault)
			}
			if shown != "" {
				pieces = append(pieces, shown)
			}
		default:
			call.fnExtra.set(f.key, f.val)
		}
	}
	return pieces
}

func slicesIndex(calls []*callAsm, c *callAsm) int {
	for i, x := range calls {
		if x == c {
			return i
		}
	}
	return -1
}

func (a *openAIAssembler) Body() []byte {
	var b bytes.Buffer
	b.WriteString(`{`)
	if a.object != nil {
		writeJSONKey(&b, "object")
		b.Write(a.object)
	} else {
		b.WriteString(`"object":"chat.completion"`)
	}
	b.WriteString(`,"choices":[`)
	idxs := make([]int, 0, len(a.choices))
	for i := range a.choices {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	for n, i := range idxs {
		if n > 0 {
			b.WriteByte(',')
		}
		a.writeChoice(&b, i, a.choices[i])
	}
	b.WriteByte(']')
	first := a.top.write(&b, false)
	f := a.faults
	if len(a.choices) > 0 && !a.Done() {
		f = append(append(faults(nil), f...), "the stream ended before every choice had a finish_reason")
	}
	if len(a.choices) == 0 && !a.top.has("error") {
		f = append(append(faults(nil), f...), "the stream carried no choice")
	}
	f.write(&b, first)
	b.WriteByte('}')
	return b.Bytes()
}

func (a *openAIAssembler) writeChoice(b *bytes.Buffer, idx int, c *choiceAsm) {
	fmt.Fprintf(b, `{"index":%d,"message":{`, idx)
	if len(c.role) > 0 {
		b.WriteString(`"role":`)
		b.Write(c.role)
	} else {
		b.WriteString(`"role":"assistant"`)
	}
	// Each string member is written once: joined from its pieces, or null when every delta
	// sent it as null (OpenAI's first tool-call delta carries "content":null and
	// "refusal":null, which the unstreamed message has as the same nulls). content is always
	// written, as the unstreamed message always has it.
	if !c.strs["content"].presentOr() {
		b.WriteString(`,"content":null`)
	}
	for _, k := range c.strOrder {
		s := c.strs[k]
		if !s.present() {
			if k != "content" {
				b.WriteByte(',')
				writeJSONKey(b, k)
				b.WriteString("null")
			}
			continue
		}
		b.WriteByte(',')
		writeJSONKey(b, k)
		b.Write(s.value())
	}
	if len(c.calls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		for i, call := range c.calls {
			if i > 0 {
				b.WriteByte(',')
			}
			call.write(b)
		}
		b.WriteByte(']')
	}
	if c.fc != nil {
		b.WriteString(`,"function_call":`)
		if c.fc.verbatim != nil {
			b.Write(c.fc.verbatim)
		} else {
			c.fc.writeFunction(b)
		}
	}
	c.msg.write(b, false)
	b.WriteString(`},"finish_reason":`)
	if len(c.finish) > 0 {
		b.Write(c.finish)
	} else {
		b.WriteString(`null`)
	}
	if c.lp {
		b.WriteString(`,"logprobs":{`)
		keys := make([]string, 0, len(c.lpParts))
		for k := range c.lpParts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONKey(b, k)
			if c.lpParts[k] == nil {
				b.WriteString("null")
				continue
			}
			b.WriteByte('[')
			for j, e := range c.lpParts[k] {
				if j > 0 {
					b.WriteByte(',')
				}
				b.Write(e)
			}
			b.WriteByte(']')
		}
		b.WriteByte('}')
	}
	c.extra.write(b, false)
	b.WriteByte('}')
}

// presentOr reports whether a (possibly nil) strcat holds a value.
func (s *strcat) presentOr() bool { return s != nil && s.present() }

func (c *callAsm) write(b *bytes.Buffer) {
	if c.verbatim != nil {
		b.Write(c.verbatim)
		return
	}
	b.WriteByte('{')
	first := true
	if len(c.id) > 0 {
		b.WriteString(`"id":`)
		b.Write(c.id)
		first = false
	}
	if len(c.typ) > 0 {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"type":`)
		b.Write(c.typ)
		first = false
	}
	if c.hasFn {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"function":`)
		c.writeFunction(b)
		first = false
	}
	c.extra.write(b, first)
	b.WriteByte('}')
}

func (c *callAsm) writeFunction(b *bytes.Buffer) {
	b.WriteByte('{')
	first := true
	if c.name.present() {
		b.WriteString(`"name":`)
		b.Write(c.name.value())
		first = false
	}
	if c.args.present() {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"arguments":`)
		b.Write(c.args.value())
		first = false
	}
	c.fnExtra.write(b, first)
	b.WriteByte('}')
}

// ---- Ollama /api/chat NDJSON ----

type ollamaAssembler struct {
	top     members // top-level members other than message (last value wins)
	msg     members // message members other than content and thinking
	content strcat
	think   strcat
	calls   []json.RawMessage
	faults  faults
	done    bool
	lines   int
}

func (a *ollamaAssembler) Done() bool { return a.done }

func (a *ollamaAssembler) Add(line []byte) []Delta {
	a.lines++
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if a.done {
		a.faults.add("line %d arrived after done", a.lines)
	}
	top, err := decodeObject(line)
	if err != nil {
		a.faults.add("line %d is not a JSON object: %v", a.lines, err)
		return nil
	}
	var out []Delta
	for _, f := range top {
		switch f.key {
		case "message":
			m, err := decodeObject(f.val)
			if err != nil {
				a.faults.add("line %d: message is not a JSON object", a.lines)
				continue
			}
			for _, mf := range m {
				switch mf.key {
				case "content":
					shown, fault := a.content.add(mf.val)
					if fault != "" {
						a.faults.add("message.content: %s", fault)
					}
					if shown != "" {
						out = append(out, Delta{Kind: DeltaText, Text: shown})
					}
				case "thinking":
					if _, fault := a.think.add(mf.val); fault != "" {
						a.faults.add("message.thinking: %s", fault)
					}
				case "tool_calls":
					var list []json.RawMessage
					if kindOf(mf.val) == 'n' {
						continue
					}
					if kindOf(mf.val) != '[' || json.Unmarshal(mf.val, &list) != nil {
						a.faults.add("message.tool_calls is not an array")
						continue
					}
					for _, e := range list {
						// Ollama sends each call whole, in one line.
						pos := len(a.calls)
						a.calls = append(a.calls, append(json.RawMessage(nil), e...))
						var shown struct {
							Function struct {
								Name      string          `json:"name"`
								Arguments json.RawMessage `json:"arguments"`
							} `json:"function"`
						}
						_ = json.Unmarshal(e, &shown) // display only
						out = append(out, Delta{Kind: DeltaCallStart, Call: pos, Name: shown.Function.Name},
							Delta{Kind: DeltaCallArgs, Call: pos, Text: string(shown.Function.Arguments)})
					}
				default:
					a.msg.set(mf.key, mf.val)
				}
			}
		case "done":
			a.top.set(f.key, f.val)
			a.done = strings.TrimSpace(string(f.val)) == "true"
		default:
			a.top.set(f.key, f.val)
		}
	}
	return out
}

func (a *ollamaAssembler) Body() []byte {
	var b bytes.Buffer
	b.WriteString(`{"message":{`)
	first := true
	if a.content.present() {
		b.WriteString(`"content":`)
		b.Write(a.content.value())
		first = false
	}
	if a.think.present() {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"thinking":`)
		b.Write(a.think.value())
		first = false
	}
	if len(a.calls) > 0 {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"tool_calls":[`)
		for i, c := range a.calls {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(c)
		}
		b.WriteByte(']')
		first = false
	}
	a.msg.write(&b, first)
	b.WriteByte('}')
	a.top.write(&b, false)
	f := a.faults
	if !a.done && !a.top.has("error") {
		f = append(append(faults(nil), f...), "the stream ended before a line with done true")
	}
	f.write(&b, false)
	b.WriteByte('}')
	return b.Bytes()
}

// ---- Anthropic Messages stream events ----

type anthropicAssembler struct {
	msg     members // message members other than content (message_start, then message_delta)
	started bool
	blocks  []*blockAsm
	errEv   json.RawMessage
	faults  faults
	stopped bool
	events  int
}

type blockAsm struct {
	m        members // the content_block_start block, strings and input replaced below
	text     strcat
	thinking strcat
	sig      strcat
	input    bytes.Buffer // input_json_delta pieces (raw JSON text)
	inputSet bool
	inShown  shower
	cites    []json.RawMessage
	typ      string
	closed   bool
}

func (a *anthropicAssembler) Done() bool { return a.stopped || a.errEv != nil }

func (a *anthropicAssembler) Add(event []byte) []Delta {
	a.events++
	ev, err := decodeObject(bytes.TrimSpace(event))
	if err != nil {
		a.faults.add("event %d is not a JSON object: %v", a.events, err)
		return nil
	}
	typ, _ := optStringField(ev, "type")
	if a.stopped && typ != "ping" {
		a.faults.add("event %s arrived after message_stop", quoteBounded(typ))
	}
	switch typ {
	case "ping":
		return nil
	case "error":
		if a.errEv == nil {
			e, _ := ev.get("error")
			a.errEv = append(json.RawMessage(nil), e...)
		}
		return nil
	case "message_start":
		m, _ := ev.get("message")
		obj, err := decodeObject(m)
		if err != nil || a.started {
			a.faults.add("message_start: a second one, or not a message object")
			return nil
		}
		a.started = true
		for _, f := range obj {
			if f.key == "content" {
				var list []json.RawMessage
				if json.Unmarshal(f.val, &list) != nil || len(list) != 0 {
					a.faults.add("message_start carries content blocks")
				}
				continue
			}
			a.msg.set(f.key, f.val)
		}
		return nil
	case "message_delta":
		d, _ := ev.get("delta")
		obj, err := decodeObject(d)
		if err != nil {
			a.faults.add("message_delta: delta is not an object")
			return nil
		}
		for _, f := range obj {
			a.msg.set(f.key, f.val)
		}
		if u, ok := ev.get("usage"); ok {
			a.msg.set("usage", u)
		}
		for _, f := range ev {
			if f.key != "type" && f.key != "delta" && f.key != "usage" {
				a.msg.set(f.key, f.val) // carried for the part model
			}
		}
		return nil
	case "message_stop":
		a.stopped = true
		return nil
	case "content_block_start", "content_block_delta", "content_block_stop":
		return a.block(typ, ev)
	}
	a.faults.add("event type %s is not a documented stream event", quoteBounded(typ))
	return nil
}

func (a *anthropicAssembler) block(typ string, ev object) []Delta {
	idxRaw, _ := ev.get("index")
	idx, err := strconv.Atoi(strings.TrimSpace(string(idxRaw)))
	if err != nil || idx < 0 {
		a.faults.add("%s: index is %s", typ, quoteBounded(string(idxRaw)))
		return nil
	}
	if typ == "content_block_start" {
		if idx != len(a.blocks) {
			a.faults.add("content_block_start index %d out of order", idx)
			return nil
		}
		cb, _ := ev.get("content_block")
		obj, err := decodeObject(cb)
		if err != nil {
			a.faults.add("content_block_start %d: block is not an object", idx)
			return nil
		}
		blk := &blockAsm{}
		blk.typ, _ = optStringField(obj, "type")
		for _, f := range obj {
			blk.m.set(f.key, f.val)
		}
		a.blocks = append(a.blocks, blk)
		if blk.typ == "tool_use" {
			id, _ := optStringField(obj, "id")
			name, _ := optStringField(obj, "name")
			return []Delta{{Kind: DeltaCallStart, Call: a.callPos(idx), ID: id, Name: name}}
		}
		if blk.typ == "text" {
			if t, _ := optStringField(obj, "text"); t != "" {
				return []Delta{{Kind: DeltaText, Text: t}}
			}
		}
		return nil
	}
	if idx >= len(a.blocks) {
		a.faults.add("%s for block %d, which never started", typ, idx)
		return nil
	}
	blk := a.blocks[idx]
	if blk.closed {
		a.faults.add("%s for block %d after its content_block_stop", typ, idx)
	}
	if typ == "content_block_stop" {
		blk.closed = true
		return nil
	}
	d, _ := ev.get("delta")
	obj, err := decodeObject(d)
	if err != nil {
		a.faults.add("content_block_delta %d: delta is not an object", idx)
		return nil
	}
	dt, _ := optStringField(obj, "type")
	want := map[string]string{"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking",
		"signature_delta": "signature", "citations_delta": "citation"}[dt]
	if want == "" {
		a.faults.add("delta type %s is not a documented delta", quoteBounded(dt))
		return nil
	}
	v, ok := obj.get(want)
	if !ok || len(obj) != 2 {
		a.faults.add("%s for block %d has other members than type and %s", dt, idx, want)
		return nil
	}
	switch dt {
	case "text_delta":
		if blk.typ != "text" {
			a.faults.add("text_delta for a %s block", quoteBounded(blk.typ))
		}
		shown, fault := blk.text.add(v)
		if fault != "" {
			a.faults.add("text_delta: %s", fault)
		}
		if shown != "" {
			return []Delta{{Kind: DeltaText, Text: shown}}
		}
	case "input_json_delta":
		if blk.typ != "tool_use" {
			a.faults.add("input_json_delta for a %s block", quoteBounded(blk.typ))
		}
		s, err := unquoteStrict(v)
		if err != nil {
			// Pieces of raw JSON text may cut a multi-byte character: join the bytes exactly.
			var loose string
			if json.Unmarshal(v, &loose) != nil {
				a.faults.add("input_json_delta is not a JSON string")
				return nil
			}
			s = rawInner(v)
		}
		blk.input.WriteString(s)
		blk.inputSet = true
		if shown := blk.inShown.show([]byte(s)); shown != "" {
			return []Delta{{Kind: DeltaCallArgs, Call: a.callPos(idx), Text: shown}}
		}
	case "thinking_delta":
		if _, fault := blk.thinking.add(v); fault != "" {
			a.faults.add("thinking_delta: %s", fault)
		}
	case "signature_delta":
		if _, fault := blk.sig.add(v); fault != "" {
			a.faults.add("signature_delta: %s", fault)
		}
	case "citations_delta":
		blk.cites = append(blk.cites, append(json.RawMessage(nil), v...))
	}
	return nil
}

// rawInner decodes a JSON string literal keeping raw bytes that are not valid UTF-8 (a piece
// of a partial_json cut inside a character); escapes are decoded as encoding/json does.
func rawInner(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	inner := v[1 : len(v)-1]
	var out bytes.Buffer
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		if c != '\\' {
			out.WriteByte(c)
			continue
		}
		// Escape: decode this escape alone through encoding/json.
		j := i + 2
		if i+1 < len(inner) && inner[i+1] == 'u' {
			j = i + 6
			if j+6 <= len(inner) && inner[j] == '\\' && inner[j+1] == 'u' {
				j += 6 // a surrogate pair
			}
		}
		if j > len(inner) {
			j = len(inner)
		}
		var s string
		_ = json.Unmarshal(append(append([]byte{'"'}, inner[i:j]...), '"'), &s)
		out.WriteString(s)
		i = j - 1
	}
	return out.String()
}

// callPos is the 0-based position among the message's tool_use blocks of block idx.
func (a *anthropicAssembler) callPos(idx int) int {
	n := 0
	for i := 0; i < idx && i < len(a.blocks); i++ {
		if a.blocks[i].typ == "tool_use" {
			n++
		}
	}
	return n
}

func (a *anthropicAssembler) Body() []byte {
	var b bytes.Buffer
	if a.errEv != nil {
		b.WriteString(`{"type":"error","error":`)
		if len(a.errEv) == 0 {
			b.WriteString("null")
		} else {
			b.Write(a.errEv)
		}
		b.WriteByte('}')
		return b.Bytes()
	}
	b.WriteByte('{')
	first := true
	for _, k := range a.msg.keys {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONKey(&b, k)
		b.Write(a.msg.vals[k])
		if k == "role" || (k == "type" && !a.msg.has("role")) {
			b.WriteString(`,"content":`)
			a.writeBlocks(&b)
		}
	}
	if !a.msg.has("role") && !a.msg.has("type") {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"content":`)
		a.writeBlocks(&b)
		first = false
	}
	f := a.faults
	if !a.started {
		f = append(append(faults(nil), f...), "the stream had no message_start")
	}
	if !a.stopped {
		f = append(append(faults(nil), f...), "the stream ended before message_stop")
	}
	f.write(&b, first)
	b.WriteByte('}')
	return b.Bytes()
}

func (a *anthropicAssembler) writeBlocks(b *bytes.Buffer) {
	b.WriteByte('[')
	for i, blk := range a.blocks {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		first := true
		for _, k := range blk.m.keys {
			v := blk.m.vals[k]
			switch {
			case k == "text" && blk.text.present():
				v = joinStart(v, &blk.text)
			case k == "thinking" && blk.thinking.present():
				v = joinStart(v, &blk.thinking)
			case k == "signature" && blk.sig.present():
				v = joinStart(v, &blk.sig)
			case k == "citations" && len(blk.cites) > 0:
				var list []json.RawMessage
				_ = json.Unmarshal(v, &list)
				list = append(list, blk.cites...)
				v, _ = json.Marshal(list)
			case k == "input" && blk.inputSet:
				v = inputValue(v, blk.input.Bytes())
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			writeJSONKey(b, k)
			b.Write(v)
		}
		if blk.inputSet && !blk.m.has("input") {
			if !first {
				b.WriteByte(',')
			}
			b.WriteString(`"input":`)
			b.Write(inputValue(nil, blk.input.Bytes()))
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
}

// joinStart appends the joined deltas to the string the block started with.
func joinStart(start json.RawMessage, s *strcat) json.RawMessage {
	start = bytes.TrimSpace(start)
	if kindOf(start) != '"' || s.other != nil {
		return s.value()
	}
	return json.RawMessage(`"` + string(start[1:len(start)-1]) + s.inner.String() + `"`)
}

// inputValue is a tool_use input from its partial_json pieces: the joined text when it is one
// JSON value (the parser then judges it, as an unstreamed input); otherwise (a stream cut by
// max_tokens inside the input, or broken pieces) the text as a JSON string, which the parser
// never decodes (arguments_not_object, or truncated when the stop reason says so). The start
// event's "{}" placeholder is replaced by the pieces, as the API documents.
func inputValue(_ json.RawMessage, joined []byte) json.RawMessage {
	t := bytes.TrimSpace(joined)
	if len(t) == 0 {
		return json.RawMessage(`{}`)
	}
	if json.Valid(t) {
		return append(json.RawMessage(nil), joined...)
	}
	s, _ := json.Marshal(strings.ToValidUTF8(string(joined), "\uFFFD"))
	return s
}

// isEmptyString reports whether v is the JSON string "".
func isEmptyString(v json.RawMessage) bool { return isString(v, "") }

// isString reports whether v is a JSON string equal to want (escapes decoded strictly).
func isString(v json.RawMessage, want string) bool {
	if kindOf(v) != '"' {
		return false
	}
	s, err := unquoteStrict(v)
	return err == nil && s == want
}
