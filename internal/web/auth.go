package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
)

// SessionCookie is the name of the session cookie. The __Host- prefix makes the browser refuse
// it unless it is Secure, host-only and scoped to "/".
const SessionCookie = "__Host-airlock-session"

// Session lifetimes: a session ends SessionIdle after its last request or SessionMax after
// sign-in, whichever comes first.
const (
	SessionIdle = 30 * time.Minute
	SessionMax  = 12 * time.Hour
)

// Sign-in rate limit: after LoginFailures failed sign-ins within LoginWindow for one approver
// name or from one client address, further attempts are answered 429 until the window slides.
const (
	LoginFailures = 5
	LoginWindow   = time.Minute
)

// answer is the outcome of the last decision a session sent, shown on the turn's page.
type answer struct {
	WorkflowID, ConfirmationID string
	OK                         bool
	Text                       string
}

type session struct {
	approver string
	// stamp is the approver's PasswordStamp at sign-in: a password change ends the session.
	stamp      string
	csrf       string
	created    time.Time
	lastSeen   time.Time
	lastAnswer *answer
}

// touchEvery is how stale a session's last-seen time may get before a request writes it
// again: one store write per session per minute, not per request; a session may so end up
// to this much before SessionIdle.
const touchEvery = time.Minute

// sessions keeps the page's sign-in sessions in the store (issue 21, item 4), so every
// `airlock web` instance behind one address shares them and a restart keeps them. Session ids
// are 256-bit random values; the store holds only their SHA-256, and each session's CSRF token
// is derived from its id (csrfOf), so nothing read from the database signs anyone in or forges
// a form.
type sessions struct {
	st  *store.Store
	now func() time.Time
}

func newSessions(st *store.Store, now func() time.Time) *sessions {
	return &sessions{st: st, now: now}
}

// randomID is 32 random bytes, base64url.
func randomID() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// hashID is the store's key for session id: hex SHA-256.
func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// csrfOf is the CSRF token of session id: base64url SHA-256 over a domain label and the id.
// Only the holder of the cookie (and the page, which prints it) knows it.
func csrfOf(id string) string {
	sum := sha256.Sum256([]byte("airlock page csrf v1\x00" + id))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// create starts a session for approver and returns its id; it also removes expired sessions.
func (s *sessions) create(ctx context.Context, approver, stamp string) (string, error) {
	id, err := randomID()
	if err != nil {
		return "", err
	}
	now := s.now()
	if _, err := s.st.DeleteExpiredPageSessions(ctx, now.Add(-SessionIdle), now.Add(-SessionMax)); err != nil {
		return "", err
	}
	if err := s.st.CreatePageSession(ctx, store.PageSession{IDHash: hashID(id), Approver: approver, Stamp: stamp, Created: now, LastSeen: now}); err != nil {
		return "", err
	}
	return id, nil
}

func expired(v store.PageSession, now time.Time) bool {
	return now.Sub(v.LastSeen) >= SessionIdle || now.Sub(v.Created) >= SessionMax
}

// get returns the live session id names and refreshes its idle time; (false, nil) when there
// is none or it expired, an error when the store cannot answer (the caller refuses the request
// rather than signing the approver out).
func (s *sessions) get(ctx context.Context, id string) (session, bool, error) {
	if id == "" {
		return session{}, false, nil
	}
	now := s.now()
	key := hashID(id)
	v, err := s.st.GetPageSession(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return session{}, false, nil
	}
	if err != nil {
		return session{}, false, err
	}
	if expired(v, now) {
		return session{}, false, s.st.DeletePageSession(ctx, key)
	}
	if now.Sub(v.LastSeen) >= touchEvery {
		if err := s.st.TouchPageSession(ctx, key, now); err != nil {
			return session{}, false, err
		}
		v.LastSeen = now
	}
	out := session{approver: v.Approver, stamp: v.Stamp, csrf: csrfOf(id), created: v.Created, lastSeen: v.LastSeen}
	if v.Answer != "" {
		var a answer
		if json.Unmarshal([]byte(v.Answer), &a) == nil {
			out.lastAnswer = &a
		}
	}
	return out, true, nil
}

func (s *sessions) setAnswer(ctx context.Context, id string, a answer) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.st.SetPageSessionAnswer(ctx, hashID(id), string(b))
}

func (s *sessions) remove(ctx context.Context, id string) error {
	return s.st.DeletePageSession(ctx, hashID(id))
}

// sessionCookie builds the session cookie (maxAge < 0 clears it).
func sessionCookie(id string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: id, Path: "/", MaxAge: maxAge,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

// validCSRF compares the form's token with the session's in constant time.
func validCSRF(sess session, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(sess.csrf), []byte(got)) == 1
}

// requestOrigin is the origin a request was sent to (scheme and Host), which sameOrigin
// requires its Origin header to name.
func requestOrigin(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// sameOrigin reports whether a state-changing request comes from this site: its Origin (or,
// when a browser sent none, its Referer) names the scheme and host the request was sent to.
// A request with neither is refused.
func sameOrigin(r *http.Request) bool {
	want := requestOrigin(r)
	if o := r.Header.Get("Origin"); o != "" {
		return o == want
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		return err == nil && u.Scheme+"://"+u.Host == want
	}
	return false
}

// clientIP is the request's peer address without the port (never a forwarded header: the
// page is served directly, or behind a proxy that must do its own limiting).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// userKey and ipKey keep the two namespaces of limiter keys apart.
func userKey(name string) string { return "user:" + strings.ToLower(name) }
func ipKey(ip string) string     { return "ip:" + ip }

// PasswordStamper is what an Authenticator may also offer (approvers.Set does): a value that
// changes whenever the approver's password does, so the page ends the sessions signed in with
// the old one (issue 21, item 4).
type PasswordStamper interface {
	PasswordStamp(approver string) string
}

// stampOf is auth's PasswordStamp of approver ("" when auth offers none).
func stampOf(auth Authenticator, approver string) string {
	if ps, ok := auth.(PasswordStamper); ok {
		return ps.PasswordStamp(approver)
	}
	return ""
}
