// Package canonical computes the canonical form and digest of a JSON arguments object. The
// digest binds a confirmation token to the exact arguments the approver saw (RFC-0004 tokens;
// DESIGN "the approval carries the digest of the arguments the approver saw").
//
// The form: object keys sorted by their UTF-8 bytes, no insignificant whitespace, strings
// re-encoded by encoding/json, number literals kept verbatim (so 12345678901234567890123 keeps
// every digit and 1.0 and 1 stay distinct: the approver saw what the model wrote).
// Duplicate object keys are an error, because two readers could disagree on which one counts.
package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// ErrDuplicateKey reports an object with the same key twice.
var ErrDuplicateKey = errors.New("canonical: duplicate object key")

// ErrInvalid reports input that is not exactly one JSON value.
var ErrInvalid = errors.New("canonical: invalid JSON")

// Canonicalize returns the canonical form of one JSON value.
func Canonicalize(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := write(dec, &buf); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data", ErrInvalid)
	}
	return buf.Bytes(), nil
}

// Digest is the lowercase hex SHA-256 of the canonical form.
func Digest(raw []byte) (string, error) {
	c, err := Canonicalize(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

func write(dec *json.Decoder, buf *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			type kv struct {
				k string
				v []byte
			}
			var kvs []kv
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return fmt.Errorf("%w: %v", ErrInvalid, err)
				}
				k, _ := kt.(string)
				if seen[k] {
					return fmt.Errorf("%w: %q", ErrDuplicateKey, k)
				}
				seen[k] = true
				var vb bytes.Buffer
				if err := write(dec, &vb); err != nil {
					return err
				}
				kvs = append(kvs, kv{k, vb.Bytes()})
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("%w: %v", ErrInvalid, err)
			}
			sort.Slice(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
			buf.WriteByte('{')
			for i, e := range kvs {
				if i > 0 {
					buf.WriteByte(',')
				}
				kb, _ := json.Marshal(e.k)
				buf.Write(kb)
				buf.WriteByte(':')
				buf.Write(e.v)
			}
			buf.WriteByte('}')
		case '[':
			buf.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					buf.WriteByte(',')
				}
				if err := write(dec, buf); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("%w: %v", ErrInvalid, err)
			}
			buf.WriteByte(']')
		default:
			return fmt.Errorf("%w: unexpected %v", ErrInvalid, t)
		}
	case json.Number:
		buf.WriteString(t.String())
	case string:
		b, _ := json.Marshal(t)
		buf.Write(b)
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case nil:
		buf.WriteString("null")
	}
	return nil
}
