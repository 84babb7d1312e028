package codec

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"html/template"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/airlock-dev/airlock/internal/signin"
)

// CookieName is the codec server's sign-in cookie: the Temporal UI calls the codec server
// from the operator's browser, which sends this cookie (the UI's codec setting "include
// credentials"), not a bearer token.
const CookieName = "airlock_codec"

// SessionMax is how long a codec browser session lasts (issue 21, item 4: every sign-in
// surface expires its sessions); LoginFailures failed sign-ins or bearer tokens from one
// client address within LoginWindow make it wait (429) until the window slides.
const (
	SessionMax    = 12 * time.Hour
	LoginFailures = 10
	LoginWindow   = time.Minute
)

// session is the cookie value of a browser signed in with token until expires: the expiry
// (Unix seconds) and an HMAC of it under the token, so the cookie never holds the token, dies
// when the token changes, and dies at its expiry whatever the browser keeps.
func session(token string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return exp + "." + sessionMAC(token, exp)
}

func sessionMAC(token, exp string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("airlock codec browser session\x00" + exp))
	return hex.EncodeToString(m.Sum(nil))
}

// validSession reports whether cookie is a session of token that has not expired at now.
func validSession(token, cookie string, now time.Time) bool {
	exp, mac, ok := strings.Cut(cookie, ".")
	if !ok || token == "" {
		return false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !now.Before(time.Unix(n, 0)) {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(sessionMAC(token, exp)))
}

func clientAddr(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html><html><head><meta charset="utf-8">
<title>Airlock codec server</title></head><body><h1>Airlock codec server</h1>
{{if .}}<p id="status">{{.}}</p>{{end}}
<form method="post" action="/login"><label>Token <input type="password" name="token" id="token" autocomplete="off"></label>
<button type="submit" id="signin">Sign in</button></form>
<p>Then set this server as the codec server of the Temporal UI, with "include credentials".</p></body></html>`))

// Handler serves c as a Temporal codec server (POST /encode and /decode, the SDK's wire
// format) for operators allowed to read payloads in the Temporal UI or CLI. Every codec
// request but a CORS preflight needs "Authorization: Bearer <token>" or the sign-in cookie a
// browser gets from POST /login with the token (401 otherwise; compared in constant time).
// Browsers may call it only from origins (the Temporal UI's origin, exactly): their requests
// get the CORS headers, with credentials allowed so the UI can send the cookie; a request
// from any other origin is refused (403).
func Handler(c *Codec, token string, origins []string) http.Handler {
	return handlerAt(c, token, origins, time.Now)
}

// handlerAt is Handler with a clock (tests).
func handlerAt(c *Codec, token string, origins []string, now func() time.Time) http.Handler {
	// Decrypt, then escape hidden characters: the UI shows them as \u escapes, also in
	// payloads written before Airlock escaped them.
	inner := converter.NewPayloadCodecHTTPHandler(c, Escape{})
	fails := signin.NewLimiter(LoginFailures, LoginWindow, now)
	tooMany := func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", strconv.Itoa(int(LoginWindow.Seconds())))
		http.Error(w, "too many failed sign-ins: try again later", http.StatusTooManyRequests)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := clientAddr(r)
		if r.Method != http.MethodOptions && fails.Blocked(addr) {
			tooMany(w)
			return
		}
		if r.URL.Path == "/login" {
			// The attempt is counted before the token is compared, so concurrent guesses
			// cannot all pass the limit; a good sign-in gives it back.
			at, blocked, _ := fails.Attempt(addr)
			if blocked {
				tooMany(w)
				return
			}
			if login(w, r, token, now()) {
				fails.Forgive(at, addr)
			}
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			if !slices.Contains(origins, origin) {
				http.Error(w, "origin not allowed", http.StatusForbidden)
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions {
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		ok := false
		if got, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); bearer {
			at, blocked, _ := fails.Attempt(addr)
			if blocked {
				tooMany(w)
				return
			}
			if ok = token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1; ok {
				fails.Forgive(at, addr)
			}
		} else if ck, err := r.Cookie(CookieName); err == nil {
			ok = validSession(token, ck.Value, now())
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock codec"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// login serves the sign-in form (GET) and checks a submitted token (POST): a match sets the
// session cookie (HttpOnly, SameSite=Strict: sent only by pages of the same site, such as the
// Temporal UI on another port of the same host), good for SessionMax. It returns false for a
// wrong token (a failure the caller counts).
func login(w http.ResponseWriter, r *http.Request, token string, now time.Time) bool {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action 'self'")
	switch r.Method {
	case http.MethodGet:
		loginPage.Execute(w, "")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		got := r.PostFormValue("token")
		if token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.WriteHeader(http.StatusUnauthorized)
			loginPage.Execute(w, "Wrong token.")
			return false
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: session(token, now.Add(SessionMax)), Path: "/", HttpOnly: true, Secure: r.TLS != nil,
			SameSite: http.SameSiteStrictMode, MaxAge: int(SessionMax.Seconds())})
		loginPage.Execute(w, "Signed in: the Temporal UI can now decode payloads through this server.")
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
	return true
}
