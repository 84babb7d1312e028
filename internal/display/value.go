package display

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultLimit is the number of runes of a value's shown text that surfaces print before
// cutting it (Value.Short); the full value stays reachable (Value.Full).
const DefaultLimit = 240

// Value is one hostile value made fit to show.
type Value struct {
	// Short is the visible text (hidden runes as <U+XXXX>) cut to the limit: when Flags holds
	// truncated it ends with "… [truncated: N more characters; see all]".
	Short string `json:"short"`
	// Full is the whole visible text, for a "see all" view.
	Full string `json:"full"`
	// Flags says what was made visible or deserves a second look, in flag order.
	Flags []Flag `json:"flags,omitempty"`
	// Hosts are the ASCII (punycode) forms of the non-ASCII host names found in the value
	// ("xn--pple-43d.example"), each shown besides the value.
	Hosts []string `json:"hosts,omitempty"`
}

// Show makes s fit to show with at most limit runes of visible text in Short (limit <= 0 means
// DefaultLimit). URLs, e-mail addresses and bare host names in s have their host checked for
// mixed scripts.
func Show(s string, limit int) Value {
	if limit <= 0 {
		limit = DefaultLimit
	}
	seen := map[Flag]bool{}
	for _, f := range CharFlags(s) {
		seen[f] = true
	}
	full := Visible(s)
	v := Value{Full: full, Short: full}
	if n := utf8.RuneCountInString(full); n > limit {
		v.Short = cut(full, limit)
		v.Short += fmt.Sprintf("… [truncated: %d more characters; see all]", n-utf8.RuneCountInString(v.Short))
		seen[FlagTruncated] = true
	}
	for _, h := range hostsIn(s) {
		ascii, mixed := checkHost(h.parsed)
		if mixed {
			seen[FlagMixedScriptHost] = true
		}
		if ascii == "" || !strings.EqualFold(ascii, h.written) {
			// Not the form contacted: a compatibility character, a non-ASCII label, a
			// percent-escape or a hidden character (issue 19, item 4).
			seen[FlagHostDiffers] = true
		}
		if ascii != "" && !strings.EqualFold(ascii, h.written) && !contains(v.Hosts, ascii) {
			v.Hosts = append(v.Hosts, ascii)
		}
	}
	v.Flags = ordered(seen)
	return v
}

// Has reports whether v carries flag f.
func (v Value) Has(f Flag) bool {
	for _, g := range v.Flags {
		if g == f {
			return true
		}
	}
	return false
}

// Line is v for one terminal line: Short, then the ASCII form of its non-ASCII hosts and its
// flags in brackets ("https://аpple.example/ [host xn--pple-43d.example] [flags: mixed_script_host]").
func (v Value) Line() string {
	s := v.Short
	for _, h := range v.Hosts {
		s += " [host " + h + "]"
	}
	if len(v.Flags) > 0 {
		s += " " + FlagList(v.Flags)
	}
	return s
}

// FlagList renders flags as "[flags: a, b]" ("" for none).
func FlagList(flags []Flag) string {
	if len(flags) == 0 {
		return ""
	}
	names := make([]string, len(flags))
	for i, f := range flags {
		names[i] = string(f)
	}
	return "[flags: " + strings.Join(names, ", ") + "]"
}

// Line shows s on one terminal line, cut to DefaultLimit and followed by its flags:
// Show(s, 0).Line().
func Line(s string) string { return Show(s, 0).Line() }

