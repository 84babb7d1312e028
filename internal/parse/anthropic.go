package parse

// This file is Anthropic Messages: the part model of a message and the assembler of its stream
// events.

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// ---- Anthropic Messages ----

// anthropicTop are the top-level keys of an Anthropic message. id, model, usage, stop_sequence
// (the matched sequence; stop_reason is what is read), container (the code-execution
// container's id and expiry), diagnostics (prompt-cache diagnostics) and context_management
// (what the API cleared from context) are ignorable; role must be "assistant"; stop_details
// is a refusal when non-null.
var anthropicTop = map[string]keyRule{
	"id": ignore, "model": ignore, "usage": ignore, "stop_sequence": ignore, "container": ignore,
	"diagnostics": ignore, "context_management": ignore,
	"type": read, "content": read, "stop_reason": read,
	"role": exactString("role", "assistant"),
	"stop_details": func(where string, raw json.RawMessage) refusedPart {
		if kindOf(raw) == 'n' {
			return refusedPart{}
		}
		return refusedPart{ReasonRefusal, where + ": the API reports a refusal (" + excerptJSON(raw) + "); the whole message is rejected"}
	},
}

// Anthropic content blocks: text (text read, citations ignorable), tool_use (id, name, input
// read; caller must be absent, null or direct: a call issued by code the API ran on its own
// servers is not the model's decision on Airlock's catalog; toolset_name must be null: toolsets
// are the API's MCP connector, never offered), thinking and redacted_thinking (reasoning, never
// an answer or a call: ignorable). Every other block type is refused: server_tool_use,
// web_search_tool_result, web_fetch_tool_result, code_execution_tool_result,
// bash_code_execution_tool_result, text_editor_code_execution_tool_result,
// tool_search_tool_result, container_upload, mcp_tool_use, mcp_tool_result, compaction and
// types not yet published.
var (
	anthropicText    = map[string]keyRule{"type": read, "text": read, "citations": ignore}
	anthropicToolUse = map[string]keyRule{"type": read, "id": read, "name": read, "input": read, PartialInputKey: read,
		"caller": callerRule, "toolset_name": nullOr("a tool_use of an API toolset (MCP connector), which Airlock never offers")}
	anthropicThinking         = map[string]keyRule{"type": read, "thinking": ignore, "signature": ignore}
	anthropicRedactedThinking = map[string]keyRule{"type": read, "data": ignore}
)

// anthropicServerBlocks name, for a clearer Detail, the published block types Airlock refuses.
var anthropicServerBlocks = map[string]string{
	"server_tool_use":                        "a server tool call the API ran itself (web search, web fetch, code execution, ...)",
	"web_search_tool_result":                 "a server web search result",
	"web_fetch_tool_result":                  "a server web fetch result",
	"code_execution_tool_result":             "a server code execution result",
	"bash_code_execution_tool_result":        "a server bash execution result",
	"text_editor_code_execution_tool_result": "a server text editor result",
	"tool_search_tool_result":                "a server tool search result",
	"container_upload":                       "a file uploaded to the API's code container",
	"mcp_tool_use":                           "an MCP connector call the API made itself",
	"mcp_tool_result":                        "an MCP connector result",
	"compaction":                             "a context compaction summary",
}

func callerRule(where string, raw json.RawMessage) refusedPart {
	if kindOf(raw) == 'n' {
		return refusedPart{}
	}
	obj, err := decodeObject(raw)
	if err == nil && len(obj) == 1 {
		if t, ok := obj.get("type"); ok {
			if s, err := unquoteStrict(t); err == nil && s == "direct" {
				return refusedPart{}
			}
		}
	}
	return unread(where, "a tool_use issued by "+excerptJSON(raw)+", not directly by the model")
}

