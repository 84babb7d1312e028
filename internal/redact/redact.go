// Package redact keeps secrets out of error messages and log lines: it masks the password
// and secret query parameters of a URL or DSN, and scrubs known secret values (API keys,
// passwords) from text produced by other libraries. It is the one place Airlock redacts;
// every error or log line that may carry a database URL, an API key or a key must go
// through it (rule: no error message ever contains a secret).
//
// Redaction is conservative: when input is malformed, more is masked, never less.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Mask replaces every secret.
const Mask = "xxxxx"

// secretKeyParts mark a query or key=value parameter whose value is a secret: its name,
// lowercased with "-" and "_" removed, contains one of them (password, sslpassword, passwd,
// sslkey, api_key, apikey, access_token, client_secret, authorization, sig, credentials…).
// Masking a parameter that is not secret (passfile, sslkey's path) only costs diagnostics.
var secretKeyParts = []string{"pass", "pwd", "secret", "token", "key", "auth", "sig", "cred"}

// SecretKey reports whether a parameter named name carries a secret value (see
// secretKeyParts).
func SecretKey(name string) bool {
	n := strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(name))
	for _, p := range secretKeyParts {
		if strings.Contains(n, p) {
			return true
		}
	}
	return false
}

// URL returns raw with its secrets masked, in a form fit for an error message:
//   - userinfo "user:password@" becomes "user:xxxxx@"; userinfo that is not a plain
//     "user:password" (a reserved character such as '/' before the last '@', or no "//"
//     before it) is masked whole, so a password that broke URL parsing never shows;
//   - when a '?' or '#' comes before the last '@' (a password holding them, or an '@' in a
//     query value), nothing after the scheme is shown: "scheme:xxxxx";
//   - the value of every query parameter named like a secret (SecretKey) is masked, and so are
//     following '&'-separated pieces without '=' (an unescaped '&' inside the secret);
//   - a fragment is masked whole.
//
// Input that does not start with a URL scheme ("scheme:") is not shown at all: the result is
// "xxxxx (not a URL)". The empty string stays empty. URL never fails and never panics.
func URL(raw string) string {
	if raw == "" {
		return ""
	}
	scheme, rest, ok := cutScheme(raw)
	if !ok {
		return Mask + " (not a URL)"
	}
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteByte(':')
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		user := rest[:i]
		if strings.ContainsAny(user, "?#") {
			// The '@' may sit in a query value or after a password holding '?' or '#':
			// nothing tells which part is secret, so nothing is shown.
			return b.String() + Mask
		}
		if after, slashes := strings.CutPrefix(user, "//"); slashes {
			b.WriteString("//")
			user = after
		}
		name, _, hasPass := strings.Cut(user, ":")
		switch {
		case !strings.HasPrefix(rest, "//") || strings.ContainsAny(user, "/;&= "):
			b.WriteString(Mask) // not a plain userinfo: mask it all
		case hasPass:
			b.WriteString(name + ":" + Mask)
		default:
			b.WriteString(user) // a user name alone, as url.URL.Redacted keeps it
		}
		b.WriteByte('@')
		rest = rest[i+1:]
	}
	rest, frag, hasFrag := strings.Cut(rest, "#")
	head, query, hasQuery := strings.Cut(rest, "?")
	b.WriteString(head)
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(maskQuery(query))
	}
	if hasFrag && frag != "" {
		b.WriteString("#" + Mask)
	}
	return b.String()
}

// cutScheme splits "scheme:rest" when scheme is a valid URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' or '.'). The scheme is returned lowercased.
func cutScheme(raw string) (scheme, rest string, ok bool) {
	scheme, rest, found := strings.Cut(raw, ":")
	if !found || scheme == "" || len(scheme) > 32 {
		return "", "", false
	}
	for i, c := range scheme {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", "", false
		}
	}
	return strings.ToLower(scheme), rest, true
}

