package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/redact"
	"github.com/airlock-dev/airlock/registry"
)

// Reason codes of calls the bridge refuses before anything reaches the tool
// (registry.NotRunError.Code; they land in the audit row's reason).
const (
	// ReasonDefinitionChanged: the tool's live definition no longer has the pinned digest.
	ReasonDefinitionChanged = "mcp_definition_changed"
	// ReasonToolMissing: the server no longer lists the tool.
	ReasonToolMissing = "mcp_tool_missing"
	// ReasonServerDown: the server cannot be started or reached, or did not answer.
	ReasonServerDown = "mcp_server_down"
)

// Bridge connects Airlock to the configured MCP servers over the official Go SDK: one client
// session per server (a stdio process Airlock starts, or a streamable HTTP endpoint), kept
// connected in the background, its tool list read at connect, on every tools/list_changed
// notification, every Refresh, and (by default) before every call. Registry entries with an
// mcp block are bound to it (Implementations): a tool is available, offered and called only
// while its server is connected and its live definition has the digest pinned in the entry.
// Safe for concurrent use.
type Bridge struct {
	log *slog.Logger
	// OnChange, when set, is told once per tool, pin and kind of drift (changed, missing; again
	// after the tool returned to its pin) that a bound tool's live
	// definition left its pin, or that the server stopped listing it. It runs on the bridge's
	// goroutine: it must not block for long.
	OnChange func(Change)

	mu      sync.Mutex
	cfg     *Servers
	servers map[string]*server
	closed  bool
}

// New returns a bridge with no servers (Configure gives it some); log receives connection
// events and definition changes (nil: slog.Default()).
func New(log *slog.Logger) *Bridge {
	if log == nil {
		log = slog.Default()
	}
	return &Bridge{log: log, servers: map[string]*server{}}
}

// Configure makes s the servers the bridge may connect to. A server whose configuration
// changed is disconnected (and reconnected when bound); one no longer configured is closed.
func (b *Bridge) Configure(s *Servers) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg = s
	for name, sv := range b.servers {
		c, ok := s.Server(name)
		if !ok || !reflect.DeepEqual(c, sv.cfg) {
			sv.close()
			delete(b.servers, name)
		}
	}
}

// Configured reports whether a servers configuration was given.
func (b *Bridge) Configured() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg != nil
}

// ErrUnknownServer reports a registry entry that names an MCP server the servers file does
// not configure.
var ErrUnknownServer = errors.New("mcp: registry names an MCP server that is not configured")

func (b *Bridge) server(name string) (*server, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("mcp: bridge closed")
	}
	if sv, ok := b.servers[name]; ok {
		return sv, nil
	}
	c, ok := b.cfg.Server(name)
	if !ok {
		known := strings.Join(b.cfg.Names(), ", ")
		if b.cfg == nil {
			known = "none: set " + EnvServers + " to a servers file"
		}
		return nil, fmt.Errorf("%w: %q (configured: %s)", ErrUnknownServer, name, known)
	}
	sv := newServer(b, c)
	b.servers[name] = sv
	return sv, nil
}

// Implementations binds every entry with an mcp block to this bridge: the argument schema is
// registry.MCPArgumentSchema of the pinned input schema, Available is the live check against
// the pinned digest, Ready waits for the server, and Invoke calls the tool. Binding starts the
// servers' connections in the background. An entry naming a server that is not configured,
// or whose pinned definition does not decode, is an error (the load fails closed).
func (b *Bridge) Implementations(entries []registry.Entry) ([]registry.Implementation, error) {
	var out []registry.Implementation
	var errs []error
	for _, e := range entries {
		m := e.Airlock.MCP
		if m == nil {
			continue
		}
		def, err := registry.DecodeMCPDefinition(m.Definition)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Key(), err))
			continue
		}
		schema, err := registry.MCPArgumentSchema(def.InputSchema)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Key(), err))
			continue
		}
		sv, err := b.server(m.Server)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Key(), err))
			continue
		}
		p := pin{tool: m.Tool, digest: m.Digest, def: def, id: e.ID, version: e.Version}
		sv.bind(p)
		out = append(out, registry.Implementation{
			ID: e.ID, Version: e.Version, Schema: schema,
			Invoke: func(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
				out, err := sv.call(ctx, p, inv.Arguments)
				return out, sv.scrub(err)
			},
			Available: func() error { return sv.check(p) },
			Ready:     func(context.Context) error { return sv.check(p) },
		})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// WaitSettled waits (at most until ctx ends) until every bound server has finished its first
