package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Disassemble turns an unstreamed response body into the stream events a provider would send
// for it, with every string the model wrote (content, arguments, text, partial_json, thinking)
// cut into pieces of at most piece bytes of its raw JSON text: cuts fall anywhere, inside a
// multi-byte character included, never inside an escape sequence. FormatOpenAI gives
// chat.completion.chunk payloads (or, for an Ollama body, NDJSON lines), FormatAnthropic
// Messages stream event payloads. It is the inverse of the assemblers, used by the fake
// streaming models of tests and benchmarks and by the replay provider to stream recordings;
// Assemble(Disassemble(body)) parses exactly as body does. A piece of 0 or less means 1.
//
// Errors (wrapping ErrUnrecognized): the body is not a JSON object of the format.
func Disassemble(format Format, body []byte, piece int) ([][]byte, error) {
	if piece < 1 {
		piece = 1
	}
	top, err := decodeObject(bytes.TrimSpace(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnrecognized, err)
	}
	if format == FormatAuto || format == "" {
		format = detect(top)
	}
	switch format {
	case FormatOpenAI:
		if !top.has("choices") && top.has("message") {
			return disOllama(top, piece)
		}
		return disOpenAI(top, piece)
	case FormatAnthropic:
		return disAnthropic(top, piece)
	}
	return nil, fmt.Errorf("%w: cannot stream format %q", ErrUnrecognized, string(format))
}

// IsOllamaBody reports whether body is an Ollama /api/chat body (a top-level message object,
// no choices): its stream is NDJSON, not SSE.
func IsOllamaBody(body []byte) bool {
	top, err := decodeObject(bytes.TrimSpace(body))
	return err == nil && !top.has("choices") && top.has("message")
}

// pieces cuts a JSON string literal's raw inner bytes into literals of at most n bytes,
// never inside an escape sequence.
func pieces(lit json.RawMessage, n int) []json.RawMessage {
	lit = bytes.TrimSpace(lit)
	inner := lit[1 : len(lit)-1]
	var out []json.RawMessage
	start := 0
	for i := 0; i < len(inner); {
		step := 1
		if inner[i] == '\\' {
			step = 2
			if i+1 < len(inner) && inner[i+1] == 'u' {
				step = 6
			}
		}
		if i+step-start > n && i > start {
			out = append(out, quoteRaw(inner[start:i]))
			start = i
		}
		i += step
	}
	if start < len(inner) || len(out) == 0 {
		out = append(out, quoteRaw(inner[start:]))
	}
	return out
}

func quoteRaw(inner []byte) json.RawMessage {
	return json.RawMessage(`"` + string(inner) + `"`)
}

// literalOf writes text as a JSON string literal keeping every byte that needs no escape as
// it is (invalid UTF-8 included), so a piece cut inside a character stays exact.
func literalOf(text []byte) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, c := range text {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.Bytes()
}

