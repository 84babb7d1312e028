package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	// The faults are Airlock's own sentences whose provider excerpts are already quoted and
	// bounded: shown as they are (not quoted once more, which escaped every excerpt twice),
	// with any control or bidi character escaped (cleanDetail), up to maxFaultQuote bytes.
	if len(s) > maxFaultQuote {
		s = strings.ToValidUTF8(s[:maxFaultQuote], "") + "..."
	}
	return refusedPart{ReasonStreamFault, "the stream could not be assembled into one message: " + cleanDetail(s) + "; the whole message is rejected"}
}

// maxFaultQuote bounds the stream faults a Detail quotes (at most 4 faults are kept).
const maxFaultQuote = 1024

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
	case FormatResponses:
		return NewResponsesAssembler(), nil
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

// setSticky sets k unless the value it holds is one rule refuses: a refused value (a filter
// hit, a refusal, an error) is kept over every later one, so a later chunk that says nothing
// cannot hide it. A key without a rule (nil) is set as by set.
func (m *members) setSticky(k string, v json.RawMessage, rule keyRule) {
	if old, ok := m.vals[k]; ok && rule != nil && !rule(k, old).none() {
		return
	}
	m.set(k, v)
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