// connection attempt, so a worker that just started offers the tools of servers that are up.
func (b *Bridge) WaitSettled(ctx context.Context) {
	b.mu.Lock()
	svs := make([]*server, 0, len(b.servers))
	for _, sv := range b.servers {
		svs = append(svs, sv)
	}
	b.mu.Unlock()
	for _, sv := range svs {
		select {
		case <-sv.settled:
		case <-ctx.Done():
			return
		}
	}
}

// Close disconnects every server (stdio processes are stopped).
func (b *Bridge) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for name, sv := range b.servers {
		sv.close()
		delete(b.servers, name)
	}
	return nil
}

// ToolStatus is one bound tool as operators see it (doctor, airlock mcp status).
type ToolStatus struct {
	Tool   string `json:"tool"`
	Pinned string `json:"pinned"`
	Live   string `json:"live,omitempty"`
	// Problem is "" when the tool is available, else why not (Airlock's words).
	Problem string `json:"problem,omitempty"`
	// Changed lists the members of the definition that differ from the pin.
	Changed []string `json:"changed,omitempty"`
}

// ServerStatus is one server's state.
type ServerStatus struct {
	Name      string       `json:"name"`
	Transport string       `json:"transport"`
	Connected bool         `json:"connected"`
	Problem   string       `json:"problem,omitempty"`
	ListedAt  time.Time    `json:"listed_at,omitzero"`
	Tools     []ToolStatus `json:"tools"`
	// Unpinned counts live tools no registry entry binds (never offered).
	Unpinned int `json:"unpinned"`
}

// Status reports every bound server and tool. With refresh, each server is connected (or its
// tools listed again) first, bounded by ctx.
func (b *Bridge) Status(ctx context.Context, refresh bool) []ServerStatus {
	b.mu.Lock()
	svs := make([]*server, 0, len(b.servers))
	for _, sv := range b.servers {
		svs = append(svs, sv)
	}
	b.mu.Unlock()
	sort.Slice(svs, func(i, j int) bool { return svs[i].cfg.Name < svs[j].cfg.Name })
	var out []ServerStatus
	for _, sv := range svs {
		if refresh {
			if sess, err := sv.ensure(ctx); err == nil {
				_ = sv.list(ctx, sess)
			}
		}
		out = append(out, sv.status())
	}
	return out
}

// Change is a bound tool whose live definition no longer matches its pin (Live is the live
// digest, or "" when the server stopped listing the tool). Reason is ReasonDefinitionChanged or
// ReasonToolMissing; Detail says why in Airlock's words (what operators read).
type Change struct {
	Server, Tool   string
	CapabilityID   string
	Version        int
	Pinned, Live   string
	Reason, Detail string
}

// pin is what a registry entry pinned of one tool.
type pin struct {
	tool    string
	digest  string
	def     registry.MCPToolDefinition
	id      string
	version int
}

type liveTool struct {
	def    registry.MCPToolDefinition
	digest string
}

// server is one configured MCP server and its session.
type server struct {
	b                          *Bridge
	cfg                        ServerConfig
	connectTO, refresh, maxAge time.Duration

	ctx     context.Context // the server's lifetime: cancelled by close
	cancel  context.CancelFunc
	kickCh  chan struct{}
	settled chan struct{} // closed after the first connection attempt
	once    sync.Once     // starts the loop
	settle  sync.Once

	mu         sync.Mutex
	sess       *sdk.ClientSession
	connecting chan struct{} // non-nil while a connection attempt runs; closed when it ends
	tools      map[string]liveTool
	listedAt   time.Time
	downErr    error
	pins       map[string]pin
	reported   map[string]bool
	stderr     *tail

	// secrets are the values no error or log line of this server may show: its headers' and
	// env/secrets' values as last read, and the secret parts of its URL (see scrub).
	secretsMu sync.Mutex
	secrets   []string
}

// addSecrets records values scrub masks from now on.
func (s *server) addSecrets(vs ...string) {
	s.secretsMu.Lock()
	defer s.secretsMu.Unlock()
	for _, v := range vs {
		if v != "" && !slices.Contains(s.secrets, v) {
			s.secrets = append(s.secrets, v)
		}
	}
}

