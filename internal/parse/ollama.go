package parse

// This file is Ollama's native /api/chat: the part model of its body and the assembler of its
// NDJSON stream.

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ---- Ollama /api/chat ----

// ollamaTop are the top-level keys of an Ollama /api/chat body: model, created_at and the
// timing and count fields are ignorable, as are remote_model / remote_host (cloud models) and
// logprobs (of the text); done must be true (a done:false body is a stream chunk, not a
// finished message); error is a provider error.
var ollamaTop = map[string]keyRule{
	"model": ignore, "created_at": ignore, "total_duration": ignore, "load_duration": ignore,
	"prompt_eval_count": ignore, "prompt_eval_duration": ignore, "eval_count": ignore, "eval_duration": ignore,
	"remote_model": ignore, "remote_host": ignore, "logprobs": ignore,
	"message": read, "done_reason": read,
	"done": func(where string, raw json.RawMessage) refusedPart {
		if strings.TrimSpace(string(raw)) == "true" {
			return refusedPart{}
		}
		return unread(where, "done is "+excerptJSON(raw)+": a stream chunk, not a finished message")
	},
	"error": errorPart,
}

// ollamaMessageRules are the keys of an Ollama message: role (assistant), content,
// tool_calls read; thinking (the model's reasoning text) ignorable; images (generated images)
// refused when non-empty; anything else refused.
var ollamaMessageRules = map[string]keyRule{
	"role": exactString("role", "assistant"), "content": read, "tool_calls": read, "thinking": ignore,
	"images": func(where string, raw json.RawMessage) refusedPart {
		if kindOf(raw) == 'n' || strings.TrimSpace(string(raw)) == "[]" {
			return refusedPart{}
		}
		return unread(where, "images in the answer")
	},
}

// ollamaToolCall: Ollama's calls carry function (and, in newer versions, id and type).
var ollamaToolCall = map[string]keyRule{"id": read, "type": exactString("tool call type", "function"), "function": read}

// ollamaFunction: name and arguments read; index (the call's position) ignorable.
var ollamaFunction = map[string]keyRule{"name": read, "arguments": read, "index": ignore}

func ollamaParts(top, msg object) refusedPart {
	if r := streamFault(top); !r.none() {
		return r
	}
	if r := checkKeys("", top, ollamaTop); !r.none() {
		return r
	}
	return messageParts("message", msg, ollamaMessageRules, true)
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
					a.msg.setSticky(mf.key, mf.val, ollamaMessageRules[mf.key])
				}
			}
		case "done":
			a.top.set(f.key, f.val)
			a.done = strings.TrimSpace(string(f.val)) == "true"
		case "done_reason":
			if old, ok := a.top.vals[f.key]; ok && kindOf(old) != 'n' && !sameJSON(old, f.val) {
				// Never overwritten: a "length" on one line and a "stop" on the last would
				// otherwise read as a normal end.
				a.faults.add("line %d: a second done_reason (%s, then %s)", a.lines, excerptJSON(old), excerptJSON(f.val))
				continue
			}
			a.top.set(f.key, f.val)
		case StreamFaultKey:
			a.faults.add("line %d carries Airlock's own member %s", a.lines, StreamFaultKey)
		default:
			a.top.setSticky(f.key, f.val, ollamaTop[f.key])
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
