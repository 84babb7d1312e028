package web

import (
	"bytes"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/airlock-dev/airlock/internal/display"
)

// Flags a shown value may carry (the names internal/display uses).
const (
	FlagBidi      = "bidi_control"
	FlagInvisible = "invisible"
	FlagControl   = "control"
	FlagInvalid   = "invalid_utf8"
	FlagMixedHost = "mixed_script_host"
	FlagTruncated = "truncated"
)

// Truncation limits, in runes of the visible form.
const (
	fieldLimit   = 160
	literalLimit = 600
)

// shown is one hostile string as the page shows it: Text is the visible form (hidden runes as
// <U+XXXX>), cut to a limit when Truncated, with Full the whole visible form; Flags name what
// was made visible; Note adds a derived form (a host's punycode).
type shown struct {
	Text      string
	Full      string
	Truncated bool
	Flags     []string
	Note      string
}

// show renders s for the page, truncated at limit runes (0: never).
func show(s string, limit int) shown {
	v := shown{Text: display.Visible(s), Flags: flagsOf(s)}
	if limit > 0 && utf8.RuneCountInString(v.Text) > limit {
		v.Full = v.Text
		v.Text = string([]rune(v.Text)[:limit]) + "…"
		v.Truncated = true
		v.Flags = append(v.Flags, FlagTruncated)
	}
	if host, puny, ok := mixedHost(s); ok {
		v.Flags = append(v.Flags, FlagMixedHost)
		v.Note = "host " + display.Visible(host) + " is " + puny
	}
	return v
}

// flagsOf names the kinds of hidden runes in s, in a fixed order.
func flagsOf(s string) []string {
	var bidi, invisible, control, invalid bool
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			invalid = true
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			control = true
		case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			bidi = true
		case r >= 0x200b && r <= 0x200d, r == 0x2060, r == 0xfeff, r == 0x00ad, r == 0x180e:
			invisible = true
		}
		i += n
	}
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{bidi, FlagBidi}, {invisible, FlagInvisible}, {control, FlagControl}, {invalid, FlagInvalid}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	if len(out) == 0 && display.Flagged(s) { // anything else display makes visible
		out = append(out, FlagInvisible)
	}
	return out
}

// mixedHost reports a URL whose host is not plain ASCII (a homograph such as a Cyrillic "а"
// in "apple"), with its punycode form.
func mixedHost(s string) (host, puny string, ok bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", "", false
	}
	h := u.Hostname()
	ascii := true
	for _, r := range h {
		if r > unicode.MaxASCII {
			ascii = false
			break
		}
	}
	if ascii {
		return "", "", false
	}
	p, err := idna.ToASCII(h)
	if err != nil {
		p = "not a valid IDN host"
	}
	return h, p, true
}

// field is one top-level argument as the page shows it.
type field struct {
	Name  shown
	Value shown
}

// leave is one thing that leaves the machine if the call runs: a destination URL or host, a
// recipient, an amount.
type leave struct {
	Kind  string
	Name  shown
	Value shown
}

// fields decodes a JSON object's top-level members in their order; a string member is shown
// decoded, anything else as its compact JSON. Arguments that are not an object are one field
// named "(arguments)".
func fields(raw json.RawMessage) []field {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return []field{{Name: show("(arguments)", 0), Value: show(string(raw), fieldLimit)}}
	}
	var out []field
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		out = append(out, field{Name: show(name, fieldLimit), Value: show(valueText(v), fieldLimit)})
	}
	return out
}

// valueText is a JSON value as text: strings decoded, everything else compact JSON.
func valueText(v json.RawMessage) string {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}

var leaveKinds = map[string]string{
	"url": "destination", "uri": "destination", "href": "destination", "link": "destination",
	"endpoint": "destination", "host": "destination", "domain": "destination", "webhook": "destination",
	"recipient": "recipient", "recipients": "recipient", "to": "recipient", "cc": "recipient", "bcc": "recipient",
	"email": "recipient", "iban": "recipient", "account": "recipient", "phone": "recipient", "participants": "recipient",
	"amount": "amount", "price": "amount", "total": "amount", "sum": "amount",
}

// leaves picks what leaves the machine from the top-level arguments: members named like a
// destination, recipient or amount, and any string member that is an http(s) URL.
func leaves(raw json.RawMessage) []leave {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []leave
	for _, k := range names {
		text := valueText(obj[k])
		kind := leaveKinds[strings.ToLower(k)]
		if kind == "" {
			if u, err := url.Parse(text); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
				kind = "destination"
			}
		}
		if kind != "" {
			out = append(out, leave{Kind: kind, Name: show(k, fieldLimit), Value: show(text, fieldLimit)})
		}
	}
	return out
}

// editable is the JSON for the edit form's textarea: the literal arguments, indented, with
// every rune display would make visible written as a \uXXXX escape, so the textarea shows
// the same value without hidden or reordering characters (decoding it gives the same value).
func editable(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return display.Visible(string(raw))
	}
	s := b.String()
	if !display.Flagged(s) {
		return s
	}
	var o strings.Builder
	for _, r := range s {
		if r != '\n' && display.Flagged(string(r)) {
			if r > 0xffff {
				r1, r2 := utf16Pair(r)
				o.WriteString(jsonEscape(r1) + jsonEscape(r2))
				continue
			}
			o.WriteString(jsonEscape(r))
			continue
		}
		o.WriteRune(r)
	}
	return o.String()
}

func jsonEscape(r rune) string {
	const hex = "0123456789abcdef"
	return `\u` + string([]byte{hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf]})
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}