// scrub masks the server's secrets in err (redact.Error): a stdio server that prints its key
// on stderr, an SDK error quoting the endpoint with its ?api_key=, a JSON-RPC error echoing a
// header. A *registry.NotRunError in it has its Detail scrubbed too, since the executor reads
// Detail (errors.As) into the call's result, the history and the audit.
func (s *server) scrub(err error) error {
	if err == nil {
		return nil
	}
	s.secretsMu.Lock()
	secrets := slices.Clone(s.secrets)
	s.secretsMu.Unlock()
	if len(secrets) == 0 {
		return err
	}
	var nr *registry.NotRunError
	if errors.As(err, &nr) {
		nr.Detail = redact.String(nr.Detail, secrets...)
	}
	return redact.Error(err, secrets...)
}

func newServer(b *Bridge, c ServerConfig) *server {
	ctx, cancel := context.WithCancel(context.Background())
	connect, refresh, maxAge := c.Timings()
	s := &server{b: b, cfg: c, connectTO: connect, refresh: refresh, maxAge: maxAge, ctx: ctx, cancel: cancel,
		kickCh: make(chan struct{}, 1), settled: make(chan struct{}), pins: map[string]pin{}, reported: map[string]bool{},
		stderr: &tail{max: 2048}}
	if redact.URL(c.URL) != c.URL {
		s.addSecrets(redact.URLSecrets(c.URL)...) // a token in its query: the whole URL is masked
	}
	return s
}

func (s *server) bind(p pin) {
	s.mu.Lock()
	s.pins[p.tool] = p
	s.mu.Unlock()
	s.once.Do(func() { go s.loop() })
}

func (s *server) kick() {
	select {
	case s.kickCh <- struct{}{}:
	default:
	}
}

// loop keeps the server connected and its tool list fresh until close.
func (s *server) loop() {
	backoff := 250 * time.Millisecond
	for {
		sess, err := s.ensure(s.ctx)
		s.settle.Do(func() { close(s.settled) })
		wait := s.refresh
		if err != nil {
			wait = min(backoff, s.refresh)
			backoff = min(2*backoff, s.refresh)
		} else {
			backoff = 250 * time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-s.kickCh:
		case <-t.C:
		}
		t.Stop()
		if err == nil {
			s.mu.Lock()
			same := s.sess == sess
			s.mu.Unlock()
			if same {
				lctx, cancel := context.WithTimeout(s.ctx, s.connectTO)
				_ = s.list(lctx, sess)
				cancel()
			}
		}
	}
}

func (s *server) close() {
	s.cancel()
	s.mu.Lock()
	sess := s.sess
	s.sess = nil
	s.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
}

// ensure returns the connected session, connecting first when there is none. One attempt
// runs at a time, under the server's own lifetime (never the caller's context, so a session a
// call opened outlives the call); callers wait for it until their context ends. A session an
// attempt still lists the tools of is not returned before the listing ends: the pin check
// needs the tools, and a call in that window would read "not connected yet".
func (s *server) ensure(ctx context.Context) (*sdk.ClientSession, error) {
	s.mu.Lock()
	if s.sess != nil && s.connecting == nil {
		sess := s.sess
		s.mu.Unlock()
		return sess, nil
	}
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		return nil, errors.New("server closed")
	}
	ch := s.connecting
	if ch == nil {
		ch = make(chan struct{})
		s.connecting = ch
		go s.dial(ch)
	}
	s.mu.Unlock()
	select {
	case <-ch:
		s.mu.Lock()
		sess, err := s.sess, s.downErr
		s.mu.Unlock()
		if sess != nil {
			return sess, nil
		}
		if err == nil {
			err = errors.New("not connected")
		}
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dial makes one connection attempt: connect, initialize, list the tools; then watches the
// session so its end is noticed. It closes ch when the attempt is over.
func (s *server) dial(ch chan struct{}) {
	sess, err := s.connect(s.ctx)
	if err == nil {
		s.mu.Lock()
		s.sess, s.downErr = sess, nil
		s.mu.Unlock()
		lctx, cancel := context.WithTimeout(s.ctx, s.connectTO)
		err = s.list(lctx, sess)
		cancel()
		if err == nil {
			go func() {
				_ = sess.Wait()
				s.lost(sess, errors.New("the session ended (the server exited or closed the connection)"))
			}()
		}
	}
	s.mu.Lock()
	s.connecting = nil
	var stale *sdk.ClientSession
	if err != nil {
		s.downErr, s.tools = err, nil
		if sess != nil && s.sess == sess {
			s.sess, stale = nil, sess
		}
	}
	s.mu.Unlock()
	close(ch)
	if stale != nil {
		_ = stale.Close()
	}
	if err != nil && s.ctx.Err() == nil {
		s.b.log.Warn("MCP server unavailable", "server", s.cfg.Name, "error", display.Visible(err.Error()))
	}
}

// lost marks sess as gone (when it is still the current one) and wakes the loop to reconnect.
func (s *server) lost(sess *sdk.ClientSession, why error) {
	why = s.scrub(why)
	s.mu.Lock()
	if s.sess != sess {
		s.mu.Unlock()
		return
	}
	s.sess, s.tools, s.downErr = nil, nil, why
	s.mu.Unlock()
	_ = sess.Close()
	if s.ctx.Err() == nil {
		s.b.log.Warn("MCP server disconnected", "server", s.cfg.Name, "reason", why.Error())
	}
	s.kick()
}

// connect starts or reaches the server and initializes an MCP session, bounded by the
// connect timeout.
func (s *server) connect(ctx context.Context) (*sdk.ClientSession, error) {
	cctx, cancel := context.WithTimeout(ctx, s.connectTO)
	defer cancel()
	t, err := s.transport()
	if err != nil {
		return nil, err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "airlock", Version: "1"}, &sdk.ClientOptions{
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { s.kick() },
	})
	sess, err := client.Connect(cctx, t, nil)
	if err != nil {
		msg := err.Error()
		if tail := s.stderr.String(); tail != "" {
			msg += "; its stderr ends: " + display.Visible(display.OneLine(tail))
		}
		return nil, s.scrub(fmt.Errorf("connect to MCP server %q (%s): %s", s.cfg.Name, s.cfg.Transport(), msg))
	}
	return sess, nil
}

