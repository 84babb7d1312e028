// Package provenance tells, for each value in a proposal's arguments, where in the turn's
// context it came from: the principal's own messages, the system prompt, the catalog, a
// capability result (untrusted data), earlier assistant text, or nowhere (the model produced
// it). It is computed in trusted code from the context Airlock itself built, never from
// anything the model says about its arguments (issue 24).
//
// Matching rules (the contract approvers and the automatic-when-user-provided policy rely on):
//
//   - Leaves. Every string and number leaf of the arguments is one value, addressed by its JSON
//     pointer ("/recipient", "/items/0/name"). Booleans and null are not attributable. For a
//     string that parses as an absolute http(s) URL, its host is one more value ("/url#host");
//     for a string that is one e-mail address, its domain is one more value ("/to#domain").
//     A longer string (an e-mail body the model wrote) also yields every http(s) URL and
//     e-mail address written inside it as values of their own ("/body#url/0",
//     "/body#email/0", with their hosts and domains), so a link or address planted by an
//     injection is attributed even when the text around it is the model's.
//   - Normalisation. Values and context texts are compared in Unicode NFC with every run of
//     white space collapsed to one space and the ends trimmed. Strings compare case-sensitively
//     (an IBAN or a path differs by case); hosts and e-mail domains case-insensitively.
//   - Whole tokens. A value is found in a text only where it is not glued to more letters or
//     digits: "1000" is not found in "10000", "Bob" not in "Bobby"; "GB29NWBK60161331926819" is
//     found in "pay GB29NWBK60161331926819 by Friday". Substrings of longer words never count.
//   - Numbers. A number leaf is compared in canonical form (no exponent, no trailing zeros of
//     a fraction, no leading "+": 1e2, 100.0 and 100 are all "100") against every number token
//     of a text in the same canonical form, so "98.70" in a bill is the amount 98.7.
//   - Composed strings. A string leaf of at least PartsFrom runes that is found nowhere whole
//     (a message the model composed) is also split at line breaks and sentence ends (".", "!",
//     "?" before white space), and every part of at least MinPartRunes runes is a value of its
//     own ("/body#part/0"): a sentence an injection dictated is attributed to it even when the
//     model added its own words around it.
//   - Digit strings. A string of ASCII digits only (an id such as "13") follows the number
//     rules for its minimum length: MinNumberDigits digits.
//   - Short values. A string shorter than MinStringRunes runes (after normalisation) or a
//     number whose canonical form has fewer than MinNumberDigits digits is StatusTooShort:
//     such values occur everywhere and their origin cannot be told. They never count as
//     provided by the user.
//   - Sources. User messages are the principal's own words; the system prompt and the catalog
//     (tool names and descriptions sent to the model) are Airlock's; tool messages are
//     capability results, untrusted, read from the untrusted-data envelope (every string and
//     number of its data, and its source URL); Airlock's own verdicts in tool messages (trust
//     "airlock": denials, refusals, which echo the model's own arguments) and the arguments of
//     earlier tool calls are the model's own words and never a source. Assistant prose is a
//     source of kind assistant.
package provenance

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/mail"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Rules is the version of the matching rules above; stored beside every report so a report
// can be read with the rules that made it.
const Rules = "provenance.v1"

// MinStringRunes is the shortest string value (in runes, after normalisation) that is
// attributed; shorter ones are StatusTooShort.
const MinStringRunes = 4

// MinNumberDigits is the fewest digits a number's canonical form must have to be attributed.
const MinNumberDigits = 2

// SourceKind is where a value was found.
type SourceKind string

// Source kinds, from most to least trusted.
const (
	SourceUser      SourceKind = "user"      // the principal's own messages of this conversation
	SourceSystem    SourceKind = "system"    // the system prompt
	SourceCatalog   SourceKind = "catalog"   // tool names and descriptions the model was offered
	SourceAssistant SourceKind = "assistant" // earlier assistant prose
	SourceResult    SourceKind = "result"    // a capability result: untrusted data
)

// Status is the verdict for one value.
type Status string

// Statuses of a value.
const (
	StatusFound    Status = "found"     // in at least one source
	StatusNotFound Status = "not_found" // in no source: the model produced it
	StatusTooShort Status = "too_short" // too short to attribute (MinStringRunes, MinNumberDigits)
)

// Kind is what a value is.
type Kind string

