package parse

// This file is the OpenAI Responses API (POST /v1/responses): the part model of a response
// object, its reader, and the assembler of its stream events. A response is a list of output
// items: "message" items carry the prose (output_text parts) or a refusal part,
// "function_call" items the calls (call_id, name, arguments: a JSON text, read by the same
// rules as chat completions' arguments), "reasoning" items the model's reasoning, which carries
// no answer and no call (kept verbatim in the raw response, to be sent back as the API
// requires). Its end is the response's status: "completed" is the normal end;
// "incomplete" with reason max_output_tokens is truncated; "failed" carries an error; any
// other status, and an incomplete answer for another reason (content_filter), fails every call.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// responsesTop are the top-level keys of a response object. Read: object (must be
// "response"), status, error, incomplete_details, output. Ignorable: the identifiers, times and
// usage, and the request's own settings, which the API echoes (model, instructions, tools,
// tool_choice, reasoning, text, temperature, ...): none of them carries an answer, a call, a
// refusal or an error. output_text is the SDKs' convenience field, never on the wire, but
// harmless. Everything else is refused.
var responsesTop = map[string]keyRule{
	"object": exactString("object", "response"), "status": read, "output": read,
	"error": errorPart, "incomplete_details": read,
	"id": ignore, "created_at": ignore, "completed_at": ignore, "model": ignore, "usage": ignore,
	"instructions": ignore, "max_output_tokens": ignore, "max_tool_calls": ignore, "parallel_tool_calls": ignore,
	"previous_response_id": ignore, "prompt_cache_key": ignore, "prompt_cache_retention": ignore, "reasoning": ignore,
	"safety_identifier": ignore, "service_tier": ignore, "store": ignore, "temperature": ignore, "text": ignore,
	"tool_choice": ignore, "tools": ignore, "top_logprobs": ignore, "top_p": ignore, "truncation": ignore,
	"user": ignore, "metadata": ignore, "background": ignore, "conversation": ignore, "prompt": ignore,
	"billing": ignore, "output_text": ignore,
}

// Output items Airlock reads; every other item type (web_search_call, file_search_call,
// computer_call, code_interpreter_call, image_generation_call, mcp_call, mcp_list_tools,
// mcp_approval_request, local_shell_call, custom_tool_call, ...) is a tool the API ran or a
// call Airlock never offered: refused.
var (
	responsesMessage  = map[string]keyRule{"type": read, "id": ignore, "role": exactString("role", "assistant"), "status": itemStatus, "content": read}
	responsesFunction = map[string]keyRule{"type": read, "id": ignore, "call_id": read, "name": read, "arguments": read, "status": itemStatus}
	responsesReason   = map[string]keyRule{"type": read, "id": ignore, "summary": ignore, "content": ignore, "encrypted_content": ignore, "status": ignore}
	responsesText     = map[string]keyRule{"type": read, "text": read, "annotations": annotationsRule, "logprobs": ignore}
)

func init() { responsesTop[StreamFaultKey] = streamFaultRule }

// itemStatus: a message or function_call item must say it is "completed"; an item in
// progress or incomplete is not a finished answer or call.
var itemStatus = exactString("item status", "completed")

// responsesItem checks one output item against the part model; typ is its decoded type.
func responsesItem(where string, item object, typ string) refusedPart {
	switch typ {
	case "message":
		if r := checkKeys(where, item, responsesMessage); !r.none() {
			return r
		}
		c, _ := item.get("content")
		return eachObject(where+".content", c, func(w string, part object) refusedPart {
			t, _ := optStringField(part, "type")
			switch t {
			case "output_text":
				return checkKeys(w, part, responsesText)
			case "refusal":
				r, _ := part.get("refusal")
				return refusedPart{ReasonRefusal, w + ": a refusal (" + excerptJSON(r) + "); the whole message is rejected"}
			}
			return unread(w, "a content part of type "+quoteBounded(t)+" (only output_text is read)")
		})
	case "function_call":
		return checkKeys(where, item, responsesFunction)
	case "reasoning":
		return checkKeys(where, item, responsesReason)
	}
	return unread(where, "an output item of type "+quoteBounded(typ)+" (a tool the API ran itself, or a call of a kind Airlock never offers)")
}

