package display

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Field is one leaf of a call's arguments made fit to show.
type Field struct {
	// Path locates the leaf: object keys joined by ".", array indexes in brackets
	// ("recipients[0]"); a key that is not a plain identifier is quoted (["a b"]) and made
	// visible, so a key cannot pose as another path.
	Path string `json:"path"`
	// Value is the leaf: a string's text, or the JSON literal of a number, boolean, null, or
	// an empty object or array. Its flags include the flags of the keys on Path.
	Value
}

// Line is f for one terminal line: "path = value [host …] [flags: …]".
func (f Field) Line() string { return f.Path + " = " + f.Value.Line() }

// Arguments splits a call's JSON arguments (an object, or any JSON value) into its leaves, in
// the order they appear in raw (duplicate keys included: each is shown), each shown with
// Show(…, limit). It fails on input that is not one JSON value; the caller then shows raw
// itself with Show.
func Arguments(raw json.RawMessage, limit int) ([]Field, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out []Field
	if err := walk(dec, "", nil, limit, &out); err != nil {
		return nil, fmt.Errorf("display: arguments: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("display: arguments: data after the JSON value")
	}
	return out, nil
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// walk reads one JSON value from dec and appends its leaves under path; keyFlags are the
// flags of the keys on path.
func walk(dec *json.Decoder, path string, keyFlags []Flag, limit int, out *[]Field) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	leaf := func(v Value) {
		if len(keyFlags) > 0 {
			seen := map[Flag]bool{}
			for _, f := range append(append([]Flag{}, v.Flags...), keyFlags...) {
				seen[f] = true
			}
			v.Flags = ordered(seen)
		}
		p := path
		if p == "" {
			p = "$"
		}
		*out = append(*out, Field{Path: p, Value: v})
	}
	switch t := tok.(type) {
	case json.Delim:
		empty := true
		switch t {
		case '{':
			for dec.More() {
				empty = false
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				kf := keyFlags
				if fs := CharFlags(key); len(fs) > 0 {
					kf = append(append([]Flag{}, keyFlags...), fs...)
				}
				// A key is cut to the limit like a value: a model can put anything in a key,
				// and every surface prints the path (found by an attack helper: a 21 KB key
				// went whole into notices).
				if cut, ok := cutKey(key, limit); ok {
					key = cut
					kf = append(append([]Flag{}, kf...), FlagTruncated)
				}
				if err := walk(dec, join(path, key), kf, limit, out); err != nil {
					return err
				}
			}
			if empty {
				leaf(Value{Short: "{}", Full: "{}"})
			}
		case '[':
			for i := 0; dec.More(); i++ {
				empty = false
				if err := walk(dec, fmt.Sprintf("%s[%d]", path, i), keyFlags, limit, out); err != nil {
					return err
				}
			}
			if empty {
				leaf(Value{Short: "[]", Full: "[]"})
			}
		}
		_, err := dec.Token() // the closing delimiter
		return err
	case string:
		leaf(Show(t, limit))
	case json.Number:
		leaf(Show(t.String(), limit))
	case bool:
		leaf(Value{Short: strconv.FormatBool(t), Full: strconv.FormatBool(t)})
	case nil:
		leaf(Value{Short: "null", Full: "null"})
	}
	return nil
}

// cutKey is key cut to limit runes (DefaultLimit when limit <= 0) with "…" after it, and
// whether it was cut.
func cutKey(key string, limit int) (string, bool) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	if utf8.RuneCountInString(key) <= limit {
		return key, false
	}
	r := []rune(key)
	return string(r[:limit]) + "…", true
}

func join(path, key string) string {
	if plainKey.MatchString(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(Visible(key)) + "]"
}

// Egress kinds: what of a call's arguments leaves the machine.
const (
	EgressURL       = "url"
	EgressHost      = "host"
	EgressRecipient = "recipient"
	EgressAmount    = "amount"
)

// Leaving is one thing a call would send out of the machine, for the approver's first look.
type Leaving struct {
	// Kind is EgressURL, EgressHost, EgressRecipient or EgressAmount.
	Kind string `json:"kind"`
	// Field is the argument it came from.
	Field
}

var (
	recipientKey = regexp.MustCompile(`(?i)(^|_)(recipients?|to|cc|bcc|emails?|email_address|iban|account|payee|user_email|participants?|phone)$`)
	amountKey    = regexp.MustCompile(`(?i)(^|_)(amount|sum|price|total|value|quantity)$`)
	hostKey      = regexp.MustCompile(`(?i)(^|_)(host|hostname|domain|server)$`)
)

// lastKey is the last object key on path ("recipients[0]" → "recipients").
func lastKey(path string) string {
	for strings.HasSuffix(path, "]") {
		i := strings.LastIndexByte(path, '[')
		if i < 0 {
			break
		}
		inner := path[i+1 : len(path)-1]
		if uq, err := strconv.Unquote(inner); err == nil {
			return uq
		}
		path = path[:i]
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// Egress extracts what the call's arguments would send out of the machine: every URL (any
// string with "scheme://"), host names (fields named host, hostname, domain, server),
// recipients (fields named recipient(s), to, cc, bcc, email, iban, account, payee,
// participants, phone, and any value that is an e-mail address) and amounts (numbers in
// fields named amount, sum, price, total, value, quantity). It reads names, not the
// registry: a capability whose argument names hide what it sends shows it only in the full
// argument list. It fails when raw is not one JSON value.
func Egress(raw json.RawMessage, limit int) ([]Leaving, error) {
	fields, err := Arguments(raw, limit)
	if err != nil {
		return nil, err
	}
	var out []Leaving
	for _, f := range fields {
		key := lastKey(f.Path)
		text := f.Full
		switch {
		case strings.Contains(text, "://"):
			out = append(out, Leaving{Kind: EgressURL, Field: f})
		case hostKey.MatchString(key):
			out = append(out, Leaving{Kind: EgressHost, Field: f})
		case recipientKey.MatchString(key), isEmail(text):
			out = append(out, Leaving{Kind: EgressRecipient, Field: f})
		case amountKey.MatchString(key) && isNumber(text):
			out = append(out, Leaving{Kind: EgressAmount, Field: f})
		}
	}
	return out, nil
}

func isEmail(s string) bool {
	at := strings.IndexByte(s, '@')
	return at > 0 && strings.Count(s, "@") == 1 && strings.Contains(s[at:], ".") && !strings.ContainsAny(s, " /")
}