// Kinds of values.
const (
	KindString Kind = "string"
	KindNumber Kind = "number"
	KindHost   Kind = "host"   // the host of a URL leaf
	KindDomain Kind = "domain" // the domain of an e-mail address leaf
	KindURL    Kind = "url"    // a URL written inside a longer string leaf
	KindEmail  Kind = "email"  // an e-mail address written inside a longer string leaf
	KindPart   Kind = "part"   // a sentence or line of a longer string leaf found nowhere whole
)

// MinPartRunes is the shortest sentence or line of a composed string that is attributed on
// its own; PartsFrom is the shortest string leaf split into parts.
const (
	MinPartRunes = 12
	PartsFrom    = 24
)

// Source is one context entry a value was found in.
type Source struct {
	Kind SourceKind `json:"kind"`
	// Result is the 1-based number of the capability result in the context, in order (result
	// #n), for Kind result; 0 otherwise.
	Result     int    `json:"result,omitempty"`
	Capability string `json:"capability,omitempty"`
	CallID     string `json:"call_id,omitempty"`
	SourceURL  string `json:"source_url,omitempty"`
	// Warning (Kind user only): every mention of the value in this message is in a sentence
	// that warns against it or negates it ("do NOT pay GB33…, it is a scam"): the user named
	// the value, but not as an instruction (issue 37 item 3). Quote is that sentence
	// (normalised, at most QuoteLimit runes): surfaces show it beside the value.
	Warning bool   `json:"warning,omitempty"`
	Quote   string `json:"quote,omitempty"`
}

// QuoteLimit bounds, in runes, the user's sentence a warned value's source quotes.
const QuoteLimit = 160

// Value is the provenance of one argument value.
type Value struct {
	// Path is the JSON pointer of the leaf, plus "#host" or "#domain" for derived values.
	Path string `json:"path"`
	Kind Kind   `json:"kind"`
	// Text is the value as compared (normalised; numbers canonical; hosts lowercase).
	Text    string   `json:"text"`
	Status  Status   `json:"status"`
	Sources []Source `json:"sources,omitempty"`
}

// FromUser reports whether the value was found in the principal's own messages as something
// they asked for: a message that mentions it only to warn against it (Source.Warning) does not
// count (issue 37 item 3: being mentioned does not make a value the user's instruction).
func (v Value) FromUser() bool {
	for _, s := range v.Sources {
		if s.Kind == SourceUser && !s.Warning {
			return true
		}
	}
	return false
}

// Warned returns the first of the principal's sentences that warns against the value, and
// whether there is one (the value may be FromUser too, from another message).
func (v Value) Warned() (quote string, ok bool) {
	for _, s := range v.Sources {
		if s.Kind == SourceUser && s.Warning {
			return s.Quote, true
		}
	}
	return "", false
}

// trusted: the principal asked for the value, or Airlock's own text holds it.
func (v Value) trusted() bool { return v.FromUser() || v.has(SourceSystem) || v.has(SourceCatalog) }

// UntrustedOnly reports whether the value was found in capability results and in none of
// Airlock's or the principal's own texts (user, system, catalog): the mark of a value an
// injection could have planted. Earlier assistant prose does not vouch for a value: the model
// repeating what it read is still what it read; nor does a user message that warns against it.
func (v Value) UntrustedOnly() bool {
	return v.has(SourceResult) && !v.trusted()
}

// Origins of a value, as policies and every surface name them (issue 37 item 3).
const (
	OriginUser      = "user"      // the principal asked for it (or Airlock's own text holds it), and no untrusted data does
	OriginUntrusted = "untrusted" // in untrusted data (capability results) and not asked for by the principal
	OriginBoth      = "both"      // asked for by the principal and also in untrusted data
	OriginNone      = "none"      // nowhere, too short to attribute, only in assistant prose or only warned against
)

// Origin is where the value came from, in the four words policies read: user, untrusted, both
// or none. A value the principal mentioned only to warn against it is not "user".
func (v Value) Origin() string {
	if v.Status != StatusFound {
		return OriginNone
	}
	t, u := v.trusted(), v.has(SourceResult)
	switch {
	case t && u:
		return OriginBoth
	case t:
		return OriginUser
	case u:
		return OriginUntrusted
	}
	return OriginNone
}

func (v Value) has(k SourceKind) bool {
	for _, s := range v.Sources {
		if s.Kind == k {
			return true
		}
	}
	return false
}