// cut returns the longest prefix of visible text v with at most limit runes that does not
// split a <U+XXXX> or <0xXX> marker.
func cut(v string, limit int) string {
	runes := 0
	for i := 0; i < len(v); {
		n := 1
		if v[i] == '<' {
			if j := strings.IndexByte(v[i:], '>'); j > 0 && (strings.HasPrefix(v[i:], "<U+") || strings.HasPrefix(v[i:], "<0x")) && j <= 10 {
				n = j + 1
			}
		}
		if n == 1 {
			_, n = utf8.DecodeRuneInString(v[i:])
		}
		k := utf8.RuneCountInString(v[i : i+n])
		if runes+k > limit {
			return v[:i]
		}
		runes += k
		i += n
	}
	return v
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// hostRef is a host found in a value: as written, and as url.Parse decoded it (the form the
// HTTP client maps and dials).
type hostRef struct{ written, parsed string }

// hostsIn finds host names in s: the host of each URL ("scheme://host/…"), the domain of an
// e-mail address, or s itself when it looks like a bare host name.
func hostsIn(s string) []hostRef {
	var hosts []hostRef
	for _, field := range strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || r == ',' || r == ';' || r == '"' || r == '\'' || r == '<' || r == '>'
	}) {
		switch {
		case strings.Contains(field, "://"):
			raw := strings.TrimSuffix(strings.TrimPrefix(rawHost(field), "["), "]")
			if u, err := url.Parse(field); err == nil && u.Hostname() != "" {
				hosts = append(hosts, hostRef{raw, u.Hostname()})
			} else if raw != "" {
				hosts = append(hosts, hostRef{raw, raw})
			}
		case strings.Count(field, "@") == 1:
			if d := field[strings.IndexByte(field, '@')+1:]; strings.Contains(d, ".") {
				d = strings.TrimRight(d, ".")
				hosts = append(hosts, hostRef{d, d})
			}
		case bareHost(field):
			hosts = append(hosts, hostRef{field, field})
		}
	}
	return hosts
}

// bareHost reports whether field looks like a host name on its own: dot-separated labels of
// letters, digits and hyphens, the last one with a letter ("example.com", "аpple.example"),
// so prose such as "05.9999" or a version number is not taken for one.
func bareHost(field string) bool {
	labels := strings.Split(strings.TrimSuffix(field, "."), ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" {
			return false
		}
		for _, r := range l {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' {
				return false
			}
		}
	}
	return strings.IndexFunc(labels[len(labels)-1], unicode.IsLetter) >= 0
}

// rawHost is the host part of a URL url.Parse refused (it refuses some hostile hosts).
func rawHost(s string) string {
	s = s[strings.Index(s, "://")+3:]
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.Contains(s[i:], "]") {
		s = s[:i]
	}
	return s
}

func isNumber(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r == '.' || r == '-' || r == '+' || r == 'e' || r == 'E') {
			return false
		}
	}
	return true
}

// HostASCII is the form of host name h the HTTP client resolves and dials (DialHost: IDNA
// lookup mapping, xn-- labels, lower case), or "" when it has none. It once was the plain
// punycode of h, which for a host written in compatibility characters named another host than
// the one dialed.
func HostASCII(h string) string {
	a, err := DialHost(h)
	if err != nil {
		return ""
	}
	return a
}

// checkHost returns h's ASCII form and whether one of its labels mixes scripts beyond the
// combinations a single language writes (Latin with Han, Hiragana, Katakana, Hangul or
// Bopomofo; UTS #39 "highly restrictive").
func checkHost(h string) (ascii string, mixed bool) {
	ascii = HostASCII(h)
	for _, label := range strings.Split(h, ".") {
		if labelMixed(label) {
			mixed = true
		}
	}
	return ascii, mixed
}

var scriptNames = []string{"Latin", "Cyrillic", "Greek", "Armenian", "Hebrew", "Arabic", "Georgian",
	"Cherokee", "Han", "Hiragana", "Katakana", "Hangul", "Bopomofo", "Thai", "Devanagari", "Ethiopic",
	"Coptic", "Syriac", "Thaana", "Lao", "Tibetan", "Myanmar", "Khmer", "Mongolian", "Tamil", "Bengali"}

func labelMixed(label string) bool {
	scripts := map[string]bool{}
	other := false
	for _, r := range label {
		if r < 0x80 {
			if unicode.IsLetter(r) {
				scripts["Latin"] = true
			}
			continue
		}
		if unicode.In(r, unicode.Common, unicode.Inherited) {
			continue
		}
		found := false
		for _, name := range scriptNames {
			if unicode.Is(unicode.Scripts[name], r) {
				scripts[name] = true
				found = true
				break
			}
		}
		if !found && unicode.IsLetter(r) {
			other = true
		}
	}
	if len(scripts) <= 1 && !(other && len(scripts) == 1) {
		return false
	}
	cjk := map[string]bool{"Latin": true, "Han": true, "Hiragana": true, "Katakana": true}
	for _, allowed := range []map[string]bool{
		cjk,
		{"Latin": true, "Han": true, "Bopomofo": true},
		{"Latin": true, "Han": true, "Hangul": true},
	} {
		ok := !other
		for s := range scripts {
			if !allowed[s] {
				ok = false
			}
		}
		if ok {
			return false
		}
	}
	return true
}