// transport builds the SDK transport of the configuration: a process with a minimal
// environment (stdio), or streamable HTTP with the configured headers read from secrets now.
func (s *server) transport() (sdk.Transport, error) {
	c := s.cfg
	if c.URL != "" {
		h := http.Header{}
		for _, hd := range c.Headers {
			v, err := hd.Secret.Read()
			if err != nil {
				return nil, fmt.Errorf("MCP server %q: header %s: %w", c.Name, hd.Name, err)
			}
			s.addSecrets(v)
			h.Set(hd.Name, hd.Prefix+v)
		}
		// Up to 16 idle connections to the server (net/http keeps 2 per host): tool calls of
		// turns in flight at once would otherwise open a connection each.
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.MaxIdleConnsPerHost = 16
		return &sdk.StreamableClientTransport{Endpoint: c.URL, MaxRetries: 2,
			HTTPClient: &http.Client{Transport: headerTransport{base: base, h: h}}}, nil
	}
	env := []string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+c.Env[k])
	}
	skeys := make([]string, 0, len(c.EnvSecrets))
	for k := range c.EnvSecrets {
		skeys = append(skeys, k)
	}
	slices.Sort(skeys)
	for _, k := range skeys {
		v, err := c.EnvSecrets[k].Read()
		if err != nil {
			return nil, fmt.Errorf("MCP server %q: env/secrets %s: %w", c.Name, k, err)
		}
		s.addSecrets(v)
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(c.Command, c.Args...)
	cmd.Env, cmd.Dir = env, c.Dir
	s.stderr.reset()
	cmd.Stderr = s.stderr
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
}

type headerTransport struct {
	base http.RoundTripper
	h    http.Header
}

// RoundTrip sets the configured headers and sends r. net/http itself resends a replayable
// request on a new connection when a reused one fails (a POST is replayable once it carries
// an Idempotency-Key or X-Idempotency-Key header); if an attempt was written and a later one
// could not connect, the error returned is a *sentError, which keeps no dial error inside, so
// that neverSent never calls a request that may have run "not sent".
func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	var wrote atomic.Bool
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}))
	resp, err := t.base.RoundTrip(r)
	if err != nil && wrote.Load() {
		return nil, &sentError{msg: err.Error()}
	}
	if err == nil && r.Header.Get(sessionIDHeader) != "" {
		resp = unknownSession(resp)
	}
	return resp, err
}

// sessionIDHeader is the streamable HTTP transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