// Field is the top-level argument field of the value ("recipient" for "/recipient#host").
func (v Value) Field() string {
	p := strings.TrimPrefix(v.Path, "/")
	if i := strings.IndexAny(p, "/#"); i >= 0 {
		p = p[:i]
	}
	return strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
}

// Label is the approver-facing origin of the value: "from your message", "from the system
// prompt", "from <capability> result #n (<source>)", "from earlier assistant text", "not
// found in the conversation" or "too short to attribute". The principal's own words win; then
// Airlock's; a value found in several results names the first. Labels hold model- and
// tool-written text (capability ids are registry-written; source URLs are not): show them
// through internal/display.
func (v Value) Label() string {
	l := v.label()
	if q, ok := v.Warned(); ok {
		l += fmt.Sprintf("; your message warns against it: %q", q)
	}
	return l
}

func (v Value) label() string {
	switch v.Status {
	case StatusTooShort:
		return "too short to attribute"
	case StatusNotFound:
		return "not found in the conversation"
	}
	for _, k := range []SourceKind{SourceUser, SourceSystem, SourceCatalog, SourceResult, SourceAssistant} {
		for _, s := range v.Sources {
			if s.Kind != k {
				continue
			}
			if k == SourceUser && s.Warning {
				continue // a warning is said after the origin (Label)
			}
			switch k {
			case SourceUser:
				if r, ok := v.firstResult(); ok {
					return "from your message and also in " + r + ": in untrusted data too"
				}
				return "from your message"
			case SourceSystem:
				return "from the system prompt"
			case SourceCatalog:
				return "from the catalog"
			case SourceAssistant:
				return "from earlier assistant text"
			default:
				l := fmt.Sprintf("from %s result #%d", s.Capability, s.Result)
				if s.SourceURL != "" {
					l += " (" + boundSource(s.SourceURL) + ")"
				}
				if v.UntrustedOnly() {
					l += ": only in untrusted data"
				}
				return l
			}
		}
	}
	return "not found in the conversation"
}

// firstResult names the first capability result holding the value ("<capability> result #n
// (<source>)").
func (v Value) firstResult() (string, bool) {
	for _, s := range v.Sources {
		if s.Kind == SourceResult {
			l := fmt.Sprintf("%s result #%d", s.Capability, s.Result)
			if s.SourceURL != "" {
				l += " (" + boundSource(s.SourceURL) + ")"
			}
			return l, true
		}
	}
	return "", false
}

// SourceLimit bounds, in runes, the source (a URL, a call's argument: tool- and model-written)
// a label quotes, so the label's verdict ("only in untrusted data") always fits on every
// surface: a padded source cannot push it past a surface's cut.
const SourceLimit = 60

func boundSource(s string) string {
	r := []rune(s)
	if len(r) <= SourceLimit {
		return s
	}
	return string(r[:SourceLimit]) + "…"
}

// Report is the provenance of every value of one proposal's arguments, in path order.
type Report struct {
	Rules  string  `json:"rules"`
	Values []Value `json:"values"`
	// Error says why provenance could not be computed (the context could not be read); the
	// values are then unknown, never "not found". Surfaces show "provenance unavailable".
	Error string `json:"error,omitempty"`
}

// UserProvided reports whether every value of the given top-level fields (every value when
// fields is empty) was found in the principal's own messages; a too-short or unattributed
// value, or a listed field with no value at all, is not user-provided (fail closed). This is
// the test of the automatic-when-user-provided policy (issue 24 item 3).
func (r Report) UserProvided(fields []string) bool {
	if r.Error != "" {
		return false
	}
	want := map[string]bool{}
	for _, f := range fields {
		want[f] = true
	}
	seen := map[string]bool{}
	for _, v := range r.Values {
		if len(want) > 0 && !want[v.Field()] {
			continue
		}
		seen[v.Field()] = true
		if v.Kind == KindHost || v.Kind == KindDomain || v.Kind == KindURL || v.Kind == KindEmail || v.Kind == KindPart {
			continue // the whole leaf it derives from must be the user's, which is stricter
		}
		if v.Status != StatusFound || !v.FromUser() {
			return false
		}
	}
	for f := range want {
		if !seen[f] {
			return false
		}
	}
	return len(seen) > 0
}