// parseResponses reads a Responses API response object.
func parseResponses(top object, round idScope) (Result, error) {
	part := streamFault(top)
	if part.none() {
		part = checkKeys("", top, responsesTop)
	}
	if e, ok := top.get("error"); ok && kindOf(e) != 'n' && part.none() {
		part = errorPart("error", e)
	}
	status, err := optStringField(top, "status")
	if err != nil {
		return Result{}, unrecognized("status: %v", err)
	}
	outRaw, ok := top.get("output")
	if !ok || kindOf(outRaw) != '[' {
		if !part.none() {
			return errorResult(part), nil
		}
		return Result{}, unrecognized("a response without an output array")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(outRaw, &items); err != nil {
		return Result{}, unrecognized("output: %v", err)
	}
	var failReason Reason
	var failDetail string
	switch status {
	case "completed":
	case "incomplete":
		why := ""
		if d, ok := top.get("incomplete_details"); ok && kindOf(d) == '{' {
			if o, err := decodeObject(d); err == nil {
				why, _ = optStringField(o, "reason")
			}
		}
		if why == "max_output_tokens" {
			failReason, failDetail = ReasonTruncated, "status \"incomplete\" (max_output_tokens): output was cut off; every call of the message is rejected"
		} else {
			failReason, failDetail = ReasonAbnormalFinish, fmt.Sprintf("status \"incomplete\" (%s) is not a normal end of message; every call of the message is rejected", quoteBounded(why))
		}
	case "":
		failReason, failDetail = ReasonAbnormalFinish, "the response has no status, so it cannot be known to have ended normally; every call of the message is rejected"
	default:
		failReason, failDetail = ReasonAbnormalFinish, fmt.Sprintf("status %s is not a normal end of message; every call of the message is rejected", quoteBounded(status))
	}
	var text strings.Builder
	var props []proposal
	var reasoning []json.RawMessage
	for i, raw := range items {
		where := fmt.Sprintf("output[%d]", i)
		item, err := decodeObject(raw)
		if err != nil {
			return Result{}, unrecognized("%s: %v", where, err)
		}
		typ, _ := optStringField(item, "type")
		if r := responsesItem(where, item, typ); !r.none() && part.none() {
			part = r
		}
		switch typ {
		case "reasoning":
			reasoning = append(reasoning, raw)
		case "message":
			// Every content part is decoded or the response is unreadable: a part that
			// does not decode (a repeated key, not an object) could be a refusal.
			c, _ := item.get("content")
			if kindOf(c) != '[' {
				return Result{}, unrecognized("%s.content is not an array", where)
			}
			var parts []json.RawMessage
			if err := json.Unmarshal(c, &parts); err != nil {
				return Result{}, unrecognized("%s.content: %v", where, err)
			}
			for j, p := range parts {
				po, err := decodeObject(p)
				if err != nil {
					return Result{}, unrecognized("%s.content[%d]: %v", where, j, err)
				}
				if t, _ := optStringField(po, "type"); t == "output_text" {
					s, err := optStringField(po, "text")
					if err != nil {
						return Result{}, unrecognized("%s: text: %v", where, err)
					}
					text.WriteString(s)
				}
			}
		case "function_call":
			// The same call as chat completions', so the same rules read it: call_id is the
			// id the result is sent back under.
			var b bytes.Buffer
			b.WriteString(`{"type":"function"`)
			if id, ok := item.get("call_id"); ok {
				b.WriteString(`,"id":`)
				b.Write(id)
			}
			b.WriteString(`,"function":{`)
			first := true
			for _, k := range []string{"name", "arguments"} {
				if v, ok := item.get(k); ok {
					if !first {
						b.WriteByte(',')
					}
					first = false
					writeJSONKey(&b, k)
					b.Write(v)
				}
			}
			b.WriteString(`}}`)
			props = append(props, openAICall(len(props), b.Bytes(), false, round))
		}
	}
	failReason, failDetail = withPart(failReason, failDetail, part)
	res := finish1(text.String(), "", failReason, failDetail, props)
	if len(reasoning) > 0 {
		// Reasoning items must go back with the calls they preceded (the API refuses a
		// function_call item sent back without its reasoning item).
		var b bytes.Buffer
		b.WriteString(`{"reasoning":[`)
		for i, r := range reasoning {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(r)
		}
		b.WriteString(`]}`)
		res.ProviderState = b.Bytes()
	}
	return res, nil
}

// ---- Responses API stream events ----

// responsesAssembler folds Responses API stream events. The terminal event
// (response.completed, response.incomplete or response.failed) carries the whole response
// object, which is the body; every output item the deltas built must equal the item the
// terminal response holds (text and arguments joined from deltas, compared exactly), else the
// stream is a fault: the body is what was streamed, never a guess between two versions.
type responsesAssembler struct {
	items   map[int]*respItem
	final   json.RawMessage // the terminal event's response
	ending  string          // the terminal event's type
	refusal string          // the first refusal event streamed ("" none)
	errEv   json.RawMessage // an error event's error
	faults  faults
	events  int
	done    bool
}

type respItem struct {
	added json.RawMessage
	typ   string
	done  json.RawMessage
	args  strings.Builder
	nArgs int
	text  map[int]*strings.Builder // content_index → joined output_text deltas
	shown shower
}

// NewResponsesAssembler returns the assembler of Responses API stream events (SSE data).
func NewResponsesAssembler() Assembler { return &responsesAssembler{items: map[int]*respItem{}} }

func (a *responsesAssembler) Done() bool { return a.done }

// responsesIgnorable are documented events that carry nothing the terminal response does not
// also hold: snapshots, part boundaries, the reasoning summary, the done events (whose values
// are compared through the output items), and the progress events of tools the API runs
// (whose items the part model refuses in the final output).
var responsesIgnorable = map[string]bool{
	"response.created": true, "response.in_progress": true, "response.queued": true,
	"response.content_part.added": true, "response.content_part.done": true,
	"response.output_text.done": true, "response.output_text.annotation.added": true,
	"response.function_call_arguments.done": true,
	"response.reasoning_summary_part.added": true, "response.reasoning_summary_part.done": true,
	"response.reasoning_summary_text.delta": true, "response.reasoning_summary_text.done": true,
	"response.reasoning_text.delta": true, "response.reasoning_text.done": true,
	"keepalive": true,
}

// responsesToolEvent reports the progress events of tools the API runs itself.
func responsesToolEvent(typ string) bool {
	for _, p := range []string{"response.web_search_call.", "response.file_search_call.", "response.code_interpreter_call",
		"response.image_generation_call.", "response.mcp_", "response.custom_tool_call_input.", "response.audio."} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

func (a *responsesAssembler) item(ev object) (*respItem, int, bool) {
	raw, _ := ev.get("output_index")
	i, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || i < 0 || i > 1<<16 {
		a.faults.add("event %d: output_index is %s", a.events, quoteBounded(string(raw)))
		return nil, 0, false
	}
	it := a.items[i]
	if it == nil {
		a.faults.add("event %d: output item %d was never added", a.events, i)
		return nil, i, false
	}
	return it, i, true
}

func (a *responsesAssembler) Add(event []byte) []Delta {
	a.events++
	ev, err := decodeObject(bytes.TrimSpace(event))
	if err != nil {
		a.faults.add("event %d is not a JSON object: %v", a.events, err)
		return nil
	}
	typ, _ := optStringField(ev, "type")
	if a.done {
		a.faults.add("event %s arrived after the response ended", quoteBounded(typ))
		return nil
	}
	switch typ {
	case "error":
		if a.errEv == nil {
			if e, ok := ev.get("error"); ok && kindOf(e) == '{' {
				a.errEv = append(json.RawMessage(nil), e...)
			} else {
				// The older shape: code, message and param beside type.
				var b bytes.Buffer
				b.WriteByte('{')
				first := true
				for _, f := range ev {
					if f.key == "type" || f.key == "sequence_number" {
						continue
					}
					if !first {
						b.WriteByte(',')
					}
					first = false
					writeJSONKey(&b, f.key)
					b.Write(f.val)
				}
				b.WriteByte('}')
				a.errEv = b.Bytes()
			}
		}
		return nil
	case "response.completed", "response.incomplete", "response.failed":
		r, ok := ev.get("response")
		if !ok || kindOf(r) != '{' {
			a.faults.add("%s carries no response object", typ)
			return nil
		}
		a.final = append(json.RawMessage(nil), r...)
		a.ending = typ
		a.done = true
		return nil
	case "response.refusal.delta", "response.refusal.done":
		// The refusal is judged in the final response, which must hold it (check).
		if a.refusal == "" {
			a.refusal = typ
		}
		return nil
	case "response.output_item.added":
		raw, _ := ev.get("output_index")
		i, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		item, _ := ev.get("item")
		obj, oerr := decodeObject(item)
		if err != nil || i < 0 || i > 1<<16 || oerr != nil || a.items[i] != nil {
			a.faults.add("event %d: output_item.added with output_index %s is not a new item", a.events, quoteBounded(string(raw)))
			return nil
		}
		it := &respItem{added: append(json.RawMessage(nil), item...), text: map[int]*strings.Builder{}}
		it.typ, _ = optStringField(obj, "type")
		a.items[i] = it
		if it.typ == "function_call" {
			id, _ := optStringField(obj, "call_id")
			name, _ := optStringField(obj, "name")
			return []Delta{{Kind: DeltaCallStart, Call: a.callPos(i), ID: id, Name: name}}
		}
		return nil
	case "response.output_item.done":
		it, _, ok := a.item(ev)
		if !ok {
			return nil
		}
		item, _ := ev.get("item")
		it.done = append(json.RawMessage(nil), item...)
		return nil
	case "response.output_text.delta", "response.function_call_arguments.delta":
		it, i, ok := a.item(ev)
		if !ok {
			return nil
		}
		d, _ := ev.get("delta")
		s, err := unquoteStrict(d)
		if err != nil {
			a.faults.add("event %d: %s delta is not a JSON string", a.events, typ)
			return nil
		}
		if typ == "response.function_call_arguments.delta" {
			if it.typ != "function_call" {
				a.faults.add("event %d: arguments delta for a %s item", a.events, quoteBounded(it.typ))
				return nil
			}
			it.args.WriteString(s)
			it.nArgs++
			return []Delta{{Kind: DeltaCallArgs, Call: a.callPos(i), Text: it.shown.show([]byte(s))}}
		}
		if it.typ != "message" {
			a.faults.add("event %d: text delta for a %s item", a.events, quoteBounded(it.typ))
			return nil
		}
		ci, _ := ev.get("content_index")
		c, err := strconv.Atoi(strings.TrimSpace(string(ci)))
		if err != nil || c < 0 {
			a.faults.add("event %d: content_index is %s", a.events, quoteBounded(string(ci)))
			return nil
		}
		if it.text[c] == nil {
			it.text[c] = &strings.Builder{}
		}
		it.text[c].WriteString(s)
		return []Delta{{Kind: DeltaText, Text: s}}
	}
	if responsesIgnorable[typ] || responsesToolEvent(typ) {
		return nil
	}
	a.faults.add("event type %s is not a documented stream event", quoteBounded(typ))
	return nil
}

// callPos is the 0-based position among the function_call items of output item i.
func (a *responsesAssembler) callPos(i int) int {
	n := 0
	for j, it := range a.items {
		if j < i && it.typ == "function_call" {
			n++
		}
	}
	return n
}

// check compares what the deltas built with the terminal response's output items.
func (a *responsesAssembler) check(output []json.RawMessage) {
	idx := make([]int, 0, len(a.items))
	for i := range a.items {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	if len(idx) != len(output) {
		a.faults.add("the stream added %d output items, the final response holds %d", len(idx), len(output))
		return
	}
	for n, i := range idx {
		if i != n {
			a.faults.add("output item %d is missing from the stream", n)
			return
		}
		it := a.items[i]
		fin, err := decodeObject(output[i])
		if err != nil {
			a.faults.add("output[%d] is not an object", i)
			continue
		}
		if it.done != nil && !sameJSON(it.done, output[i]) {
			a.faults.add("output item %d: output_item.done and the final response differ", i)
		}
		// What the stream showed when the item was added must be what the final holds.
		added, _ := decodeObject(it.added)
		for _, k := range []string{"type", "call_id", "name"} {
			av, aok := added.get(k)
			fv, fok := fin.get(k)
			if aok != fok || (aok && !sameJSON(av, fv)) {
				a.faults.add("output item %d: its %s when added (%s) differs from the final (%s)", i, k, excerptJSON(av), excerptJSON(fv))
			}
		}
		switch it.typ {
		case "function_call":
			args, err := optStringField(fin, "arguments")
			if err == nil && it.nArgs > 0 && args != it.args.String() {
				a.faults.add("function call %d: the streamed arguments %s differ from the final %s", i, quoteBounded(it.args.String()), quoteBounded(args))
			}
		case "message":
			c, _ := fin.get("content")
			var parts []json.RawMessage
			_ = json.Unmarshal(c, &parts)
			for ci := range it.text {
				if ci >= len(parts) {
					a.faults.add("message %d: text streamed for content part %d, which the final response lacks", i, ci)
				}
			}
			// Every output_text part of the final was streamed, exactly.
			for ci, p := range parts {
				po, err := decodeObject(p)
				if err != nil {
					continue // the parser refuses it
				}
				if t, _ := optStringField(po, "type"); t != "output_text" {
					continue
				}
				streamed := ""
				if sb := it.text[ci]; sb != nil {
					streamed = sb.String()
				}
				if text, err := optStringField(po, "text"); err != nil || text != streamed {
					a.faults.add("message %d part %d: the streamed text differs from the final text", i, ci)
				}
			}
		}
	}
}

// sameJSON reports whether a and b are the same JSON value, compared after compaction.
func sameJSON(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

func (a *responsesAssembler) Body() []byte {
	var b bytes.Buffer
	f := append(faults(nil), a.faults...)
	if a.final == nil {
		if a.errEv != nil {
			b.WriteString(`{"object":"response","status":"failed","error":`)
			b.Write(a.errEv)
			b.WriteString(`,"output":[]`)
			f.write(&b, false)
			b.WriteByte('}')
			return b.Bytes()
		}
		f = append(f, "the stream ended before response.completed, response.incomplete or response.failed")
		b.WriteString(`{"object":"response","output":[]`)
		f.write(&b, false)
		b.WriteByte('}')
		return b.Bytes()
	}
	top, err := decodeObject(a.final)
	if err != nil {
		f = append(f, "the final response is not an object")
		b.WriteString(`{"object":"response","output":[]`)
		f.write(&b, false)
		b.WriteByte('}')
		return b.Bytes()
	}
	out, _ := top.get("output")
	var output []json.RawMessage
	if kindOf(out) == '[' && json.Unmarshal(out, &output) == nil {
		a.check(output)
	}
	// The terminal event says how the response ended; its status must say the same.
	want := map[string]string{"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}[a.ending]
	if st, err := optStringField(top, "status"); err != nil || st != want {
		a.faults.add("%s carries a response whose status is %s", a.ending, quoteBounded(st))
	}
	if a.refusal != "" && !bytes.Contains(out, []byte(`"refusal"`)) {
		a.faults.add("a refusal was streamed (%s) that the final response does not hold", a.refusal)
	}
	f = append(faults(nil), a.faults...)
	b.WriteByte('{')
	first := true
	for _, fld := range top {
		if fld.key == "error" && a.errEv != nil && kindOf(fld.val) == 'n' {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONKey(&b, fld.key)
		b.Write(fld.val)
	}
	if a.errEv != nil {
		if e, ok := top.get("error"); !ok || kindOf(e) == 'n' {
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(`"error":`)
			b.Write(a.errEv)
		}
	}
	f.write(&b, first)
	b.WriteByte('}')
	return b.Bytes()
}