// unknownSession reads the way servers say they do not know a request's session as the
// specification's 404, which the SDK reports as sdk.ErrSessionMissing: a 404 without a JSON-RPC
// error, or a 404 or 400 whose JSON-RPC error speaks of the session (the TypeScript SDK's
// example servers, among them server-everything, answer 400 "Bad Request: No valid session ID
// provided"). Either way the server refused the request before processing it. A JSON-RPC
// method-not-found or invalid-params error (which newer servers send with 404 and 400) and any
// other response are returned as they came.
func unknownSession(resp *http.Response) *http.Response {
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest {
		return resp
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp
	}
	var m struct {
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &m) == nil && m.Error != nil {
		if m.Error.Code == -32601 || m.Error.Code == -32602 || !strings.Contains(strings.ToLower(m.Error.Message), "session") {
			return resp
		}
	} else if resp.StatusCode != http.StatusNotFound {
		return resp
	}
	out := *resp
	out.StatusCode, out.Status = http.StatusNotFound, "404 Not Found"
	out.Header = resp.Header.Clone()
	out.Header.Set("Content-Type", "text/plain; charset=utf-8")
	out.Body = io.NopCloser(strings.NewReader("session not found"))
	out.ContentLength = int64(len("session not found"))
	return &out
}

// sentError is a failed HTTP exchange after the request was written at least once: its
// outcome is unknown. It deliberately wraps nothing (see headerTransport.RoundTrip).
type sentError struct{ msg string }

func (e *sentError) Error() string { return "the request was sent, then the exchange failed: " + e.msg }

// list reads the server's tool list into s.tools and reports pins it breaks.
func (s *server) list(ctx context.Context, sess *sdk.ClientSession) error {
	tools := map[string]liveTool{}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			werr := s.scrub(fmt.Errorf("MCP server %q: list tools: %w", s.cfg.Name, err))
			switch {
			case ctx.Err() != nil:
			case sessionGone(err):
				s.b.log.Info("MCP session no longer known to the server (it restarted or expired the session): opening a new one",
					"server", s.cfg.Name, "reason", display.Visible(werr.Error()))
				s.forget(sess, werr)
			default:
				s.lost(sess, werr)
			}
			return werr
		}
		def, err := Definition(t)
		if err != nil {
			continue // a tool that cannot be pinned is never offered; a pin on it reads missing
		}
		b, d, err := registry.MCPDefinitionJSON(def)
		if err != nil || b == nil {
			continue
		}
		tools[t.Name] = liveTool{def: def, digest: d}
	}
	s.mu.Lock()
	if s.sess != sess {
		s.mu.Unlock()
		return errors.New("the session ended while its tools were listed")
	}
	s.tools, s.listedAt = tools, time.Now()
	var changes []Change
	for name, p := range s.pins {
		lt, ok := tools[name]
		// Reported once per pin and kind of drift (changed, missing), not per live digest: a
		// hostile server that rewrites a description on every list would otherwise raise an
		// audit row and a notice each time, and grow this map without bound (found by an
		// attack helper). Back at its pin, the tool may be reported again when it next drifts.
		changedKey, missingKey := name+"\x00"+p.digest+"\x00changed", name+"\x00"+p.digest+"\x00missing"
		if ok && lt.digest == p.digest {
			delete(s.reported, changedKey)
			delete(s.reported, missingKey)
			continue
		}
		key := changedKey
		if !ok {
			key = missingKey
		}
		if s.reported[key] {
			continue
		}
		s.reported[key] = true
		ch := Change{Server: s.cfg.Name, Tool: name, CapabilityID: p.id, Version: p.version, Pinned: p.digest, Live: lt.digest}
		var nr *registry.NotRunError
		if errors.As(s.checkLocked(p), &nr) {
			ch.Reason, ch.Detail = nr.Code, nr.Detail
		}
		changes = append(changes, ch)
	}
	s.mu.Unlock()
	for _, c := range changes {
		s.b.log.Warn("MCP tool no longer offered or called", "server", c.Server, "tool", display.Visible(c.Tool),
			"capability", c.CapabilityID, "pinned", c.Pinned, "live", c.Live, "reason", c.Detail)
		if s.b.OnChange != nil {
			s.b.OnChange(c)
		}
	}
	return nil
}

// check is the non-blocking availability of pinned tool p: nil, or a *registry.NotRunError.
func (s *server) check(p pin) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkLocked(p)
}

