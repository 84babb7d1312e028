package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/signin"
	"github.com/airlock-dev/airlock/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Authenticator checks an approver's password: the approver's canonical name, or an error
// (approvers.ErrBadCredentials for an unknown name or a wrong password, in constant work).
// Has reports whether name is still an approver: a session whose approver left the file is
// ended at its next request (approvers.Set implements both).
type Authenticator interface {
	Authenticate(name, password string) (string, error)
	Has(name string) bool
}

// DecideFunc delivers one decision to its turn and returns the turn's verdict, as
// approval.Decide does: nil when it decided the proposal, *approval.NotPendingError,
// *approval.RefusedError or another error. The server fills Approver from the session; the
// function attests the decision with the page's surface credential.
type DecideFunc func(ctx context.Context, r approval.Request) error

// Options configure a Server.
type Options struct {
	// Store is the Airlock store: pending confirmations, the audit log, turn results.
	Store *store.Store
	// Temporal, when set, is used to read each turn's principal and status.
	Temporal client.Client
	// Approvers returns the current approvers (the file is re-read when it changes).
	Approvers func() (Authenticator, error)
	// Decide delivers a decision (see DecideFunc).
	Decide DecideFunc
	// DecideProposal records and applies a decision on an agent proposal (see
	// ProposalDecideFunc); nil lists proposals without decision forms.
	DecideProposal ProposalDecideFunc
	// WorkflowURL links a turn in the Temporal UI.
	WorkflowURL func(workflowID string) string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Slack, when set, lets Slack's Approve and Deny buttons decide (slack.go).
	Slack *SlackInteractions
	// DecideTimeout bounds one decision's round trip to the turn (default 30 s).
	DecideTimeout time.Duration
	// Log receives one line per refused or failed request (default slog.Default()); never a
	// password, a session id or a CSRF token.
	Log *slog.Logger
	// Hosts, when set, are the host names (without port, any case) the page answers to; a
	// request for any other Host is refused 421 (issue 21, item 4: a DNS-rebinding page on
	// another name never reaches the approver's session). Empty: every host (tests).
	Hosts []string
	// Passkeys is the relying party approvers register passkeys for and sign passkey decisions
	// with (issue 21, item 3; passkey.FromEnv): RPID is the page's host name. Zero: "localhost".
	Passkeys passkey.Config
	// Challenge signs a passkey decision's MAC for the approver's authenticator (Challenger);
	// nil: the page cannot decide a capability that requires a passkey.
	Challenge ChallengeFunc
	// OIDC, when set, offers sign-in through the company's identity provider (oidc.go).
	OIDC *OIDCOptions
}

// Server is the approver page's HTTP handler.
type Server struct {
	opt      Options
	sessions *sessions
	limiter  *signin.Limiter
	pages    map[string]*template.Template
	mux      *http.ServeMux
	live     liveHub // the live inbox's store watcher (live.go)
	// recheck overrides eventsRecheck (tests).
	recheck time.Duration
	// slackSeen refuses a replayed Slack interaction (slack.go).
	slackSeen slackReplays
	// oidc holds the identities signed in through the provider (oidc.go).
	oidc oidcPeople
}

