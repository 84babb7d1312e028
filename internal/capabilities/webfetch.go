package capabilities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html/charset"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/registry"
)

// Defaults applied by NewFetcher to zero FetchConfig fields.
const (
	// DefaultFetchMaxBytes is the default cap on the response body read, in bytes (2 MiB).
	DefaultFetchMaxBytes int64 = 2 << 20
	// DefaultFetchTimeout is the default bound on one whole fetch: dials, redirects, headers
	// and body.
	DefaultFetchTimeout = 15 * time.Second
	// DefaultFetchMaxRedirects is the default number of redirects followed.
	DefaultFetchMaxRedirects = 5
	// DefaultFetchUserAgent is the User-Agent header sent when FetchConfig.UserAgent is empty.
	DefaultFetchUserAgent = "Airlock-WebFetch/1 (+https://github.com/airlock-dev/airlock)"
)

// TruncationMark is appended, on a line of its own, to the Content of a citation whose
// text/* or HTML body was longer than FetchConfig.MaxBytes and was cut at that many bytes.
const TruncationMark = "[content truncated]"

// Errors returned by Fetcher.Fetch. They are wrapped with the URL (and, for blocked addresses,
// the address) so callers branch with errors.Is.
var (
	// ErrBlockedAddress: the URL's host, a redirect target or an address it resolved to is not
	// allowed by the address policy (see PublicAddr, FetchConfig.Allow, Protected and
	// AllowAddr). The concrete error is a *BlockedAddressError carrying the address and the
	// rule that refused it.
	ErrBlockedAddress = errors.New("capabilities: blocked address")
	// ErrProtectedAddress: the refused address is one of Airlock's own services
	// (FetchConfig.Protected). Errors matching it also match ErrBlockedAddress.
	ErrProtectedAddress = errors.New("capabilities: protected Airlock service")
	// ErrScheme: the URL or a redirect target is not http or https.
	ErrScheme = errors.New("capabilities: scheme not allowed")
	// ErrInvalidURL: the URL does not parse, is not absolute, has no host, or carries
	// userinfo (user:password@).
	ErrInvalidURL = errors.New("capabilities: invalid url")
	// ErrTooManyRedirects: the server redirected more than FetchConfig.MaxRedirects times.
	ErrTooManyRedirects = errors.New("capabilities: too many redirects")
	// ErrTooLarge: a JSON body was longer than FetchConfig.MaxBytes. JSON is refused rather
	// than truncated because a cut document is not JSON; text and HTML are truncated and
	// marked with TruncationMark instead.
	ErrTooLarge = errors.New("capabilities: response too large")
	// ErrUnsupportedContentType: the response is neither HTML (text/html,
	// application/xhtml+xml), other text/*, nor JSON (application/json, application/*+json).
	ErrUnsupportedContentType = errors.New("capabilities: unsupported content type")
	// ErrHTTPStatus: the final response status was not 2xx. The concrete error is a
	// *HTTPStatusError.
	ErrHTTPStatus = errors.New("capabilities: unsuccessful http status")
	// ErrTimeout: the fetch did not finish within FetchConfig.Timeout. The caller's own
	// context ending is reported with the context's error instead.
	ErrTimeout = errors.New("web.fetch timed out")
)

// BlockReason is the rule of the address policy that refused an address.
type BlockReason int

const (
	// BlockNotAllowed: the address is not public and no FetchConfig.Allow entry matches it
	// (or FetchConfig.AllowAddr refused it, or the dial was not TCP).
	BlockNotAllowed BlockReason = iota + 1
	// BlockProtected: the address is one of Airlock's own services (FetchConfig.Protected),
	// refused whatever the allow-list says.
	BlockProtected
	// BlockPublic: the address is public, but the call's destination is declared internal
	// (registry Destination.Internal): an internal service is reached only at a non-public
	// address in the allow-list, so a DNS answer that moved the name to the internet is refused.
	BlockPublic
)

// BlockedAddressError reports the address a fetch refused to connect to, and why. It matches
// ErrBlockedAddress with errors.Is, and also ErrProtectedAddress when Reason is
// BlockProtected.
type BlockedAddressError struct {
	// Addr is the IP and port that was refused (port 0 when not known); zero when the URL's
	// hostname itself was refused before any lookup (then Host is set).
	Addr netip.AddrPort
	// Host is the "name:port" refused by name (a protected service's hostname), else "".
	Host string
	// Reason is the rule that refused it.
	Reason BlockReason
	// Service names the protected service when Reason is BlockProtected ("Temporal UI").
	Service string
}