func (s *server) checkLocked(p pin) error {
	name := display.Visible(p.tool)
	if s.sess == nil || s.tools == nil {
		why := "is not connected yet"
		if s.downErr != nil {
			why = "is down: " + s.downErr.Error()
		}
		return &registry.NotRunError{Code: ReasonServerDown, Detail: fmt.Sprintf("MCP server %q %s", s.cfg.Name, why)}
	}
	lt, ok := s.tools[p.tool]
	if !ok {
		return &registry.NotRunError{Code: ReasonToolMissing, Detail: fmt.Sprintf("MCP server %q no longer lists tool %q", s.cfg.Name, name)}
	}
	if lt.digest != p.digest {
		return &registry.NotRunError{Code: ReasonDefinitionChanged, Detail: fmt.Sprintf(
			"MCP tool %q of server %q changed after it was pinned: its live definition %s differs from the registry's %s in %s; it is neither offered nor called until an operator reviews it and imports it again (airlock mcp import)",
			name, s.cfg.Name, registry.MCPPinDigest(lt.digest), registry.MCPPinDigest(p.digest), strings.Join(ChangedMembers(p.def, lt.def), ", "))}
	}
	return nil
}

// ChangedMembers names the members of two tool definitions that differ, in a fixed order.
func ChangedMembers(a, b registry.MCPToolDefinition) []string {
	var out []string
	eq := func(x, y json.RawMessage) bool {
		if len(x) == 0 || len(y) == 0 {
			return len(x) == len(y)
		}
		dx, ex := registry.MCPDigest(x)
		dy, ey := registry.MCPDigest(y)
		return ex == nil && ey == nil && dx == dy
	}
	if a.Name != b.Name {
		out = append(out, "name")
	}
	if a.Title != b.Title {
		out = append(out, "title")
	}
	if a.Description != b.Description {
		out = append(out, "description")
	}
	if !eq(a.InputSchema, b.InputSchema) {
		out = append(out, "inputSchema")
	}
	if !eq(a.OutputSchema, b.OutputSchema) {
		out = append(out, "outputSchema")
	}
	if !eq(a.Annotations, b.Annotations) {
		out = append(out, "annotations")
	}
	return out
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{Name: s.cfg.Name, Transport: s.cfg.Transport(), Connected: s.sess != nil, ListedAt: s.listedAt}
	if s.downErr != nil && s.sess == nil {
		st.Problem = s.downErr.Error()
	}
	names := make([]string, 0, len(s.pins))
	for n := range s.pins {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := s.pins[n]
		ts := ToolStatus{Tool: n, Pinned: p.digest}
		if lt, ok := s.tools[n]; ok {
			ts.Live = lt.digest
			ts.Changed = ChangedMembers(p.def, lt.def)
		}
		if err := s.checkLocked(p); err != nil {
			ts.Problem = err.Error()
		}
		st.Tools = append(st.Tools, ts)
	}
	for n := range s.tools {
		if _, ok := s.pins[n]; !ok {
			st.Unpinned++
		}
	}
	return st
}

