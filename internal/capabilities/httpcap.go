package capabilities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/registry"
)

// Errors of HTTP capabilities (issue 19, item 2). Each wraps into the call's capability error;
// callers branch with errors.Is.
var (
	// ErrSecretMissing: a header names a secret that is neither in the environment nor in the
	// secrets folder. The registry does not load (fail closed).
	ErrSecretMissing = errors.New("capabilities: secret not found")
	// ErrPathValue: a path slot's value is empty, "." or "..": it would change the path's
	// shape, so nothing is sent.
	ErrPathValue = errors.New("capabilities: path argument would change the path")
	// ErrResponseTooLarge: the response body is longer than the capability's max/bytes. The
	// request was sent; the response is not returned.
	ErrResponseTooLarge = errors.New("capabilities: response too large")
)

// Secrets returns the value of a named secret (registry.HTTPHeader.Secret), or an error
// wrapping ErrSecretMissing. Values are never logged or shown.
type Secrets func(name string) (string, error)

// SecretEnvVar is the environment variable a secret is read from first:
// AIRLOCK_SECRET_<NAME>, upper-cased, every character other than a letter or digit as "_"
// ("tickets-token" → AIRLOCK_SECRET_TICKETS_TOKEN).
func SecretEnvVar(name string) string {
	var b strings.Builder
	b.WriteString("AIRLOCK_SECRET_")
	for _, r := range strings.ToUpper(name) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// SecretsFrom reads a secret from the environment (SecretEnvVar) or else from the file
// dir/<name> (its content without a trailing newline; dir "" means no folder). A secret that
// is empty counts as missing.
func SecretsFrom(dir string) Secrets {
	return func(name string) (string, error) {
		if v := os.Getenv(SecretEnvVar(name)); v != "" {
			return v, nil
		}
		if dir != "" && !strings.ContainsAny(name, `/\`) && name != "." && name != ".." {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err == nil {
				if v := strings.TrimRight(string(b), "\r\n"); v != "" {
					return v, nil
				}
			}
		}
		where := SecretEnvVar(name)
		if dir != "" {
			where += " or the file " + filepath.Join(dir, name)
		}
		return "", fmt.Errorf("%w: %q (set %s)", ErrSecretMissing, name, where)
	}
}

// HTTPCapabilities binds every entry that declares an http block to an Implementation that
// performs its request through f's connection policy (the same connect-time address checks as
// web.fetch: public addresses, the private allow-list, never Airlock's own services; no
// environment proxy). Secrets are read now, at load, so a missing one stops the load; a reload
// reads them again. Entries without an http block are skipped.
func HTTPCapabilities(entries []registry.Entry, f *Fetcher, secrets Secrets) ([]registry.Implementation, error) {
	var out []registry.Implementation
	for _, e := range entries {
		h := e.Airlock.HTTP
		if h == nil {
			continue
		}
		hc, err := newHTTPCall(e, h, f, secrets)
		if err != nil {
			return nil, fmt.Errorf("capabilities: http capability %s: %w", e.Key(), err)
		}
		out = append(out, registry.Implementation{ID: e.ID, Version: e.Version, Schema: h.ArgumentSchema(), Invoke: hc.invoke})
	}
	return out, nil
}

// httpCall is one bound HTTP capability.
type httpCall struct {
	key      string
	h        *registry.HTTP
	base     *url.URL
	headers  http.Header
	secrets  []string // values, redacted from responses and errors
	accept   []int
	maxBytes int64
	timeout  time.Duration
	f        *Fetcher
	client   *http.Client
}

func newHTTPCall(e registry.Entry, h *registry.HTTP, f *Fetcher, secrets Secrets) (*httpCall, error) {
	base, err := url.Parse(h.URL)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if e.DestinationOf().Internal {
		f = f.Internal() // an internal service is dialed only at a non-public, allow-listed address
	}
	hc := &httpCall{key: e.Key(), h: h, base: base, headers: http.Header{}, accept: h.AcceptStatus, maxBytes: h.MaxBytes,
		timeout: e.TimeoutDuration(), f: f}
	if hc.maxBytes <= 0 {
		hc.maxBytes = registry.DefaultHTTPMaxBytes
	}
	for _, hd := range h.Headers {
		if secrets == nil {
			return nil, fmt.Errorf("header %s: %w: %q (no secret source configured)", hd.Name, ErrSecretMissing, hd.Secret)
		}
		v, err := secrets(hd.Secret)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", hd.Name, err)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("header %s: secret %q holds a line break or NUL", hd.Name, hd.Secret)
		}
		hc.headers.Set(hd.Name, hd.Prefix+v)
		hc.secrets = append(hc.secrets, v)
	}
	// The web.fetch transport (its dialer checks every address connected to); redirects are
	// never followed: the registry fixes the host, a redirect would choose another.
	hc.client = &http.Client{Transport: f.client.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return hc, nil
}

// HTTPResult is the Data of an HTTP capability's Output: the status and the response body (a
// JSON value when the response is JSON, else its text). It is untrusted data like every
// result; Output.SourceURL is the URL requested.
type HTTPResult struct {
	Status      int             `json:"status"`
	ContentType string          `json:"content_type,omitempty"`
	Body        json.RawMessage `json:"body,omitempty"`
}

// request builds the request for the validated arguments.
func (hc *httpCall) request(ctx context.Context, inv registry.Invocation) (*http.Request, error) {
	var args map[string]json.RawMessage
	if len(inv.Arguments) > 0 {
		if err := json.Unmarshal(inv.Arguments, &args); err != nil {
			return nil, fmt.Errorf("arguments: %w", err)
		}
	}
	// Path: each slot escaped as one segment.
	var path strings.Builder
	rest := hc.h.Path
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			path.WriteString(rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}') + i
		path.WriteString(rest[:i])
		name := rest[i+1 : j]
		v, err := scalar(args[name])
		if err != nil {
			return nil, fmt.Errorf("path argument %s: %w", name, err)
		}
		if v == "" || v == "." || v == ".." {
			return nil, fmt.Errorf("%w: %s = %q", ErrPathValue, name, v)
		}
		path.WriteString(url.PathEscape(v))
		rest = rest[j+1:]
	}
	u := *hc.base
	u.RawPath = strings.TrimSuffix(hc.base.EscapedPath(), "/") + path.String()
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, fmt.Errorf("path: %w", err)
	}
	u.Path = p
	q := url.Values{}
	for _, name := range hc.h.Query {
		raw, ok := args[name]
		if !ok || string(raw) == "null" {
			continue
		}
		if len(raw) > 0 && raw[0] == '[' {
			var items []json.RawMessage
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, fmt.Errorf("query argument %s: %w", name, err)
			}
			for _, it := range items {
				v, err := scalar(it)
				if err != nil {
					return nil, fmt.Errorf("query argument %s: %w", name, err)
				}
				q.Add(name, v)
			}
			continue
		}
		v, err := scalar(raw)
		if err != nil {
			return nil, fmt.Errorf("query argument %s: %w", name, err)
		}
		q.Set(name, v)
	}
	u.RawQuery = q.Encode()
	var body io.Reader
	if len(hc.h.Body) > 0 {
		obj := map[string]json.RawMessage{}
		for _, name := range hc.h.Body {
			if raw, ok := args[name]; ok {
				obj[name] = raw
			}
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, hc.h.Method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	for k, v := range hc.headers {
		req.Header[k] = slices.Clone(v)
	}
	req.Header.Set("User-Agent", "Airlock-HTTP/1 ("+hc.key+")")
	req.Header.Set("Accept", "application/json, text/*;q=0.8")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if hc.h.IdempotencyHeader != "" {
		req.Header.Set(hc.h.IdempotencyHeader, IdempotencyKey(inv.WorkflowID, inv.Seq))
	}
	return req, nil
}

// IdempotencyKey is the value of an HTTP capability's idempotency header for the proposal
// (turn workflow id, proposal sequence): "airlock-" and 32 hex digits of their SHA-256, the
// same on every attempt for that proposal and different for every other one.
func IdempotencyKey(workflowID string, seq int) string {
	sum := sha256.Sum256([]byte(workflowID + "\x00" + strconv.Itoa(seq)))
	return "airlock-" + hex.EncodeToString(sum[:16])
}

// scalar renders a JSON string, number or boolean as text for a path or query.
func scalar(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", errors.New("missing")
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch t := v.(type) {
	case string:
		return t, nil
	case json.Number:
		return t.String(), nil
	case bool:
		return strconv.FormatBool(t), nil
	}
	return "", errors.New("not a string, number or boolean")
}

func (hc *httpCall) invoke(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	if hc.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, hc.timeout)
		defer cancel()
	}
	req, err := hc.request(ctx, inv)
	if err != nil {
		return registry.Output{}, fmt.Errorf("%s: not sent: %w", hc.key, err)
	}
	target := req.URL.Redacted()
	if err := hc.f.checkURL(req.URL); err != nil {
		return registry.Output{}, fmt.Errorf("%s %s: not sent: %w", hc.h.Method, target, err)
	}
	var wrote atomic.Bool // set once the request's first byte is written: it may take effect
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}))
	resp, err := hc.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		err = policyError(err)
		if !wrote.Load() {
			return registry.Output{}, hc.redact(fmt.Errorf("%s %s: not sent: %w", hc.h.Method, target, err))
		}
		return registry.Output{}, hc.redact(fmt.Errorf("%s %s: sent, no answer: %w: %w", hc.h.Method, target, registry.ErrOutcomeUnknown, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, hc.maxBytes+1))
	if err != nil {
		return registry.Output{}, hc.redact(fmt.Errorf("%s %s: status %d, the response broke off: %w", hc.h.Method, target, resp.StatusCode, err))
	}
	if int64(len(body)) > hc.maxBytes {
		return registry.Output{}, fmt.Errorf("%s %s: status %d: %w (over %d bytes)", hc.h.Method, target, resp.StatusCode, ErrResponseTooLarge, hc.maxBytes)
	}
	// The status line and the content type are the server's text too: a secret it echoes
	// there is replaced like one in the body.
	res := HTTPResult{Status: resp.StatusCode, ContentType: hc.scrubText(resp.Header.Get("Content-Type"))}
	res.Body = hc.bodyValue(body, res.ContentType)
	data, err := json.Marshal(res)
	if err != nil {
		return registry.Output{}, fmt.Errorf("%s: encode result: %w", hc.key, err)
	}
	out := registry.Output{Data: data, SourceURL: req.URL.String()}
	if !hc.accepted(resp.StatusCode) {
		out.Error = fmt.Sprintf("%s %s answered %s (accepted: %s)", hc.h.Method, target, hc.scrubText(resp.Status), hc.acceptText())
	}
	return out, nil
}

// bodyValue is the response body as a JSON value: the document itself when the response is
// JSON and parses, else its text as a string (invalid UTF-8 replaced). Secret values the server
// echoed are replaced.
func (hc *httpCall) bodyValue(body []byte, contentType string) json.RawMessage {
	if len(body) == 0 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	text := hc.scrubText(string(body))
	if (mt == "application/json" || strings.HasSuffix(mt, "+json")) && json.Valid([]byte(text)) {
		var b bytes.Buffer
		if json.Compact(&b, []byte(text)) == nil {
			return b.Bytes()
		}
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	b, _ := json.Marshal(text)
	return b
}

func (hc *httpCall) accepted(status int) bool {
	if len(hc.accept) == 0 {
		return status >= 200 && status <= 299
	}
	return slices.Contains(hc.accept, status)
}

func (hc *httpCall) acceptText() string {
	if len(hc.accept) == 0 {
		return "2xx"
	}
	parts := make([]string, len(hc.accept))
	for i, s := range hc.accept {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ", ")
}

// scrubText replaces every secret value in text with "[secret]".
func (hc *httpCall) scrubText(text string) string {
	for _, s := range hc.secrets {
		text = strings.ReplaceAll(text, s, "[secret]")
	}
	return text
}

// redact replaces secret values in an error's text (a transport error may quote a header).
func (hc *httpCall) redact(err error) error {
	msg := err.Error()
	changed := false
	for _, s := range hc.secrets {
		if strings.Contains(msg, s) {
			msg, changed = strings.ReplaceAll(msg, s, "[secret]"), true
		}
	}
	if !changed {
		return err
	}
	return redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }

// Is and As reach the wrapped error; it does not Unwrap, so nothing that walks a chain by
// Unwrap and prints each link (Temporal's failure converter) ever prints the wrapped error's
// own text (see redact.Error).
func (e redactedError) Is(target error) bool { return errors.Is(e.err, target) }
func (e redactedError) As(target any) bool   { return errors.As(e.err, target) }