// Error returns "capabilities: blocked address: <ip:port> (<rule>)", where the rule is
// "not public and not in the fetch allow-list" or "protected Airlock service: <service>".
func (e *BlockedAddressError) Error() string {
	target := e.Host
	if target == "" {
		target = e.Addr.String()
	}
	switch e.Reason {
	case BlockProtected:
		return fmt.Sprintf("%v: %s (protected Airlock service: %s)", ErrBlockedAddress, target, e.Service)
	case BlockNotAllowed:
		return fmt.Sprintf("%v: %s (not public and not in the fetch allow-list)", ErrBlockedAddress, target)
	case BlockPublic:
		return fmt.Sprintf("%v: %s (a public address, but the destination is declared internal: only non-public addresses in the fetch allow-list are dialed)", ErrBlockedAddress, target)
	}
	return fmt.Sprintf("%v: %s", ErrBlockedAddress, target)
}

// Unwrap returns ErrBlockedAddress, and ErrProtectedAddress for a protected service.
func (e *BlockedAddressError) Unwrap() []error {
	if e.Reason == BlockProtected {
		return []error{ErrBlockedAddress, ErrProtectedAddress}
	}
	return []error{ErrBlockedAddress}
}

// HTTPStatusError reports a non-2xx final response. It matches ErrHTTPStatus with errors.Is.
type HTTPStatusError struct {
	// Code is the HTTP status code, Status the status line text ("404 Not Found").
	Code   int
	Status string
}

// Error returns "capabilities: unsuccessful http status: <status>".
func (e *HTTPStatusError) Error() string {
	return fmt.Sprintf("%v: %s", ErrHTTPStatus, e.Status)
}

// Unwrap returns ErrHTTPStatus.
func (e *HTTPStatusError) Unwrap() error { return ErrHTTPStatus }

// FetchArgs are the arguments of web.fetch@1.
type FetchArgs struct {
	// URL is the absolute http or https URL to fetch.
	URL string `json:"url" validate:"required,url,max=2048" jsonschema:"description=Absolute http or https URL of the page to fetch,format=uri,maxLength=2048"`
}

// FetchConfig configures a Fetcher. The zero value is the safe default: public addresses
// only, 2 MiB, 15 s, 5 redirects. The address policy is Protected first (always refused),
// then public addresses (allowed), then Allow (the only way to a non-public address).
type FetchConfig struct {
	// MaxBytes caps the response body read, in bytes; <= 0 means DefaultFetchMaxBytes.
	MaxBytes int64
	// Timeout bounds the whole fetch (all dials, redirects, headers and body);
	// <= 0 means DefaultFetchTimeout.
	Timeout time.Duration
	// MaxRedirects is how many redirects are followed; 0 means DefaultFetchMaxRedirects and a
	// negative value means none.
	MaxRedirects int
	// Allow is the private allow-list (ParseAllowList; AIRLOCK_FETCH_ALLOW): a non-public
	// address (not PublicAddr) is connected to only when an entry matches its IP and port.
	// Empty: public addresses only.
	Allow []AllowRule
	// Protected is the deny-list (ResolveProtected): Airlock's own services, never connected
	// to, whatever Allow, AllowAddr or PublicAddr say.
	Protected []ProtectedAddr
	// AllowAddr, when non-nil, replaces PublicAddr and Allow (not Protected): a connection to
	// an IP and port is made only if it returns true. It is consulted for every address
	// actually dialed, and for IP-literal hosts in the URL and redirects.
	AllowAddr func(netip.AddrPort) bool
	// UserAgent is the User-Agent header; "" means DefaultFetchUserAgent.
	UserAgent string
}

// Fetcher performs policy-checked HTTP GETs for web.fetch. It is safe for concurrent use and
// keeps a connection pool, so build one per process.
//
// The address policy is enforced in the dialer on the IP actually being connected to (after
// DNS resolution, for every redirect hop and every connection attempt), so a DNS answer, a
// redirect or a DNS rebinding that points at a protected service, or at a non-public address
// outside the allow-list, is refused. Environment proxies are not used.
type Fetcher struct {
	cfg          FetchConfig
	maxRedirects int
	client       *http.Client
	// internalOnly: public addresses are refused (Internal).
	internalOnly bool

	internalOnce sync.Once
	internal     *Fetcher
}