// call verifies the live definition and calls the tool. Errors before the request is sent
// are *registry.NotRunError; a lost answer wraps registry.ErrOutcomeUnknown.
func (s *server) call(ctx context.Context, p pin, args json.RawMessage) (registry.Output, error) {
	sess, err := s.ensure(ctx)
	if err != nil {
		return registry.Output{}, &registry.NotRunError{Code: ReasonServerDown, Detail: fmt.Sprintf("MCP server %q is down: %v", s.cfg.Name, err)}
	}
	s.mu.Lock()
	stale := s.maxAge == 0 || time.Since(s.listedAt) > s.maxAge
	s.mu.Unlock()
	if stale {
		err := s.list(ctx, sess)
		if err != nil && ctx.Err() == nil {
			// The server forgot the session (it restarted), or the exchange failed on a
			// connection it had closed: a listing is read-only, so a new session lists the
			// tools again before the server is called down.
			sess, err = s.reopen(ctx, sess, err)
		}
		if err != nil {
			return registry.Output{}, &registry.NotRunError{Code: ReasonServerDown, Detail: fmt.Sprintf("MCP server %q: the tool list could not be read to check the pin: %v", s.cfg.Name, err)}
		}
	}
	if err := s.check(p); err != nil {
		return registry.Output{}, err
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: p.tool, Arguments: args})
	if err != nil && sessionGone(err) && ctx.Err() == nil {
		// The server answered that it does not know the session: by the streamable HTTP
		// transport it did not process the request, so the call did not run. It is sent once
		// more, on a new session whose listing still holds the pin.
		gone := err
		if sess, err = s.reopen(ctx, sess, gone); err != nil {
			return registry.Output{}, &registry.NotRunError{Code: ReasonServerDown, Detail: fmt.Sprintf(
				"MCP server %q no longer knew the session, so the call was not run, and a new session could not be opened: %v", s.cfg.Name, err)}
		}
		if err := s.check(p); err != nil {
			return registry.Output{}, err
		}
		s.b.log.Info("MCP call sent again on a new session: the server did not run it on the one it forgot",
			"server", s.cfg.Name, "tool", display.Visible(p.tool))
		res, err = sess.CallTool(ctx, &sdk.CallToolParams{Name: p.tool, Arguments: args})
		if err != nil && sessionGone(err) {
			s.lost(sess, fmt.Errorf("the server forgot a new session at once: %v", err))
			return registry.Output{}, &registry.NotRunError{Code: ReasonServerDown, Detail: fmt.Sprintf(
				"MCP server %q did not know the session twice in a row, so the call was not run: %v", s.cfg.Name, err)}
		}
	}
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) && (we.Code == -32601 || we.Code == -32602) {
			// The server refused the request itself (unknown tool, invalid params): per the
			// protocol nothing ran.
			return registry.Output{}, fmt.Errorf("MCP server %q refused the call: %s", s.cfg.Name, display.Visible(we.Message))
		}
		if ctx.Err() != nil {
			return registry.Output{}, fmt.Errorf("%w: MCP server %q did not answer in time and the request was cancelled: %v", registry.ErrOutcomeUnknown, s.cfg.Name, ctx.Err())
		}
		if neverSent(err) {
			// No connection could be opened (refused, no route): the request never left this
			// process, so nothing ran, and saying so is not a guess.
			s.lost(sess, fmt.Errorf("the server could not be reached for a call: %v", err))
			return registry.Output{}, &registry.NotRunError{Code: ReasonServerDown, Detail: fmt.Sprintf("MCP server %q could not be reached, so the call was not sent: %v", s.cfg.Name, err)}
		}
		s.lost(sess, fmt.Errorf("the connection failed during a call: %v", err))
		return registry.Output{}, fmt.Errorf("%w: the connection to MCP server %q failed during the call: %v", registry.ErrOutcomeUnknown, s.cfg.Name, err)
	}
	return toOutput(s.cfg.Name, p.tool, res), nil
}

// reopen replaces sess, a session the server answered it does not know (why), with a new one:
// connect, initialize and list the tools (the listing the pin is then checked against). It
// returns the new session, or why none could be opened.
func (s *server) reopen(ctx context.Context, sess *sdk.ClientSession, why error) (*sdk.ClientSession, error) {
	s.mu.Lock()
	current := s.sess == sess
	s.mu.Unlock()
	if current {
		s.b.log.Info("MCP session no longer known to the server (it restarted or expired the session): opening a new one",
			"server", s.cfg.Name, "reason", display.Visible(s.scrub(why).Error()))
		s.forget(sess, fmt.Errorf("the server no longer knows the session: %v", why))
	}
	return s.ensure(ctx)
}

// forget drops sess (when it is still the current one) without the warning lost gives: a
// session the server expired is reopened, not a server that is down.
func (s *server) forget(sess *sdk.ClientSession, why error) {
	why = s.scrub(why)
	s.mu.Lock()
	if s.sess != sess {
		s.mu.Unlock()
		return
	}
	s.sess, s.tools, s.downErr = nil, nil, why
	s.mu.Unlock()
	_ = sess.Close()
}

// sessionGone reports whether err is the server saying it does not know the session: HTTP 404
// to a request carrying a session id, which the SDK reports as ErrSessionMissing (unknownSession
// reads a server's other ways of saying so as that 404). By the streamable HTTP transport (MCP
// 2025-06-18, "Session Management") a server answers so without processing the request.
func sessionGone(err error) bool {
	return errors.Is(err, sdk.ErrSessionMissing)
}

// neverSent reports whether err is a failure to open a connection (a dial error: refused,
// unreachable, no such host), after which no byte of the request was written. A failure on an
// open connection (reset, EOF, a timeout mid-answer) may come after the server took the call
// and is not this.
func neverSent(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// tail keeps the last max bytes written (a server's stderr, for connect diagnostics).
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

func (t *tail) reset() {
	t.mu.Lock()
	t.b = nil
	t.mu.Unlock()
}