// Entry is one context entry to search, in context order. Text is searched as it is.
type Entry struct {
	Kind SourceKind
	Text string
	// For Kind result: which capability, which call, from where.
	Capability string
	CallID     string
	SourceURL  string
}

// Compute returns the provenance of every leaf of args (a JSON object) against entries.
// Errors: args that are not one JSON value.
func Compute(args json.RawMessage, entries []Entry) (Report, error) {
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Report{}, fmt.Errorf("provenance: arguments: %w", err)
	}
	var leaves []Value
	raws := map[string]string{} // path → the string leaf as written (parts split on its line breaks)
	walk("", v, &leaves, raws)
	sort.SliceStable(leaves, func(i, j int) bool { return leaves[i].Path < leaves[j].Path })

	numbers := false // number tokens are indexed only when some value is compared as a number
	for _, l := range leaves {
		numbers = numbers || l.Kind == KindNumber || (l.Kind == KindString && digitsOnly(l.Text))
	}
	idx := index(entries, numbers)
	attribute := func(l *Value) {
		if short(*l) {
			l.Status = StatusTooShort
			return
		}
		for _, e := range idx {
			if e.contains(*l) {
				src := e.src
				if src.Kind == SourceUser {
					src.Quote, src.Warning = warning(e.text, l.Text)
				}
				l.Sources = append(l.Sources, src)
			}
		}
		l.Status = StatusNotFound
		if len(l.Sources) > 0 {
			l.Status = StatusFound
		}
	}
	var parts []Value
	for i := range leaves {
		l := &leaves[i]
		attribute(l)
		if l.Kind == KindString && l.Status == StatusNotFound && utf8.RuneCountInString(l.Text) >= PartsFrom {
			for j, p := range splitParts(raws[l.Path]) {
				v := Value{Path: fmt.Sprintf("%s#part/%d", l.Path, j), Kind: KindPart, Text: p}
				attribute(&v)
				parts = append(parts, v)
			}
		}
	}
	leaves = append(leaves, parts...)
	sort.SliceStable(leaves, func(i, j int) bool { return leaves[i].Path < leaves[j].Path })
	return Report{Rules: Rules, Values: leaves}, nil
}

// warnWords are the words that make a sentence of the principal's a warning against, or a
// negation of, the values it names (English; a false positive only asks a human).
var warnWords = regexp.MustCompile(`(?i)\b(not|never|no|don't|dont|doesn't|shouldn't|mustn't|won't|avoid|stop|block|refuse|reject|cancel|ignore|scam|scams|scammer|fraud|fraudulent|phishing|fake|suspicious|spam|malicious|beware|warning|dangerous)\b|n't\b`)

var sentenceEnd = regexp.MustCompile(`[.!?]+(?:\s+|$)`)

// warning reports whether every whole-token mention of needle in the user text hay is in a
// sentence with a warning or negation word, and quotes the first such sentence. A needle not
// located as a token (a number matched in another written form) is not a warning.
func warning(hay, needle string) (quote string, warned bool) {
	if needle == "" {
		return "", false
	}
	found := false
	for from := 0; from <= len(hay)-len(needle); {
		i := strings.Index(hay[from:], needle)
		if i < 0 {
			break
		}
		i += from
		from = i + 1
		if glued(hay, i, i+len(needle)) {
			continue
		}
		found = true
		start, end := 0, len(hay)
		for _, loc := range sentenceEnd.FindAllStringIndex(hay, -1) {
			if loc[1] <= i {
				start = loc[1]
			} else if loc[0] >= i+len(needle) {
				end = loc[1]
				break
			}
		}
		sentence := strings.TrimSpace(hay[start:end])
		if !warnWords.MatchString(strings.Replace(sentence, needle, " ", 1)) {
			return "", false
		}
		if quote == "" {
			quote = sentence
			if r := []rune(quote); len(r) > QuoteLimit {
				quote = string(r[:QuoteLimit]) + "…"
			}
		}
	}
	if !found {
		return "", false
	}
	return quote, true
}

var partBreak = regexp.MustCompile(`[.!?]+(?:\s+|$)|\n+`)

// splitParts are the sentences and lines of s, normalised, of at least MinPartRunes runes.
func splitParts(s string) []string {
	var out []string
	for _, p := range partBreak.Split(s, 64) {
		p = normalize(p)
		if utf8.RuneCountInString(p) >= MinPartRunes {
			out = append(out, p)
		}
	}
	return out
}

