package registry

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/internal/display"
)

// HTTP declares a capability served by one HTTP request, with no Go code (issue 19, item 2):
// the "http" object of an entry's airlock block. The registry fixes everything that is not an
// argument: the method, the base URL (so the host contacted), which arguments fill the path
// template's slots, which go to the query and which to the JSON body, the headers (only from
// named secrets, never from arguments), the accepted statuses and the response size. The
// arguments' JSON Schema is part of the block, so the entry is the whole contract.
//
//	"http": {
//	  "method": "POST",
//	  "url": "https://tickets.example.com/api",
//	  "path": "/projects/{project}/tickets",
//	  "body": ["title", "description"],
//	  "headers": [{"name": "Authorization", "secret": "tickets-token", "prefix": "Bearer "}],
//	  "accept/status": [201],
//	  "max/bytes": 65536,
//	  "idempotency/header": "Idempotency-Key",
//	  "arguments": {"type": "object", "additionalProperties": false, "required": [...], "properties": {...}}
//	}
//
// The timeout is the entry's airlock timeout. Rules (RuleHTTP): a known method; an absolute
// http(s) URL without user info, query or fragment; path slots, query and body fields that are
// declared arguments, each argument used exactly once; slots required and scalar; no body on
// GET or DELETE; header names valid and not set by Airlock itself; the destination a host
// equal to the URL's host as the client resolves it, with exactly the fields that are sent.
type HTTP struct {
	// Method is GET, POST, PUT, PATCH or DELETE.
	Method string `json:"method"`
	// URL is the fixed base URL: scheme, host, optional port and path prefix.
	URL string `json:"url"`
	// Path is appended to URL's path; each "{name}" slot is filled with the argument name,
	// path-escaped (a "/" in a value never adds a segment; "." and ".." are refused).
	Path string `json:"path,omitempty"`
	// Query are the arguments sent as query parameters (an array value repeats the parameter).
	Query []string `json:"query,omitempty"`
	// Body are the arguments sent as the members of a JSON object body.
	Body []string `json:"body,omitempty"`
	// Headers are set from named secrets.
	Headers []HTTPHeader `json:"headers,omitempty"`
	// AcceptStatus lists the response statuses that count as success (default: any 2xx).
	// Any other status is returned as the call's error, with the response as data.
	AcceptStatus []int `json:"accept/status,omitempty"`
	// MaxBytes caps the response body read (default DefaultHTTPMaxBytes); a longer response is
	// an error, never a cut JSON document.
	MaxBytes int64 `json:"max/bytes,omitempty"`
	// IdempotencyHeader, when set, names a header that carries the proposal's identity (the
	// same value on every attempt for one proposal), so the server can drop a repeat.
	IdempotencyHeader string `json:"idempotency/header,omitempty"`
	// Arguments is the JSON Schema of the arguments (absent: the capability takes none).
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// HTTPHeader is one header set from a secret: the header's value is Prefix followed by the
// secret's value. Secrets are named, never given: the worker reads them from the environment or
// a file (internal/capabilities.SecretsFromEnv) and never shows them.
type HTTPHeader struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
	Prefix string `json:"prefix,omitempty"`
}

// DefaultHTTPMaxBytes is the response cap of an HTTP capability that declares none (1 MiB).
const DefaultHTTPMaxBytes int64 = 1 << 20

// HTTPMethods are the methods an HTTP capability may use.
var HTTPMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

var (
	reSlot       = regexp.MustCompile(`\{([^{}]*)\}`)
	reSecretName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	// headers Airlock sets or the transport owns: a declaration may not replace them.
	reservedHeaders = []string{"Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection", "User-Agent", "Accept", "Accept-Encoding"}
)

// Slots lists the argument names of the path template's "{name}" slots, in order.
func (h *HTTP) Slots() []string {
	var out []string
	for _, m := range reSlot.FindAllStringSubmatch(h.Path, -1) {
		out = append(out, m[1])
	}
	return out
}

// Sent lists every argument the request carries (path slots, query, body), sorted: what the
// destination must declare as leaving.
func (h *HTTP) Sent() []string {
	out := slices.Concat(h.Slots(), h.Query, h.Body)
	sort.Strings(out)
	return slices.Compact(out)
}

// ArgumentSchema is the block's argument schema, or a schema of no arguments.
func (h *HTTP) ArgumentSchema() json.RawMessage {
	if len(h.Arguments) == 0 {
		return json.RawMessage(`{"type":"object","additionalProperties":false}`)
	}
	return h.Arguments
}

// BaseURL is the parsed base URL (valid after load).
func (h *HTTP) BaseURL() *url.URL {
	u, _ := url.Parse(h.URL)
	return u
}

