package agentdojo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ErrMalformedTools reports a tools.json file that does not have the expected shape.
var ErrMalformedTools = errors.New("agentdojo: malformed tools file")

// Tool is one suite tool as the corpus's tools.json defines it.
type Tool struct {
	// Name is the tool (function) name.
	Name string
	// Description is the tool's docstring summary.
	Description string
	// Parameters is the argument schema, byte for byte as in the file. It is JSON Schema plus a
	// non-standard "python_type" keyword on each property (the Python annotation AgentDojo
	// built it from); use StandardSchema for a clean JSON Schema.
	Parameters json.RawMessage
}

type rawTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// LoadTools reads the corpus's tools.json ({"suites": {suite: [{name, description,
// parameters}, …]}}) and returns each suite's tools in file order. Parameters are kept byte
// for byte; nothing is removed.
func LoadTools(path string) (map[string][]Tool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agentdojo: read tools: %w", err)
	}
	var raw struct {
		Suites map[string][]rawTool `json:"suites"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformedTools, path, err)
	}
	if len(raw.Suites) == 0 {
		return nil, fmt.Errorf("%w: %s: no suites", ErrMalformedTools, path)
	}
	out := make(map[string][]Tool, len(raw.Suites))
	for suite, tools := range raw.Suites {
		seen := make(map[string]bool, len(tools))
		for i, rt := range tools {
			if rt.Name == "" {
				return nil, fmt.Errorf("%w: %s: suite %s tool %d has no name", ErrMalformedTools, path, suite, i)
			}
			if seen[rt.Name] {
				return nil, fmt.Errorf("%w: %s: suite %s: duplicate tool %q", ErrMalformedTools, path, suite, rt.Name)
			}
			seen[rt.Name] = true
			if p := bytes.TrimSpace(rt.Parameters); len(p) == 0 || p[0] != '{' {
				return nil, fmt.Errorf("%w: %s: suite %s tool %s: parameters is not a JSON object", ErrMalformedTools, path, suite, rt.Name)
			}
			out[suite] = append(out[suite], Tool(rt))
		}
	}
	return out, nil
}

// pythonTypeKeyword is the non-standard keyword AgentDojo's schemas carry next to "type".
const pythonTypeKeyword = "python_type"

// StandardSchema returns raw with every "python_type" keyword removed, recursively through all
// sub-schemas (properties, items, additionalProperties, $defs, anyOf/allOf/oneOf, …), so the
// result is plain JSON Schema for the catalog and the argument validator. A property that is
// itself named "python_type" is kept: only the keyword is removed. Key order and number
// literals are preserved; the output is compact. Duplicate object keys are an error.
func StandardSchema(raw json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := writeSchema(&buf, raw); err != nil {
		return nil, fmt.Errorf("agentdojo: standard schema: %w", err)
	}
	return json.RawMessage(buf.Bytes()), nil
}

// Keywords whose value is a schema, a map of name to schema, or a list of schemas.
var (
	schemaValued = map[string]bool{
		"items": true, "additionalProperties": true, "additionalItems": true, "not": true,
		"if": true, "then": true, "else": true, "contains": true, "propertyNames": true,
		"unevaluatedItems": true, "unevaluatedProperties": true,
	}
	schemaMapValued = map[string]bool{
		"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
		"dependentSchemas": true,
	}
	schemaListValued = map[string]bool{
		"anyOf": true, "allOf": true, "oneOf": true, "prefixItems": true,
	}
)

// member is one key of a JSON object with its exact value bytes.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers splits a JSON object into its members, in order. ok is false when raw is not
// an object.
func objectMembers(raw json.RawMessage) (members []member, ok bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, false, err
	}
	if d, isDelim := tok.(json.Delim); !isDelim || d != '{' {
		return nil, false, nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, true, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, true, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, true, err
		}
		members = append(members, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, true, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, true, errors.New("trailing data after schema")
	}
	return members, true, nil
}

// writeSchema writes a (sub)schema without its python_type keywords.
func writeSchema(buf *bytes.Buffer, raw json.RawMessage) error {
	members, isObject, err := objectMembers(raw)
	if err != nil {
		return err
	}
	if !isObject { // boolean schema or a value we do not descend into
		return compactInto(buf, raw)
	}
	buf.WriteByte('{')
	first := true
	for _, m := range members {
		if m.key == pythonTypeKeyword {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		writeKey(buf, m.key)
		switch {
		case schemaValued[m.key]:
			err = writeSchemaOrList(buf, m.value)
		case schemaMapValued[m.key]:
			err = writeSchemaMap(buf, m.value)
		case schemaListValued[m.key]:
			err = writeSchemaOrList(buf, m.value)
		default:
			err = compactInto(buf, m.value)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.key, err)
		}
	}
	buf.WriteByte('}')
	return nil
}

// writeSchemaOrList writes a schema, or a list of schemas (items in draft 4 tuple form).
func writeSchemaOrList(buf *bytes.Buffer, raw json.RawMessage) error {
	var list []json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &list); err != nil {
			return err
		}
		buf.WriteByte('[')
		for i, s := range list {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeSchema(buf, s); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	}
	return writeSchema(buf, raw)
}

// writeSchemaMap writes a map of names to schemas (properties, $defs, …).
func writeSchemaMap(buf *bytes.Buffer, raw json.RawMessage) error {
	members, isObject, err := objectMembers(raw)
	if err != nil {
		return err
	}
	if !isObject {
		return compactInto(buf, raw)
	}
	buf.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeKey(buf, m.key)
		if err := writeSchema(buf, m.value); err != nil {
			return fmt.Errorf("%s: %w", m.key, err)
		}
	}
	buf.WriteByte('}')
	return nil
}

func writeKey(buf *bytes.Buffer, key string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(key) // a string always encodes
	buf.Truncate(buf.Len() - 1)
	buf.WriteByte(':')
}

func compactInto(buf *bytes.Buffer, raw json.RawMessage) error {
	return json.Compact(buf, raw)
}