// Internal is the fetcher for capabilities whose destination is declared internal (registry
// Destination.Internal, the read-only calls that may run without a human): the same
// configuration, its own connection pool, and an address policy that connects only to
// non-public addresses the allow-list (FetchConfig.Allow or AllowAddr) admits, never to a public
// one (BlockPublic) nor to Airlock's own services. Built once per Fetcher.
func (f *Fetcher) Internal() *Fetcher {
	if f.internalOnly {
		return f
	}
	f.internalOnce.Do(func() {
		f.internal = NewFetcher(f.cfg)
		f.internal.internalOnly = true
	})
	return f.internal
}

// NewFetcher returns a Fetcher for cfg with defaults applied to zero fields.
func NewFetcher(cfg FetchConfig) *Fetcher {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultFetchMaxBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultFetchTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultFetchUserAgent
	}
	f := &Fetcher{cfg: cfg, maxRedirects: cfg.MaxRedirects}
	switch {
	case cfg.MaxRedirects == 0:
		f.maxRedirects = DefaultFetchMaxRedirects
	case cfg.MaxRedirects < 0:
		f.maxRedirects = 0
	}
	dialer := &net.Dialer{
		Timeout:   cfg.Timeout,
		KeepAlive: 30 * time.Second,
		Control:   f.control,
	}
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would dial the target on our behalf, past the check
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    min(10*time.Second, cfg.Timeout),
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConns:           16,
		// As many idle connections to one host as to all: net/http keeps 2 per host by default,
		// and an HTTP capability (which shares this transport) called by 16 turns at once would
		// open a new connection, with its TLS handshake, for nearly every call.
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	f.client = &http.Client{Transport: transport, CheckRedirect: f.checkRedirect}
	return f
}

// check applies the address policy to one IP and port: nil when it may be connected to.
func (f *Fetcher) check(ap netip.AddrPort) *BlockedAddressError {
	ip := ap.Addr().WithZone("").Unmap()
	key := netip.AddrPortFrom(ip, ap.Port())
	for _, p := range f.cfg.Protected {
		if p.Prefix.IsValid() && p.Port == ap.Port() && p.Prefix.Contains(ip) {
			return &BlockedAddressError{Addr: ap, Reason: BlockProtected, Service: p.Service}
		}
	}
	if f.internalOnly && PublicAddr(ip) {
		return &BlockedAddressError{Addr: ap, Reason: BlockPublic}
	}
	if f.cfg.AllowAddr != nil {
		if f.cfg.AllowAddr(ap) {
			return nil
		}
		return &BlockedAddressError{Addr: ap, Reason: BlockNotAllowed}
	}
	if PublicAddr(ip) {
		return nil
	}
	for _, r := range f.cfg.Allow {
		if r.matches(key) {
			return nil
		}
	}
	return &BlockedAddressError{Addr: ap, Reason: BlockNotAllowed}
}

// checkName refuses a URL whose hostname is a protected service's, on its port. The name is
// compared in the form the transport dials (display.DialHost: "ｌｏｃａｌｈｏｓｔ" is localhost).
func (f *Fetcher) checkName(host string, port uint16) *BlockedAddressError {
	if d, err := display.DialHost(host); err == nil {
		host = d
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, p := range f.cfg.Protected {
		if p.Host != "" && p.Host == host && p.Port == port {
			return &BlockedAddressError{Host: net.JoinHostPort(host, strconv.Itoa(int(port))), Reason: BlockProtected, Service: p.Service}
		}
	}
	return nil
}

// control runs after DNS resolution, just before each connect (every redirect hop, every
// address tried): address is the literal IP:port being dialed.
func (f *Fetcher) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable dial address %q", ErrBlockedAddress, address)
	}
	if network != "tcp4" && network != "tcp6" {
		return &BlockedAddressError{Addr: ap, Reason: BlockNotAllowed}
	}
	if be := f.check(ap); be != nil {
		return be
	}
	return nil
}