// checkHTTP runs RuleHTTP on an entry with an http block.
func checkHTTP(src string, e Entry) []Diagnostic {
	h := e.Airlock.HTTP
	if h == nil {
		return nil
	}
	var p []Diagnostic
	bad := func(format string, a ...any) {
		p = append(p, Diagnostic{Source: src, Entry: e.Key(), Rule: RuleHTTP, Message: fmt.Sprintf(format, a...)})
	}
	if e.Airlock.SchemaRef != "" {
		bad("an http capability carries its argument schema in http.arguments, not schema/ref")
	}
	if !slices.Contains(HTTPMethods, h.Method) {
		bad("http method %q is not one of %s", h.Method, strings.Join(HTTPMethods, ", "))
	}
	u, err := url.Parse(h.URL)
	var host string
	switch {
	case err != nil:
		bad("http url does not parse: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		bad("http url %s is not http or https", quoteVisible(h.URL))
	case u.Host == "" || u.Opaque != "":
		bad("http url %s has no host", quoteVisible(h.URL))
	case u.User != nil:
		bad("http url carries user info: put credentials in a header from a secret")
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(h.URL, "?#"):
		bad("http url %s has a query or fragment: declare query arguments instead", quoteVisible(h.URL))
	default:
		if host, err = display.DialHost(u.Hostname()); err != nil {
			bad("http url host: %v", err)
		} else if display.HostDiffers(u.Hostname()) || strings.Contains(rawHostOf(h.URL), "%") {
			bad("http url host %s is contacted as %s: write it in that form", quoteVisible(rawHostOf(h.URL)), quoteVisible(host))
		}
	}
	// Path: slots name declared, required, scalar arguments; no other braces.
	if strings.ContainsAny(reSlot.ReplaceAllString(h.Path, ""), "{}?#") {
		bad("http path %s has an unbalanced brace, a query or a fragment", quoteVisible(h.Path))
	}
	if h.Path != "" && !strings.HasPrefix(h.Path, "/") {
		bad("http path %s does not start with /", quoteVisible(h.Path))
	}
	var schema struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Additional json.RawMessage            `json:"additionalProperties"`
	}
	if err := json.Unmarshal(h.ArgumentSchema(), &schema); err != nil {
		bad("http arguments is not a JSON Schema object: %v", err)
		return p
	}
	if schema.Type != "object" || strings.TrimSpace(string(schema.Additional)) != "false" {
		bad(`http arguments must be {"type": "object", "additionalProperties": false, ...}: every argument is declared`)
	}
	uses := map[string][]string{}
	for _, s := range h.Slots() {
		uses[s] = append(uses[s], "path")
		if !slices.Contains(schema.Required, s) {
			bad("path slot {%s} is not a required argument", display.Visible(s))
		}
		if prop, ok := schema.Properties[s]; ok {
			var t struct {
				Type any `json:"type"`
			}
			_ = json.Unmarshal(prop, &t)
			if t.Type != "string" && t.Type != "integer" {
				bad("path slot {%s} must be a string or integer argument", display.Visible(s))
			}
		}
	}
	for _, q := range h.Query {
		uses[q] = append(uses[q], "query")
	}
	for _, b := range h.Body {
		uses[b] = append(uses[b], "body")
	}
	names := make([]string, 0, len(uses))
	for n := range uses {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := schema.Properties[n]; !ok {
			bad("%s uses %s, which is not a declared argument", strings.Join(uses[n], " and "), quoteVisible(n))
		}
		if len(uses[n]) > 1 {
			bad("argument %s is sent twice (%s)", quoteVisible(n), strings.Join(uses[n], ", "))
		}
	}
	for n := range schema.Properties {
		if _, ok := uses[n]; !ok {
			bad("argument %s is declared but never sent (add it to path, query or body)", quoteVisible(n))
		}
	}
	if len(h.Body) > 0 && (h.Method == http.MethodGet || h.Method == http.MethodDelete) {
		bad("a %s request carries no body", h.Method)
	}
	seen := map[string]bool{}
	for _, hd := range h.Headers {
		name := textproto.CanonicalMIMEHeaderKey(hd.Name)
		switch {
		case !validHeaderName(hd.Name):
			bad("header name %s is not a valid HTTP header name", quoteVisible(hd.Name))
		case slices.Contains(reservedHeaders, name) || name == textproto.CanonicalMIMEHeaderKey(h.IdempotencyHeader):
			bad("header %s is set by Airlock and cannot come from a secret", name)
		case seen[name]:
			bad("header %s is declared twice", name)
		}
		seen[name] = true
		if !reSecretName.MatchString(hd.Secret) {
			bad("header %s: secret name %s must match %s", name, quoteVisible(hd.Secret), reSecretName)
		}
		if display.Flagged(hd.Prefix) {
			bad("header %s: prefix holds control or hidden characters", name)
		}
	}
	if h.IdempotencyHeader != "" {
		if !validHeaderName(h.IdempotencyHeader) || slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(h.IdempotencyHeader)) {
			bad("idempotency/header %s is not a usable header name", quoteVisible(h.IdempotencyHeader))
		}
	}
	for _, s := range h.AcceptStatus {
		if s < 100 || s > 599 {
			bad("accept/status %d is not an HTTP status", s)
		}
	}
	if h.MaxBytes < 0 {
		bad("max/bytes %d is negative", h.MaxBytes)
	}
	// The destination is the host contacted, with exactly the arguments sent.
	d := e.Airlock.Destination
	switch {
	case d == nil:
		// RuleDestinationDeclared reports it for external entries; an HTTP one always needs it.
		if !e.External() {
			bad("an http capability declares its destination (kind host, the url's host, the fields sent)")
		}
	case d.Kind != DestinationHost:
		bad("an http capability's destination is kind host, not %s", d.Kind)
	case host != "" && d.Name != host:
		bad("destination host %s is not the url's host %s", quoteVisible(d.Name), quoteVisible(host))
	case !slices.Equal(sortedCopy(d.Fields), h.Sent()):
		bad("destination fields %v are not the arguments sent %v", d.Fields, h.Sent())
	}
	return p
}

// rawHostOf is the host as written in a URL string (before url.Parse decodes escapes).
func rawHostOf(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if strings.HasPrefix(s, "[") {
		if i := strings.IndexByte(s, ']'); i >= 0 {
			return s[:i+1]
		}
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return s
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