// New builds the Server. Store, Approvers and Decide are required.
func New(opt Options) (*Server, error) {
	if opt.Store == nil || opt.Approvers == nil || opt.Decide == nil {
		return nil, errors.New("web: a Store, Approvers and a Decide function are required")
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.DecideTimeout <= 0 {
		opt.DecideTimeout = 30 * time.Second
	}
	if opt.WorkflowURL == nil {
		opt.WorkflowURL = func(string) string { return "" }
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.Passkeys.RPID == "" {
		opt.Passkeys.RPID = "localhost"
	}
	s := &Server{opt: opt, sessions: newSessions(opt.Store, opt.Now), limiter: signin.NewLimiter(LoginFailures, LoginWindow, opt.Now), pages: map[string]*template.Template{}}
	if opt.OIDC != nil && (opt.OIDC.RP == nil || opt.OIDC.ApproversPath == "") {
		return nil, errors.New("web: OIDC sign-in needs its relying party and the approvers file path")
	}
	s.oidc.m = map[string]*oidcPerson{}
	funcs := template.FuncMap{"show": func(s string) shown { return show(s, fieldLimit) },
		"oidc": func() string {
			if opt.OIDC == nil {
				return ""
			}
			if opt.OIDC.Label == "" {
				return "your identity provider"
			}
			return opt.OIDC.Label
		}}
	for _, p := range []string{"login", "inbox", "turn", "history", "proposals", "passkeys", "error"} {
		t, err := template.New(p+".html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("web: parse template %s: %w", p, err)
		}
		s.pages[p] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("web: static assets: %w", err)
	}
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	if opt.OIDC != nil {
		m.HandleFunc("GET /oidc/login", s.oidcLogin)
		m.HandleFunc("GET /oidc/callback", s.oidcCallback)
	}
	m.HandleFunc("POST /logout", s.authed(s.logout))
	m.HandleFunc("GET /{$}", s.authed(s.inbox))
	m.HandleFunc("GET /events", s.authed(s.events))              // the live inbox (live.go)
	m.HandleFunc("POST /slack/interactions", s.slackInteraction) // Slack buttons, signed by Slack (slack.go)
	m.HandleFunc("GET /turn", s.authed(s.turn))
	m.HandleFunc("GET /history", s.authed(s.history))
	m.HandleFunc("POST /decide", s.authed(s.decide))
	m.HandleFunc("POST /decide/challenge", s.authed(s.decideChallenge)) // a passkey decision's MAC (passkeys.go)
	m.HandleFunc("GET /passkeys", s.authed(s.passkeysPage))
	m.HandleFunc("POST /passkeys/begin", s.authed(s.passkeyBegin))
	m.HandleFunc("POST /passkeys/finish", s.authed(s.passkeyFinish))
	m.HandleFunc("POST /passkeys/remove", s.authed(s.passkeyRemove))
	m.HandleFunc("GET /proposals", s.authed(s.proposalsPage))
	m.HandleFunc("POST /proposals/decide", s.authed(s.decideProposal))
	s.mux = m
	return s, nil
}

// csp allows scripts, styles and images from this origin only: no inline script, no framing,
// forms post only here.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// maxBody bounds a request body (net/http would parse 10 MB of form before anyone signed in):
// the largest form is an edit, at most workflows.MaxEditArgumentBytes of JSON, URL-encoded.
const maxBody = 1 << 20

// ServeHTTP sets the security headers on every response, refuses a body over maxBody and a
// state change that is not same-origin, and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store") // pages show arguments and carry CSRF tokens
	}
	if r.ContentLength > maxBody {
		http.Error(w, fmt.Sprintf("refused: a form of this page is at most %d KiB", maxBody>>10), http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if !s.hostAllowed(r.Host) {
		s.opt.Log.Warn("web: refused a request for a host name the page does not serve", "client", clientIP(r))
		http.Error(w, "refused: this approver page does not serve that host name (airlock web --host)", http.StatusMisdirectedRequest)
		return
	}
	// Slack's interaction requests come from Slack, with no Origin: slack.go verifies Slack's
	// signature instead.
	slackPost := r.Method == http.MethodPost && r.URL.Path == "/slack/interactions"
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !slackPost && !sameOrigin(r) {
		s.opt.Log.Warn("web: refused a cross-origin or origin-less state change", "path", r.URL.Path, "client", clientIP(r))
		http.Error(w, "refused: this request does not come from the approver page (Origin check)", http.StatusForbidden)
		return
	}
	s.mux.ServeHTTP(w, r)
}

type ctxKey struct{}

type signedIn struct {
	id string
	session
}

// authed wraps a handler that needs a signed-in approver still listed in the approvers file
// (one removed since signing in is signed out): without a live session a GET is
// redirected to /login and anything else is refused 401; every POST must carry the session's
// CSRF token (field csrf), else 403.
func (s *Server) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var sess session
		var id string
		ok := false
		if c, err := r.Cookie(SessionCookie); err == nil {
			id = c.Value
			var gerr error
			if sess, ok, gerr = s.sessions.get(r.Context(), id); gerr != nil {
				s.opt.Log.Error("web: read the session from the store", "err", gerr)
				http.Error(w, "the store did not answer: try again in a moment", http.StatusServiceUnavailable)
				return
			}
		}
		if ok {
			set, err := s.opt.Approvers()
			if err != nil {
				s.opt.Log.Error("web: read the approvers file", "err", err)
				http.Error(w, "the approvers file could not be read: see the server's log", http.StatusInternalServerError)
				return
			}
			if !set.Has(sess.approver) { // removed from the approvers file since signing in
				s.opt.Log.Warn("web: ended the session of an approver no longer in the approvers file", "approver", sess.approver)
				s.endSessions(r.Context(), sess.approver)
				http.SetCookie(w, sessionCookie("", -1))
				ok = false
			} else if s.opt.OIDC != nil && !s.checkIdentity(r.Context(), sess.approver, false) {
				// The identity provider no longer vouches for the person (checkIdentity ended
				// their sessions and removed their account).
				http.SetCookie(w, sessionCookie("", -1))
				ok = false
			} else if stampOf(set, sess.approver) != sess.stamp { // password changed since signing in
				s.opt.Log.Warn("web: ended the sessions signed in with a password that has changed since", "approver", sess.approver)
				if _, err := s.opt.Store.DeleteStalePageSessions(r.Context(), sess.approver, stampOf(set, sess.approver)); err != nil {
					s.opt.Log.Error("web: end the approver's stale sessions", "approver", sess.approver, "err", err)
				}
				http.SetCookie(w, sessionCookie("", -1))
				ok = false
			}
		}
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			http.Error(w, "refused: sign in first", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil || !validCSRF(sess, r.PostForm.Get("csrf")) {
				s.opt.Log.Warn("web: refused a state change without a valid CSRF token", "path", r.URL.Path, "approver", sess.approver)
				http.Error(w, "refused: missing or wrong CSRF token (reload the page)", http.StatusForbidden)
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, signedIn{id: id, session: sess})))
	}
}