// checkURL refuses URLs that must never be requested: non-http(s) schemes, userinfo, no host,
// IP-literal hosts outside the address policy, and protected services' hostnames (other
// hostnames are checked on the addresses they resolve to, at dial time).
func (f *Fetcher) checkURL(u *url.URL) error {
	if !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https") {
		return fmt.Errorf("%w: %q", ErrScheme, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: userinfo not allowed", ErrInvalidURL)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return fmt.Errorf("%w: no host", ErrInvalidURL)
	}
	port := uint16(80)
	if strings.EqualFold(u.Scheme, "https") {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return fmt.Errorf("%w: port %q", ErrInvalidURL, p)
		}
		port = uint16(n)
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		if be := f.checkName(u.Hostname(), port); be != nil {
			return be
		}
		return nil // a hostname: its resolved addresses are checked by control
	}
	if be := f.check(netip.AddrPortFrom(ip, port)); be != nil {
		return be
	}
	return nil
}

func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.maxRedirects {
		return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, f.maxRedirects)
	}
	return f.checkURL(req.URL)
}

// Fetch GETs rawURL and returns it as a citation: URL is rawURL as given, FinalURL the URL
// after redirects, Title the HTML <title> ("" for non-HTML), Content the readable text, and
// RetrievedAt the current time.
//
// HTML (text/html, application/xhtml+xml) is parsed and reduced to text: script, style,
// noscript, template, svg, iframe, object, canvas, head and hidden elements are dropped,
// whitespace is collapsed, block elements become line breaks and <pre> keeps its layout.
// Other text/* bodies are returned as text, decoded from their charset; JSON bodies
// (application/json, application/*+json) are returned verbatim. A missing Content-Type is
// sniffed. Anything else fails with ErrUnsupportedContentType before the body is read. HTML
// nested deeper than the parser accepts (512 elements) fails with a parse error.
//
// At most MaxBytes of the body are read. A longer HTML or text body is cut at MaxBytes and
// its Content ends with "\n" + TruncationMark; a longer JSON body fails with ErrTooLarge.
//
// Errors wrap ErrInvalidURL, ErrScheme, ErrBlockedAddress (*BlockedAddressError),
// ErrTooManyRedirects, ErrHTTPStatus (*HTTPStatusError), ErrUnsupportedContentType,
// ErrTooLarge or ErrTimeout; network failures wrap the transport's error, and the end of ctx
// wraps ctx's error.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (registry.Citation, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error repeats the URL, which may hold a password
		}
		return registry.Citation{}, fmt.Errorf("web.fetch: %w: %w", ErrInvalidURL, err)
	}
	target := u.Redacted()
	if !u.IsAbs() {
		return registry.Citation{}, fmt.Errorf("web.fetch %s: %w: not absolute", target, ErrInvalidURL)
	}
	if err := f.checkURL(u); err != nil {
		return registry.Citation{}, fmt.Errorf("web.fetch %s: %w", target, err)
	}

	fctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	fail := func(err error) (registry.Citation, error) {
		var ne net.Error
		if ctx.Err() == nil && (fctx.Err() != nil || errors.As(err, &ne) && ne.Timeout()) {
			return registry.Citation{}, fmt.Errorf("web.fetch %s: %w after %s: %w", target, ErrTimeout, f.cfg.Timeout, err)
		}
		if ctx.Err() != nil {
			return registry.Citation{}, fmt.Errorf("web.fetch %s: %w", target, context.Cause(ctx))
		}
		return registry.Citation{}, fmt.Errorf("web.fetch %s: %w", target, policyError(err))
	}

	req, err := http.NewRequestWithContext(fctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return registry.Citation{}, fmt.Errorf("web.fetch %s: %w: %w", target, ErrInvalidURL, err)
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,text/*;q=0.8")
	resp, err := f.client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL.String()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fail(&HTTPStatusError{Code: resp.StatusCode, Status: resp.Status})
	}
	header := resp.Header.Get("Content-Type")
	mediaType := parseMediaType(header)
	if mediaType != "" && classify(mediaType) == kindUnsupported {
		return fail(fmt.Errorf("%w: %s", ErrUnsupportedContentType, mediaType))
	}

	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return fail(fmt.Errorf("read body: %w", err))
	}
	truncated := int64(len(body)) > f.cfg.MaxBytes
	if truncated {
		body = trimPartialRune(body[:f.cfg.MaxBytes])
	}
	if mediaType == "" {
		header = http.DetectContentType(body)
		mediaType = parseMediaType(header)
	}

	var title, content string
	switch classify(mediaType) {
	case kindHTML:
		title, content, err = parseHTML(fctx, decodeText(body, header))
		if err != nil {
			return fail(err)
		}
	case kindText:
		content = strings.ReplaceAll(decodeText(body, header), "\r\n", "\n")
	case kindJSON:
		if truncated {
			return fail(fmt.Errorf("%w: json body over %d bytes", ErrTooLarge, f.cfg.MaxBytes))
		}
		content = strings.ToValidUTF8(string(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))), "\uFFFD")
	default:
		return fail(fmt.Errorf("%w: %s", ErrUnsupportedContentType, mediaType))
	}
	if truncated {
		content += "\n" + TruncationMark
	}
	return registry.Citation{
		URL:         rawURL,
		FinalURL:    final,
		Title:       title,
		Content:     content,
		RetrievedAt: time.Now(),
	}, nil
}

// policyError strips the transport's wrapping (url.Error, net.OpError) from errors this
// package raised inside the client, so messages read "blocked address 10.0.0.1:80".
func policyError(err error) error {
	var blocked *BlockedAddressError
	if errors.As(err, &blocked) {
		return blocked
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		for _, sentinel := range []error{ErrTooManyRedirects, ErrScheme, ErrInvalidURL, ErrBlockedAddress} {
			if errors.Is(ue.Err, sentinel) {
				return ue.Err
			}
		}
	}
	return err
}

type contentKind int

const (
	kindUnsupported contentKind = iota
	kindHTML
	kindText
	kindJSON
)

func parseMediaType(header string) string {
	if strings.TrimSpace(header) == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil && mt == "" {
		mt, _, _ = strings.Cut(header, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

func classify(mediaType string) contentKind {
	switch {
	case mediaType == "text/html" || mediaType == "application/xhtml+xml":
		return kindHTML
	case mediaType == "application/json" ||
		strings.HasPrefix(mediaType, "application/") && strings.HasSuffix(mediaType, "+json"):
		return kindJSON
	case strings.HasPrefix(mediaType, "text/"):
		return kindText
	}
	return kindUnsupported
}

// decodeText converts body to UTF-8 using the Content-Type charset, a BOM or an HTML <meta>
// declaration, falling back to UTF-8 when the bytes are valid UTF-8 and windows-1252
// otherwise (the HTML standard's rule). A leading BOM is removed.
func decodeText(body []byte, contentType string) string {
	enc, _, _ := charset.DetermineEncoding(body, contentType)
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		out = body
	}
	return strings.TrimPrefix(strings.ToValidUTF8(string(out), "\uFFFD"), "\uFEFF")
}

// trimPartialRune drops an incomplete UTF-8 sequence left at the end of b by truncation, so
// the charset sniffer still sees valid UTF-8.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// WebFetch binds web.fetch@1 to f (a nil f gets NewFetcher(FetchConfig{})).
//
// On success Output.Data is the JSON citation {"url","final_url","title","content",
// "retrieved_at"}, SourceURL is the final URL and Citation points at the same citation;
// retrieved_at is inv.Now, or the fetch time when inv.Now is zero.
//
// A fetch that fails on the target's side (refused URL or address, redirects, status, size,
// content type, timeout, network, unparsable HTML) is not an infrastructure failure: it is returned as
// Output.Error (the error text) with Data {"url": ...} and a nil error, so the model sees it
// as data and no activity retry repeats it. Only the end of ctx is returned as an error.
func WebFetch(f *Fetcher) registry.Implementation {
	if f == nil {
		f = NewFetcher(FetchConfig{})
	}
	return registry.Typed("web.fetch", 1, func(ctx context.Context, args *FetchArgs, inv registry.Invocation) (registry.Output, error) {
		c, err := f.Fetch(ctx, args.URL)
		if err != nil {
			if ctx.Err() != nil {
				return registry.Output{}, err
			}
			data, merr := json.Marshal(struct {
				URL string `json:"url"`
			}{args.URL})
			if merr != nil {
				return registry.Output{}, fmt.Errorf("capabilities: web.fetch: encode failure: %w", merr)
			}
			return registry.Output{Data: data, Error: err.Error()}, nil
		}
		if !inv.Now.IsZero() {
			c.RetrievedAt = inv.Now
		}
		data, err := json.Marshal(c)
		if err != nil {
			return registry.Output{}, fmt.Errorf("capabilities: web.fetch: encode citation: %w", err)
		}
		return registry.Output{Data: data, SourceURL: c.FinalURL, Citation: &c}, nil
	})
}