func short(v Value) bool {
	kind := v.Kind
	if kind == KindString && digitsOnly(v.Text) {
		kind = KindNumber
	}
	switch kind {
	case KindNumber:
		digits := 0
		for _, r := range v.Text {
			if r >= '0' && r <= '9' {
				digits++
			}
		}
		return digits < MinNumberDigits
	default:
		return utf8.RuneCountInString(v.Text) < MinStringRunes
	}
}

func digitsOnly(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// walk appends one Value per string and number leaf (and derived host / domain values).
func walk(path string, v any, out *[]Value, raws map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walk(path+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), t[k], out, raws)
		}
	case []any:
		for i, e := range t {
			walk(path+"/"+strconv.Itoa(i), e, out, raws)
		}
	case json.Number:
		*out = append(*out, Value{Path: path, Kind: KindNumber, Text: CanonicalNumber(string(t))})
	case string:
		s := normalize(t)
		raws[path] = t
		*out = append(*out, Value{Path: path, Kind: KindString, Text: s})
		if h := urlHost(s); h != "" {
			*out = append(*out, Value{Path: path + "#host", Kind: KindHost, Text: h})
		} else if d := emailDomain(s); d != "" {
			*out = append(*out, Value{Path: path + "#domain", Kind: KindDomain, Text: d})
		} else {
			embedded(path, s, out)
		}
	}
}

var (
	embeddedURL   = regexp.MustCompile(`(?i)\bhttps?://[^\s"'<>()\[\]{}]+`)
	embeddedEmail = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
)

// embedded appends the URLs and e-mail addresses written inside s, with their hosts and
// domains. Trailing sentence punctuation is not part of a URL.
func embedded(path, s string, out *[]Value) {
	for i, u := range embeddedURL.FindAllString(s, 32) {
		u = strings.TrimRight(u, ".,;:!?")
		p := fmt.Sprintf("%s#url/%d", path, i)
		*out = append(*out, Value{Path: p, Kind: KindURL, Text: u})
		if h := urlHost(u); h != "" {
			*out = append(*out, Value{Path: p + "#host", Kind: KindHost, Text: h})
		}
	}
	for i, e := range embeddedEmail.FindAllString(s, 32) {
		p := fmt.Sprintf("%s#email/%d", path, i)
		*out = append(*out, Value{Path: p, Kind: KindEmail, Text: e})
		if at := strings.LastIndexByte(e, '@'); at > 0 {
			*out = append(*out, Value{Path: p + "#domain", Kind: KindDomain, Text: strings.ToLower(e[at+1:])})
		}
	}
}

// CanonicalNumber is the canonical text of a JSON or prose number: exact decimal, no
// exponent, no leading "+", no trailing fractional zeros ("1e2", "100.0" → "100"; "-0" →
// "0"). Text that is not a number is returned unchanged.
func CanonicalNumber(s string) string {
	if m := plainDecimal.FindStringSubmatch(s); m != nil {
		// The common case without big arithmetic: sign, integer digits, fraction digits.
		neg, whole, frac := m[1] == "-", strings.TrimLeft(m[2], "0"), strings.TrimRight(m[3], "0")
		if whole == "" {
			whole = "0"
		}
		out := whole
		if frac != "" {
			out += "." + frac
		}
		if neg && out != "0" {
			out = "-" + out
		}
		return out
	}
	r, ok := new(big.Rat).SetString(strings.TrimPrefix(s, "+"))
	if !ok {
		return s
	}
	if r.IsInt() {
		return r.Num().String()
	}
	// A finite decimal with an exponent: as many fraction digits as the mantissa's plus the
	// exponent's shift give it exactly, then trimmed.
	prec := len(s)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if e, err := strconv.Atoi(s[i+1:]); err == nil && e < 0 {
			prec += -e
		}
	}
	if prec > 400 {
		return s
	}
	txt := r.FloatString(prec)
	if back, ok := new(big.Rat).SetString(txt); !ok || back.Cmp(r) != 0 {
		return s
	}
	return strings.TrimRight(strings.TrimRight(txt, "0"), ".")
}

// plainDecimal is a number without exponent: sign, integer part, optional fraction.
var plainDecimal = regexp.MustCompile(`^([-+]?)([0-9]+)(?:\.([0-9]+))?$`)