// nestsSecret reports whether a parameter value carries a secret parameter of its own, such as
// libpq's options=-c password=… (the value, query-unescaped, holds "name=" with a secret name).
func nestsSecret(v string) bool {
	if u, err := url.QueryUnescape(v); err == nil {
		v = u
	}
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == '&' || r == ',' || r == ';' }) {
		if k, _, ok := strings.Cut(f, "="); ok && SecretKey(k) {
			return true
		}
	}
	return false
}

// maskQuery masks the values of secret parameters in an '&'-separated query.
func maskQuery(query string) string {
	parts := strings.Split(query, "&")
	masking := false
	for i, p := range parts {
		k, v, hasValue := strings.Cut(p, "=")
		switch {
		case hasValue && (SecretKey(k) || nestsSecret(v)):
			parts[i] = k + "=" + Mask
			masking = true
		case hasValue:
			masking = false
		case masking: // a piece without '=' after a secret: part of the secret
			parts[i] = Mask
		}
	}
	return strings.Join(parts, "&")
}

// URLSecrets returns the substrings of raw that must never appear in a message: the
// userinfo password (as written and percent-decoded), the values of secret query parameters,
// and raw itself. Pass them to String or Error to scrub text that a library built from raw.
func URLSecrets(raw string) []string {
	if raw == "" {
		return nil
	}
	out := []string{raw}
	_, rest, ok := cutScheme(raw)
	if !ok {
		return out
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		user := strings.TrimPrefix(rest[:i], "//")
		if strings.ContainsAny(user, "?#") {
			// Ambiguous (see URL): every piece of the URL counts as secret.
			return append(out, strings.FieldsFunc(rest, func(r rune) bool { return strings.ContainsRune("/:@?#&=", r) })...)
		}
		if _, pass, ok := strings.Cut(user, ":"); ok {
			out = append(out, pass, unescape(pass))
		} else {
			out = append(out, user) // not a plain userinfo: treat it all as secret
		}
		rest = rest[i+1:]
	}
	if _, query, ok := strings.Cut(rest, "?"); ok {
		query, _, _ = strings.Cut(query, "#")
		for _, p := range strings.Split(query, "&") {
			if k, v, ok := strings.Cut(p, "="); ok && SecretKey(k) {
				out = append(out, v, unescape(v))
			}
		}
	}
	return out
}

// unescape percent-decodes s, leaving malformed escapes as they are.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// String returns s with every occurrence of each secret replaced by Mask. Secrets shorter
// than 3 bytes are ignored (masking every "a" would garble the text and protect nothing);
// longer secrets are replaced first, so a secret containing another is masked whole.
func String(s string, secrets ...string) string {
	sorted := make([]string, 0, len(secrets))
	for _, sec := range secrets {
		if len(sec) >= 3 {
			sorted = append(sorted, sec)
		}
	}
	// longest first
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && len(sorted[j]) > len(sorted[j-1]); j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	for _, sec := range sorted {
		s = strings.ReplaceAll(s, sec, Mask)
	}
	return s
}

// Error returns err with every secret scrubbed from its message (see String); errors.Is and
// errors.As still reach err and everything it wraps. A nil err stays nil; an err whose
// message holds no secret is returned unchanged.
//
// The result does not Unwrap: whatever walks an error's chain by Unwrap and writes each
// link's message (Temporal's failure converter puts every link into history as a cause, and
// from there into turn show, the audit and the receipts) would otherwise write the secrets
// back. Its own message already says everything the links did, scrubbed.
func Error(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := String(msg, secrets...); clean != msg {
		return &scrubbed{msg: clean, err: err}
	}
	return err
}

// scrubbed is an error whose message had secrets removed: Is and As reach the original
// chain, Unwrap does not (see Error).
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string        { return e.msg }
func (e *scrubbed) Is(target error) bool { return errors.Is(e.err, target) }
func (e *scrubbed) As(target any) bool   { return errors.As(e.err, target) }