// obj writes an object from alternating keys and raw values, skipping nil values.
func obj(kv ...any) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		var raw json.RawMessage
		switch x := v.(type) {
		case json.RawMessage:
			raw = x
		case string:
			raw = json.RawMessage(x)
		case members:
			var mb bytes.Buffer
			mb.WriteByte('{')
			x.write(&mb, true)
			mb.WriteByte('}')
			raw = mb.Bytes()
		}
		if raw == nil {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONKey(&b, kv[i].(string))
		b.Write(raw)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func disOpenAI(top object, n int) ([][]byte, error) {
	var head members
	var usage json.RawMessage
	var choices []json.RawMessage
	for _, f := range top {
		switch f.key {
		case "choices":
			if json.Unmarshal(f.val, &choices) != nil {
				return nil, fmt.Errorf("%w: choices is not an array", ErrUnrecognized)
			}
		case "object":
			if s, err := unquoteStrict(f.val); err != nil || s != "chat.completion" {
				head.set("object", f.val) // an odd object stays odd
			}
		case "usage":
			usage = f.val
		default:
			head.set(f.key, f.val)
		}
	}
	if !head.has("object") {
		head.set("object", json.RawMessage(`"chat.completion.chunk"`))
	}
	chunk := func(choice json.RawMessage) []byte {
		var b bytes.Buffer
		b.WriteByte('{')
		head.write(&b, true)
		b.WriteString(`,"choices":[`)
		b.Write(choice)
		b.WriteString(`]}`)
		return b.Bytes()
	}
	var out [][]byte
	if len(choices) == 0 {
		// No choice (an error report): one chunk with the rest.
		var b bytes.Buffer
		b.WriteByte('{')
		head.write(&b, true)
		b.WriteByte('}')
		out = append(out, b.Bytes())
	}
	for ci, craw := range choices {
		ch, err := decodeObject(craw)
		if err != nil {
			return nil, fmt.Errorf("%w: choice %d: %w", ErrUnrecognized, ci, err)
		}
		idx := json.RawMessage(strconv.Itoa(ci))
		if v, ok := ch.get("index"); ok {
			idx = v
		}
		msgRaw, _ := ch.get("message")
		msg, err := decodeObject(msgRaw)
		if err != nil {
			return nil, fmt.Errorf("%w: choice %d message: %w", ErrUnrecognized, ci, err)
		}
		var first members
		var later []json.RawMessage // deltas after the first
		for _, f := range msg {
			switch {
			case openAIStreamStrings[f.key] && kindOf(f.val) == '"':
				for _, p := range pieces(f.val, n) {
					later = append(later, obj(f.key, p))
				}
			case openAIStreamStrings[f.key] && kindOf(f.val) == 'n':
			case f.key == "tool_calls" && kindOf(f.val) == '[':
				var list []json.RawMessage
				_ = json.Unmarshal(f.val, &list)
				for k, e := range list {
					later = append(later, callDeltas(k, e, n)...)
				}
			default:
				first.set(f.key, f.val)
			}
		}
		out = append(out, chunk(obj("index", idx, "delta", first, "finish_reason", "null")))
		for _, d := range later {
			out = append(out, chunk(obj("index", idx, "delta", d, "finish_reason", "null")))
		}
		var last members
		last.set("index", idx)
		last.set("delta", json.RawMessage(`{}`))
		for _, f := range ch {
			if f.key != "index" && f.key != "message" {
				last.set(f.key, f.val)
			}
		}
		var lb bytes.Buffer
		lb.WriteByte('{')
		last.write(&lb, true)
		lb.WriteByte('}')
		out = append(out, chunk(lb.Bytes()))
	}
	if usage != nil {
		var b bytes.Buffer
		b.WriteByte('{')
		head.write(&b, true)
		b.WriteString(`,"choices":[],"usage":`)
		b.Write(usage)
		b.WriteByte('}')
		out = append(out, b.Bytes())
	}
	return out, nil
}

// callDeltas streams one tool call: its head (id, type, name, other members, empty
// arguments), then its argument pieces. A call that is not an object with a function object
// is sent whole, without a stream index.
func callDeltas(k int, e json.RawMessage, n int) []json.RawMessage {
	call, err := decodeObject(e)
	fnRaw, _ := call.get("function")
	fn, ferr := decodeObject(fnRaw)
	if err != nil || ferr != nil || call.has("index") {
		return []json.RawMessage{obj("tool_calls", "["+string(e)+"]")}
	}
	var head members
	head.set("index", json.RawMessage(strconv.Itoa(k)))
	var fnHead members
	var args []json.RawMessage
	for _, f := range fn {
		if f.key == "arguments" && kindOf(f.val) == '"' {
			fnHead.set("arguments", json.RawMessage(`""`))
			args = pieces(f.val, n)
			continue
		}
		fnHead.set(f.key, f.val)
	}
	for _, f := range call {
		if f.key == "function" {
			var b bytes.Buffer
			b.WriteByte('{')
			fnHead.write(&b, true)
			b.WriteByte('}')
			head.set("function", b.Bytes())
			continue
		}
		head.set(f.key, f.val)
	}
	var hb bytes.Buffer
	hb.WriteByte('{')
	head.write(&hb, true)
	hb.WriteByte('}')
	out := []json.RawMessage{obj("tool_calls", "["+hb.String()+"]")}
	for _, p := range args {
		out = append(out, obj("tool_calls", "["+string(obj("index", strconv.Itoa(k), "function", obj("arguments", p)))+"]"))
	}
	return out
}

func disOllama(top object, n int) ([][]byte, error) {
	msgRaw, _ := top.get("message")
	msg, err := decodeObject(msgRaw)
	if err != nil {
		return nil, fmt.Errorf("%w: message: %w", ErrUnrecognized, err)
	}
	var head, tail members
	for _, f := range top {
		switch f.key {
		case "message":
		case "model", "created_at":
			head.set(f.key, f.val)
		default:
			tail.set(f.key, f.val)
		}
	}
	line := func(m json.RawMessage, done bool) []byte {
		var b bytes.Buffer
		b.WriteByte('{')
		first := head.write(&b, true)
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(`"message":`)
		b.Write(m)
		if done {
			tail.write(&b, false)
		} else {
			b.WriteString(`,"done":false`)
		}
		b.WriteByte('}')
		return b.Bytes()
	}
	var firstMsg members
	var out [][]byte
	var later []json.RawMessage
	for _, f := range msg {
		switch {
		case (f.key == "content" || f.key == "thinking") && kindOf(f.val) == '"':
			for _, p := range pieces(f.val, n) {
				later = append(later, obj(f.key, p))
			}
		case f.key == "tool_calls" && kindOf(f.val) == '[':
			later = append(later, obj("tool_calls", f.val))
		default:
			firstMsg.set(f.key, f.val)
		}
	}
	var fb bytes.Buffer
	fb.WriteByte('{')
	firstMsg.write(&fb, true)
	fb.WriteByte('}')
	out = append(out, line(fb.Bytes(), false))
	for _, m := range later {
		out = append(out, line(m, false))
	}
	out = append(out, line(json.RawMessage(`{}`), true))
	return out, nil
}

func disAnthropic(top object, n int) ([][]byte, error) {
	if t, _ := optStringField(top, "type"); t == "error" {
		// An error body is streamed as the error event it is.
		e, _ := top.get("error")
		return [][]byte{obj("type", `"error"`, "error", e)}, nil
	}
	var start, final members
	var blocks []json.RawMessage
	for _, f := range top {
		switch f.key {
		case "content":
			if json.Unmarshal(f.val, &blocks) != nil {
				return nil, fmt.Errorf("%w: content is not an array", ErrUnrecognized)
			}
			start.set("content", json.RawMessage(`[]`))
		case "stop_reason", "stop_sequence":
			start.set(f.key, json.RawMessage(`null`))
			final.set(f.key, f.val)
		case "id", "type", "role", "model", "usage":
			start.set(f.key, f.val)
		default:
			final.set(f.key, f.val)
		}
	}
	var out [][]byte
	out = append(out, obj("type", `"message_start"`, "message", start))
	for i, braw := range blocks {
		idx := strconv.Itoa(i)
		blk, err := decodeObject(braw)
		if err != nil {
			return nil, fmt.Errorf("%w: content[%d]: %w", ErrUnrecognized, i, err)
		}
		typ, _ := optStringField(blk, "type")
		var head members
		var deltas []json.RawMessage
		for _, f := range blk {
			switch {
			case typ == "text" && f.key == "text" && kindOf(f.val) == '"':
				head.set("text", json.RawMessage(`""`))
				for _, p := range pieces(f.val, n) {
					deltas = append(deltas, obj("type", `"text_delta"`, "text", p))
				}
			case typ == "thinking" && (f.key == "thinking" || f.key == "signature") && kindOf(f.val) == '"':
				head.set(f.key, json.RawMessage(`""`))
				for _, p := range pieces(f.val, n) {
					deltas = append(deltas, obj("type", `"`+f.key+`_delta"`, f.key, p))
				}
			case typ == "tool_use" && f.key == "input" && kindOf(f.val) == '{':
				head.set("input", json.RawMessage(`{}`))
				text := []byte(f.val)
				for j := 0; j < len(text); j += n {
					end := min(j+n, len(text))
					deltas = append(deltas, obj("type", `"input_json_delta"`, "partial_json", literalOf(text[j:end])))
				}
			default:
				head.set(f.key, f.val)
			}
		}
		out = append(out, obj("type", `"content_block_start"`, "index", idx, "content_block", head))
		for _, d := range deltas {
			out = append(out, obj("type", `"content_block_delta"`, "index", idx, "delta", d))
		}
		out = append(out, obj("type", `"content_block_stop"`, "index", idx))
	}
	var usage json.RawMessage
	if u, ok := final.vals["usage"]; ok {
		usage = u
	}
	out = append(out, obj("type", `"message_delta"`, "delta", final, "usage", usage))
	out = append(out, []byte(`{"type":"message_stop"}`))
	return out, nil
}