// anthropicBlock checks one content block; typ is its decoded type.
func anthropicBlock(where string, block object, typ string) refusedPart {
	switch typ {
	case "text":
		return checkKeys(where, block, anthropicText)
	case "tool_use":
		return checkKeys(where, block, anthropicToolUse)
	case "thinking":
		return checkKeys(where, block, anthropicThinking)
	case "redacted_thinking":
		return checkKeys(where, block, anthropicRedactedThinking)
	}
	if what, ok := anthropicServerBlocks[typ]; ok {
		return unread(where, "block type "+quoteBounded(typ)+": "+what)
	}
	return unread(where, "block type "+quoteBounded(typ)+" (a block no provider documents)")
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
			// An error event without an error member is still an error: the whole event is
			// kept as what the provider said, never dropped.
			e, ok := ev.get("error")
			if !ok || kindOf(e) == 'n' {
				e = bytes.TrimSpace(event)
			}
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
			if !a.deltaMember(f) {
				continue
			}
			a.msg.setSticky(f.key, f.val, anthropicTop[f.key])
		}
		if u, ok := ev.get("usage"); ok {
			a.msg.set("usage", u)
		}
		for _, f := range ev {
			if f.key != "type" && f.key != "delta" && f.key != "usage" && a.deltaMember(f) {
				a.msg.setSticky(f.key, f.val, anthropicTop[f.key]) // carried for the part model
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
		if blk.typ != "tool_use" && blk.typ != "server_tool_use" && blk.typ != "mcp_tool_use" {
			// Server tool calls stream their input too: their block is then refused by
			// the part model, which names it; any other block is a fault.
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
				v, k = inputValue(blk.input.Bytes())
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
			v, k := inputValue(blk.input.Bytes())
			writeJSONKey(b, k)
			b.Write(v)
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

// PartialInputKey is the member an assembled tool_use block carries instead of "input" when
// its input_json_delta pieces do not join into one JSON value (a stream cut by max_tokens
// inside the input, or broken pieces): the joined text as a JSON string. The parser judges
// that text as argument text (invalid_json, trailing_data, ...; truncated when the stop
// reason says so) and never takes it as a call's arguments: a string input would be reported
// as arguments_not_object, which is not what was wrong.
const PartialInputKey = "airlock_partial_input"

// inputValue is a tool_use input from its partial_json pieces and the key it goes under: the
// joined text under "input" when it is one JSON value (the parser then judges it, as an
// unstreamed input); otherwise the text as a JSON string under PartialInputKey. The start
// event's "{}" placeholder is replaced by the pieces, as the API documents.
func inputValue(joined []byte) (json.RawMessage, string) {
	t := bytes.TrimSpace(joined)
	if len(t) == 0 {
		return json.RawMessage(`{}`), "input"
	}
	if json.Valid(t) {
		return append(json.RawMessage(nil), joined...), "input"
	}
	s, _ := json.Marshal(strings.ToValidUTF8(string(joined), "\uFFFD"))
	return s, PartialInputKey
}

// deltaMember judges one member a message_delta sets on the message: a stop reason (or stop
// sequence) already set to another value is a fault, never overwritten (a "refusal" then a
// "tool_use" would otherwise read as a normal end); content and Airlock's own fault key are
// members the assembler writes itself, so a delta carrying them is a fault. It reports whether
// the member is set.
func (a *anthropicAssembler) deltaMember(f field) bool {
	switch f.key {
	case "content", StreamFaultKey:
		a.faults.add("message_delta carries %s", quoteBounded(f.key))
		return false
	case "stop_reason", "stop_sequence", "stop_details":
		if old, ok := a.msg.vals[f.key]; ok && kindOf(old) != 'n' && kindOf(f.val) != 'n' && !sameJSON(old, f.val) {
			a.faults.add("two different %ss (%s, then %s)", f.key, excerptJSON(old), excerptJSON(f.val))
			return false
		}
		if old, ok := a.msg.vals[f.key]; ok && kindOf(old) != 'n' && kindOf(f.val) == 'n' {
			return false // a null later says nothing
		}
	}
	return true
}