func urlHost(s string) string {
	if !strings.HasPrefix(strings.ToLower(s), "http://") && !strings.HasPrefix(strings.ToLower(s), "https://") {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

func emailDomain(s string) string {
	if strings.ContainsAny(s, " <>") {
		return ""
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s {
		return ""
	}
	at := strings.LastIndexByte(s, '@')
	return strings.ToLower(s[at+1:])
}

// normalize is NFC with every run of white space collapsed to one space, ends trimmed.
func normalize(s string) string {
	return strings.Join(strings.Fields(norm.NFC.String(s)), " ")
}

// numberTokens are the [start, end) byte ranges of the number tokens of prose: an optional
// sign, digits, an optional fraction and an optional exponent (a hand-written scanner: the
// equivalent regular expression cost most of Compute on large contexts).
func numberTokens(t string) [][2]int {
	var out [][2]int
	digit := func(i int) bool { return i < len(t) && t[i] >= '0' && t[i] <= '9' }
	digits := func(i int) int {
		for digit(i) {
			i++
		}
		return i
	}
	for i := 0; i < len(t); {
		if !digit(i) {
			i++
			continue
		}
		start := i
		if start > 0 && (t[start-1] == '-' || t[start-1] == '+') {
			start--
		}
		i = digits(i)
		if i+1 < len(t) && t[i] == '.' && digit(i+1) {
			i = digits(i + 1)
		}
		if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
			j := i + 1
			if j < len(t) && (t[j] == '-' || t[j] == '+') {
				j++
			}
			if digit(j) {
				i = digits(j)
			}
		}
		out = append(out, [2]int{start, i})
	}
	return out
}

// indexed is one entry, normalised once.
type indexed struct {
	src     Source
	text    string // normalised
	lower   string
	numbers map[string]bool
}

func index(entries []Entry, numbers bool) []indexed {
	out := make([]indexed, 0, len(entries))
	results := 0
	for _, e := range entries {
		src := Source{Kind: e.Kind}
		if e.Kind == SourceResult {
			results++
			src.Result, src.Capability, src.CallID, src.SourceURL = results, e.Capability, e.CallID, e.SourceURL
		}
		t := normalize(e.Text)
		ix := indexed{src: src, text: t, lower: strings.ToLower(t), numbers: map[string]bool{}}
		if !numbers {
			out = append(out, ix)
			continue
		}
		for _, loc := range numberTokens(t) {
			if glued(t, loc[0], loc[1]) {
				continue
			}
			ix.numbers[CanonicalNumber(t[loc[0]:loc[1]])] = true
		}
		out = append(out, ix)
	}
	return out
}

func (e indexed) contains(v Value) bool {
	switch v.Kind {
	case KindNumber:
		return e.numbers[v.Text] || tokenIn(e.text, v.Text)
	case KindHost, KindDomain:
		return tokenIn(e.lower, v.Text)
	default:
		return tokenIn(e.text, v.Text)
	}
}

// tokenIn reports whether needle occurs in hay not glued to further letters or digits.
func tokenIn(hay, needle string) bool {
	if needle == "" {
		return false
	}
	for from := 0; from <= len(hay)-len(needle); {
		i := strings.Index(hay[from:], needle)
		if i < 0 {
			return false
		}
		i += from
		if !glued(hay, i, i+len(needle)) {
			return true
		}
		from = i + 1
	}
	return false
}

// glued reports whether hay[i:j] touches a letter or digit on a side where its own edge is a
// letter or digit (so the match would be part of a longer word or number).
func glued(hay string, i, j int) bool {
	word := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	first, _ := utf8.DecodeRuneInString(hay[i:])
	last, _ := utf8.DecodeLastRuneInString(hay[:j])
	if i > 0 && word(first) {
		if prev, _ := utf8.DecodeLastRuneInString(hay[:i]); word(prev) {
			return true
		}
	}
	if j < len(hay) && word(last) {
		if next, _ := utf8.DecodeRuneInString(hay[j:]); word(next) {
			return true
		}
	}
	// A number continues through a decimal point followed by a digit: "98.7" in "98.75".
	if j+1 < len(hay) && hay[j] == '.' && hay[j+1] >= '0' && hay[j+1] <= '9' && last >= '0' && last <= '9' {
		return true
	}
	if i >= 2 && hay[i-1] == '.' && hay[i-2] >= '0' && hay[i-2] <= '9' && first >= '0' && first <= '9' {
		return true
	}
	return false
}
