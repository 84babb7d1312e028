package codec

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"html/template"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// CookieName is the codec server's sign-in cookie: the Temporal UI calls the codec server
// from the operator's browser, which sends this cookie (the UI's codec setting "include
// credentials"), not a bearer token.
const CookieName = "airlock_codec"

// session is the cookie value of a browser signed in with token: an HMAC of the token, so the
// cookie never holds the token itself and every cookie dies when the token changes.
func session(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("airlock codec browser session"))
	return hex.EncodeToString(m.Sum(nil))
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
	// Decrypt, then escape hidden characters: the UI shows them as \u escapes, also in
	// payloads written before Airlock escaped them.
	inner := converter.NewPayloadCodecHTTPHandler(c, Escape{})
	sess := session(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" {
			login(w, r, token, sess)
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
			ok = token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
		} else if ck, err := r.Cookie(CookieName); err == nil {
			ok = token != "" && subtle.ConstantTimeCompare([]byte(ck.Value), []byte(sess)) == 1
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
// Temporal UI on another port of the same host).
func login(w http.ResponseWriter, r *http.Request, token, sess string) {
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
			return
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: sess, Path: "/", HttpOnly: true, Secure: r.TLS != nil,
			SameSite: http.SameSiteStrictMode})
		loginPage.Execute(w, "Signed in: the Temporal UI can now decode payloads through this server.")
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}