// endSessions ends every session of approver, on every instance sharing the store: the
// approver left the approvers file (issue 21, item 4).
func (s *Server) endSessions(ctx context.Context, approver string) {
	if _, err := s.opt.Store.DeleteApproverPageSessions(ctx, approver); err != nil {
		s.opt.Log.Error("web: end the approver's sessions", "approver", approver, "err", err)
	}
}

func current(r *http.Request) signedIn {
	v, _ := r.Context().Value(ctxKey{}).(signedIn)
	return v
}

// page is what every template gets.
type page struct {
	Title    string
	Approver string
	CSRF     string
	Data     any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	me := current(r)
	p := page{Title: title, Approver: me.approver, CSRF: me.csrf, Data: data}
	var b strings.Builder
	if err := s.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		s.opt.Log.Error("web: render page", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	if err != nil {
		s.opt.Log.Error("web: "+msg, "err", err)
	}
	s.render(w, r, status, "error", "Error", msg)
}

// hostAllowed reports whether the page serves host (a Host header, with or without port).
func (s *Server) hostAllowed(host string) bool {
	if len(s.opt.Hosts) == 0 {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	for _, h := range s.opt.Hosts {
		if strings.EqualFold(strings.Trim(h, "[]"), host) {
			return true
		}
	}
	return false
}

// DefaultHosts are the host names a page listening on addr answers when none are configured:
// the loopback names, and addr's own host when it names one (not a wildcard address).
func DefaultHosts(addr string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	return hosts
}
