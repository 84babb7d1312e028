package parse

import (
	"encoding/json"
	"strings"
)

// Embedded tool-call text: prose that a model or server meant as a tool call but that did not
// arrive as a structured call (cases B11-B13). It is reported as one embedded_tool_call_text
// failure so the model learns the call did not happen; it is never promoted to a call.
//
// Detection is conservative, to keep ordinary prose that merely mentions JSON or markup from
// failing a final answer. Content is tool-call-shaped when:
//
//   - the whole content (trimmed, optionally inside one ``` fence) is a JSON object with a
//     "name" and an "arguments" or "parameters" key; or a "function" object holding such a
//     name; or a "tool_calls" array; or a non-empty JSON array of such objects;
//   - it contains <tool_call> followed by a JSON object or <function= (Hermes, Qwen);
//   - it contains <function=NAME followed by '>', '{', '(' or white space, and a later
//     </function> (Llama 3.x, including the malformed variant missing '>');
//   - it contains a tool-call control token that no prose contains: <|python_tag|> (Llama),
//     [TOOL_CALLS] (Mistral), <｜tool▁calls▁begin｜>/<｜tool▁call▁begin｜> (DeepSeek),
//     <|tool_calls_section_begin|>/<|tool_call_begin|> (Kimi), or Harmony's
//     "to=functions." addressing together with <|message|> or <|call|>.
//
// Only the structure is looked at; nothing is decoded for use.

// controlTokens are tool-call markers that never occur in ordinary prose.
var controlTokens = []string{
	"<|python_tag|>",
	"[TOOL_CALLS]",
	"<｜tool▁calls▁begin｜>",
	"<｜tool▁call▁begin｜>",
	"<|tool_calls_section_begin|>",
	"<|tool_call_begin|>",
}

// detectEmbedded reports whether text is tool-call-shaped, the name when it is obvious, and
// which shape matched.
func detectEmbedded(text string) (name, how string, ok bool) {
	s := strings.TrimSpace(text)
	if s == "" {
		return "", "", false
	}
	if name, ok := jsonCallShape(unfence(s)); ok {
		return name, "JSON tool-call object", true
	}
	if i := strings.Index(s, "<tool_call>"); i >= 0 {
		rest := strings.TrimSpace(s[i+len("<tool_call>"):])
		if strings.HasPrefix(rest, "{") {
			return leadingObjectName(rest), "<tool_call> tag", true
		}
		if strings.HasPrefix(rest, "<function=") {
			name, _ := functionTag(rest)
			return name, "<tool_call> tag", true
		}
	}
	for off := 0; ; {
		i := strings.Index(s[off:], "<function=")
		if i < 0 {
			break
		}
		at := s[off+i:]
		if name, ok := functionTag(at); ok && strings.Contains(at, "</function>") {
			return name, "<function=…> tag", true
		}
		off += i + 1
	}
	for _, tok := range controlTokens {
		if i := strings.Index(s, tok); i >= 0 {
			return afterControlToken(strings.TrimSpace(s[i+len(tok):])), tok + " token", true
		}
	}
	if i := strings.Index(s, "to=functions."); i >= 0 && (strings.Contains(s, "<|message|>") || strings.Contains(s, "<|call|>")) {
		return identPrefix(s[i+len("to=functions."):]), "Harmony to=functions. addressing", true
	}
	return "", "", false
}

// unfence returns the body of s when s is exactly one fenced code block (```lang … ```).
func unfence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	body := s[3 : len(s)-3]
	nl := strings.IndexByte(body, '\n')
	if nl < 0 {
		return s
	}
	if strings.Contains(body, "```") {
		return s
	}
	return strings.TrimSpace(body[nl+1:])
}

// jsonCallShape reports whether s is, as a whole, a tool-call-shaped JSON value.
func jsonCallShape(s string) (string, bool) {
	if s == "" || (s[0] != '{' && s[0] != '[') || !json.Valid([]byte(s)) {
		return "", false
	}
	if s[0] == '[' {
		var list []json.RawMessage
		if json.Unmarshal([]byte(s), &list) != nil || len(list) == 0 {
			return "", false
		}
		first := ""
		for i, e := range list {
			name, ok := callObject(e)
			if !ok {
				return "", false
			}
			if i == 0 {
				first = name
			}
		}
		return first, true
	}
	obj, err := decodeObject([]byte(s))
	if err != nil {
		return "", false
	}
	if tc, ok := obj.get("tool_calls"); ok && kindOf(tc) == '[' {
		var list []json.RawMessage
		if json.Unmarshal(tc, &list) == nil && len(list) > 0 {
			name, _ := callObject(list[0])
			return name, true
		}
		return "", true
	}
	return callObject([]byte(s))
}

// callObject reports whether raw is an object with "name" and "arguments"/"parameters", or
// with a "function" object that is, and returns the name when it is a string.
func callObject(raw []byte) (string, bool) {
	obj, err := decodeObject(raw)
	if err != nil {
		return "", false
	}
	if fn, ok := obj.get("function"); ok && kindOf(fn) == '{' {
		if name, ok := callObject(fn); ok {
			return name, true
		}
	}
	if _, ok := obj.get("name"); !ok {
		return "", false
	}
	_, hasArgs := obj.get("arguments")
	_, hasParams := obj.get("parameters")
	if !hasArgs && !hasParams {
		return "", false
	}
	name, _ := optStringField(obj, "name")
	return name, true
}

// leadingObjectName returns the "name" of the JSON object at the start of s, if it parses.
func leadingObjectName(s string) string {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if dec.Decode(&raw) != nil {
		return ""
	}
	name, _ := callObject(raw)
	return name
}

// functionTag reads "<function=NAME" at the start of s: ok when NAME is non-empty and is
// followed by '>', '{', '(' or white space. The name is returned only when it is a valid name.
func functionTag(s string) (string, bool) {
	rest := strings.TrimPrefix(s, "<function=")
	end := strings.IndexAny(rest, "> \t\r\n{(")
	if end <= 0 {
		return "", false
	}
	name := rest[:end]
	if !ValidName(name) {
		return "", true
	}
	return name, true
}

// afterControlToken guesses the name after a control token: a JSON object or array of call
// objects, or an identifier (Mistral "name[ARGS]", Llama "name.call(").
func afterControlToken(s string) string {
	if strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{") {
		dec := json.NewDecoder(strings.NewReader(s))
		var raw json.RawMessage
		if dec.Decode(&raw) == nil {
			if name, ok := jsonCallShape(string(raw)); ok {
				return name
			}
		}
		return ""
	}
	name := identPrefix(s)
	return strings.TrimSuffix(name, ".call")
}

// identPrefix returns the longest prefix of s in the name alphabet, when it is a valid name.
func identPrefix(s string) string {
	end := 0
	for end < len(s) && end < 64 {
		c := s[end]
		if c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			end++
			continue
		}
		break
	}
	if !ValidName(s[:end]) {
		return ""
	}
	return s[:end]
}
