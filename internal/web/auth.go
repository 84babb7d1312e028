package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
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

// sessions is the in-memory session store: ids are 256-bit random values; a restart of the
// server signs everyone out.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	now  func() time.Time
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{byID: map[string]*session{}, now: now}
}

// randomID is 32 random bytes, base64url.
func randomID() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// create starts a session for approver and returns its id.
func (s *sessions) create(approver, stamp string) (string, error) {
	id, err := randomID()
	if err != nil {
		return "", err
	}
	csrf, err := randomID()
	if err != nil {
		return "", err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.byID { // sweep expired sessions while we hold the lock
		if s.expired(v, now) {
			delete(s.byID, k)
		}
	}
	s.byID[id] = &session{approver: approver, stamp: stamp, csrf: csrf, created: now, lastSeen: now}
	return id, nil
}

func (s *sessions) expired(v *session, now time.Time) bool {
	return now.Sub(v.lastSeen) >= SessionIdle || now.Sub(v.created) >= SessionMax
}

// get returns a copy of the live session id names and refreshes its idle time.
func (s *sessions) get(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[id]
	if !ok {
		return session{}, false
	}
	if s.expired(v, now) {
		delete(s.byID, id)
		return session{}, false
	}
	v.lastSeen = now
	return *v, true
}

func (s *sessions) setAnswer(id string, a answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.byID[id]; ok {
		v.lastAnswer = &a
	}
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
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

// sameOrigin reports whether a state-changing request comes from this site: its Origin (or,
// when a browser sent none, its Referer) names the scheme and host the request was sent to.
// A request with neither is refused.
func sameOrigin(r *http.Request) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	want := scheme + "://" + r.Host
	if o := r.Header.Get("Origin"); o != "" {
		return o == want
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		return err == nil && u.Scheme+"://"+u.Host == want
	}
	return false
}

// limiter counts failed sign-ins per key (an approver name or a client address) over a
// sliding LoginWindow.
type limiter struct {
	mu       sync.Mutex
	failures map[string][]time.Time
	now      func() time.Time
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{failures: map[string][]time.Time{}, now: now}
}

func (l *limiter) recent(key string, now time.Time) []time.Time {
	kept := l.failures[key][:0]
	for _, t := range l.failures[key] {
		if now.Sub(t) < LoginWindow {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		delete(l.failures, key)
		return nil
	}
	l.failures[key] = kept
	return kept
}

// attempt reserves one sign-in attempt for keys, atomically: when any key already has
// LoginFailures failures in the window it reports blocked and when the oldest of them leaves
// it; otherwise it counts the attempt as a failure for every key now, before the password is
// checked, so concurrent guesses cannot all pass the check before any is counted. A sign-in
// that succeeds gives its attempt back (forgive with the returned time).
func (l *limiter) attempt(keys ...string) (at time.Time, blocked bool, wait time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if r := l.recent(k, now); len(r) >= LoginFailures {
			return now, true, LoginWindow - now.Sub(r[0])
		}
	}
	for _, k := range keys {
		l.failures[k] = append(l.recent(k, now), now)
	}
	return now, false, 0
}

// forgive takes back the attempt reserved at at for keys (the sign-in succeeded).
func (l *limiter) forgive(at time.Time, keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		ts := l.failures[k]
		for i, t := range ts {
			if t.Equal(at) {
				l.failures[k] = append(ts[:i:i], ts[i+1:]...)
				break
			}
		}
		if len(l.failures[k]) == 0 {
			delete(l.failures, k)
		}
	}
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
