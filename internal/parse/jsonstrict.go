package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds the strict JSON helpers. encoding/json is used only as a tokenizer and
// syntax checker: values are kept as json.RawMessage (the exact bytes), strings that carry
// arguments are unescaped by unquoteStrict (which, unlike encoding/json, refuses invalid UTF-8
// and lone surrogates instead of replacing them with U+FFFD), and object keys are matched
// exactly (encoding/json matches struct fields case-insensitively and keeps the last of
// duplicate keys; both would let one response mean two things).

var (
	errNotObject      = errors.New("not a JSON object")
	errDuplicateKey   = errors.New("duplicate object key")
	errNotString      = errors.New("not a JSON string")
	errInvalidUnicode = errors.New("invalid UTF-8 or lone surrogate escape")
)

// field is one member of a JSON object, value kept as its exact bytes.
type field struct {
	key string
	val json.RawMessage
}

// object is a JSON object's members in document order, keys unique.
type object []field

// get returns the raw value of key (exact, case-sensitive match) and whether it is present.
func (o object) get(key string) (json.RawMessage, bool) {
	for _, f := range o {
		if f.key == key {
			return f.val, true
		}
	}
	return nil, false
}

// has reports whether key is present with a value other than JSON null.
func (o object) has(key string) bool {
	v, ok := o.get(key)
	return ok && kindOf(v) != 'n'
}

// decodeObject splits raw (one JSON value) into its members. It fails with errNotObject when
// raw is not an object and errDuplicateKey when a key occurs twice.
func decodeObject(raw []byte) (object, error) {
	if kindOf(raw) != '{' {
		return nil, errNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotObject, err)
	}
	var obj object
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errNotObject, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: key is not a string", errNotObject)
		}
		if seen[key] {
			return nil, fmt.Errorf("%w %q", errDuplicateKey, key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %w", errNotObject, err)
		}
		obj = append(obj, field{key: key, val: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotObject, err)
	}
	return obj, nil
}

// kindOf returns the first byte of a JSON value after leading whitespace: '{', '[', '"', 'n'
// (null), 't', 'f', a digit or '-' for numbers, or 0 when raw is empty.
func kindOf(raw []byte) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// kindName names a JSON value's kind for diagnostics.
func kindName(raw []byte) string {
	switch c := kindOf(raw); {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == 'n':
		return "null"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 0:
		return "nothing"
	default:
		return "number"
	}
}

// unquoteStrict decodes one JSON string token. Unlike encoding/json it fails with
// errInvalidUnicode on invalid UTF-8 and on a lone surrogate escape (\ud800 not followed by a
// low surrogate, or a low surrogate on its own), instead of substituting U+FFFD.
func unquoteStrict(raw []byte) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", errNotString
	}
	s := raw[1 : len(raw)-1]
	if !utf8.Valid(s) {
		return "", errInvalidUnicode
	}
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s), nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			return "", errNotString
		}
		i++
		switch s[i] {
		case '"', '\\', '/':
			b.WriteByte(s[i])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(s[i+1:])
			if !ok {
				return "", errNotString
			}
			i += 4
			switch {
			case utf16.IsSurrogate(r) && r < 0xdc00:
				// A high surrogate must be followed by an escaped low surrogate.
				if i+6 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
					return "", errInvalidUnicode
				}
				lo, ok := hex4(s[i+3:])
				if !ok || lo < 0xdc00 || lo > 0xdfff {
					return "", errInvalidUnicode
				}
				i += 6
				b.WriteRune(utf16.DecodeRune(r, lo))
			case utf16.IsSurrogate(r):
				return "", errInvalidUnicode
			default:
				b.WriteRune(r)
			}
		default:
			return "", errNotString
		}
	}
	return b.String(), nil
}

// hex4 reads four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}

// hasLoneSurrogate reports whether any string in the syntactically valid JSON text b contains
// a surrogate escape that is not part of a high+low pair.
func hasLoneSurrogate(b []byte) bool {
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := hex4(b[i+2:])
				if !ok {
					return false // not valid JSON; the syntax check reports it
				}
				switch {
				case utf16.IsSurrogate(r) && r < 0xdc00:
					if i+12 > len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
						return true
					}
					lo, ok := hex4(b[i+8:])
					if !ok || lo < 0xdc00 || lo > 0xdfff {
						return true
					}
					i += 11
				case utf16.IsSurrogate(r):
					return true
				default:
					i += 5
				}
			} else {
				i++ // skip the escaped byte
			}
		}
	}
	return false
}

// checkDuplicateKeys walks the syntactically valid JSON text b and fails with errDuplicateKey
// when any object, at any depth, repeats a key (after unescaping, so "a" and "\u0061" collide).
func checkDuplicateKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return walkKeys(dec)
}

func walkKeys(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := make(map[string]bool)
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			if seen[k] {
				return fmt.Errorf("%w %q", errDuplicateKey, k)
			}
			seen[k] = true
			if err := walkKeys(dec); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walkKeys(dec); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // closing delimiter
	return err
}

// isJSONSpace reports whether c is JSON insignificant whitespace (RFC 8259 §2).
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// checkArguments applies the argument rules to the exact argument text b, in this order:
// invalid UTF-8 → invalid_unicode; not one JSON value (NaN, Infinity, bad escapes, unterminated
// strings, single quotes…) → invalid_json; a value followed by more non-whitespace →
// trailing_data; lone surrogate escapes → invalid_unicode; a value that is not an object
// (string — including a double-encoded object —, array, number, boolean, null) →
// arguments_not_object; a repeated key at any depth → invalid_json (the validator and the
// executor could otherwise see different values). Emptiness is the caller's rule: an empty
// OpenAI argument string is arguments_empty, which this function never sees.
func checkArguments(b []byte) (Reason, string) {
	if !utf8.Valid(b) {
		return ReasonInvalidUnicode, "arguments are not valid UTF-8"
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return ReasonInvalidJSON, err.Error()
	}
	rest := b[dec.InputOffset():]
	for i, c := range rest {
		if !isJSONSpace(c) {
			return ReasonTrailingData, fmt.Sprintf("non-whitespace data after the JSON value at byte %d", int(dec.InputOffset())+i)
		}
	}
	if hasLoneSurrogate(v) {
		return ReasonInvalidUnicode, "lone surrogate escape in a string"
	}
	if kindOf(v) != '{' {
		d := "arguments are a JSON " + kindName(v) + ", not an object"
		if kindOf(v) == '"' {
			d += " (double-encoded arguments are not unwrapped)"
		}
		return ReasonArgumentsNotObject, d
	}
	if err := checkDuplicateKeys(v); err != nil {
		return ReasonInvalidJSON, err.Error()
	}
	return "", ""
}
