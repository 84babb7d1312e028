package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/passkey/passkeytest"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
)

// Attacks on page sessions and passkey registration (issue 21, items 3 and 4), on both stores.
//
//   - Session fixation: a session id planted in alice's browser (a made-up one, or the
//     attacker's own live session) is never the one alice signs in under, and a sign-in ends
//     the session the browser brought (a shared browser signs the previous approver out).
//   - The CSRF token of one session with another session's cookie: refused, nothing sent.
//   - A reader of the database: the stored id hash is no cookie, and a CSRF token derived
//     from it is no CSRF token.
//   - A registration ceremony alice began, finished by bob: refused, alice's still works.
//   - Registration without the page's Origin, from another origin, or with another session's
//     CSRF token: refused before any ceremony starts.
//   - Guessing alice's password through the registration's password prompt with her stolen
//     session: limited like sign-in (and it counts towards sign-in's limit).
func TestSessionAndRegistrationAttacks(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			st, err := store.Open(context.Background(), liveURL(t, driver))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			rec := &recorder{}
			s, err := New(Options{Store: st, Approvers: func() (Authenticator, error) {
				return users{"alice": "correct horse", "bob": "battery staple"}, nil
			}, Decide: rec.decide, Passkeys: passkey.Config{RPID: "localhost", Origins: []string{"http://localhost:*"}},
				Challenge: func(context.Context, approval.Request) (string, string, error) { return "n", fixedMAC, nil },
				Log:       slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			u, _ := url.Parse(srv.URL)
			origin := "http://localhost:" + u.Port()
			type client struct{ sid string }
			do := func(c *client, path string, form url.Values, from string) (*http.Response, string) {
				t.Helper()
				method, body := "GET", io.Reader(nil)
				if form != nil {
					method, body = "POST", strings.NewReader(form.Encode())
				}
				req, _ := http.NewRequest(method, srv.URL+path, body)
				req.Host = "localhost:" + u.Port()
				if form != nil {
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					if from != "" {
						req.Header.Set("Origin", from)
					}
				}
				if c.sid != "" {
					req.AddCookie(&http.Cookie{Name: SessionCookie, Value: c.sid})
				}
				resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				out, _ := io.ReadAll(resp.Body)
				for _, ck := range resp.Cookies() {
					if ck.Name == SessionCookie {
						c.sid = ck.Value
					}
				}
				return resp, string(out)
			}
			signedInAs := func(c *client) string {
				t.Helper()
				resp, page := do(c, "/", nil, "")
				if resp.StatusCode != http.StatusOK {
					return ""
				}
				for _, n := range []string{"alice", "bob"} {
					if strings.Contains(page, `id="me">`+n+`<`) {
						return n
					}
				}
				t.Fatalf("GET / = 200 but names nobody:\n%s", page)
				return ""
			}
			csrf := func(c *client) string {
				t.Helper()
				_, page := do(c, "/passkeys", nil, "")
				m := csrfRe.FindStringSubmatch(page)
				if m == nil {
					t.Fatalf("no CSRF token:\n%s", page)
				}
				return m[1]
			}
			login := func(c *client, name, pw string) int {
				resp, _ := do(c, "/login", url.Values{"name": {name}, "password": {pw}}, origin)
				return resp.StatusCode
			}

			// Session fixation: bob signs in and plants his session id in alice's browser; a
			// made-up id too. alice signs in: she gets a fresh id each time, and the planted
			// ones are not hers.
			bob := &client{}
			if login(bob, "bob", "battery staple") != http.StatusSeeOther {
				t.Fatal("bob cannot sign in")
			}
			for _, planted := range []string{bob.sid, "attacker-chosen-session-id"} {
				alice := &client{sid: planted}
				if login(alice, "alice", "correct horse") != http.StatusSeeOther || alice.sid == planted || alice.sid == "" {
					t.Fatalf("sign-in over a planted session id kept it (%q -> %q)", planted, alice.sid)
				}
				if got := signedInAs(&client{sid: planted}); got != "" {
					t.Fatalf("the session id %q the browser brought to a sign-in is still %q's", planted, got)
				}
				if got := signedInAs(alice); got != "alice" {
					t.Fatalf("alice's fresh session is %q's", got)
				}
			}
			// Signing in over bob's session (a shared browser) ended it, wherever its cookie is.
			if got := signedInAs(bob); got != "" {
				t.Fatalf("bob's session, replaced by alice's sign-in, is still %q's", got)
			}
			login(bob, "bob", "battery staple")

			// One session's CSRF token with another session's cookie.
			alice := &client{}
			login(alice, "alice", "correct horse")
			for _, tok := range []string{csrf(bob), ""} {
				resp, _ := do(alice, "/decide", url.Values{"csrf": {tok}, "confirmation_id": {"cf-x"}, "decision": {"approve"}}, origin)
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("alice's cookie with CSRF token %q = %d, want 403", tok, resp.StatusCode)
				}
				if resp, _ := do(alice, "/passkeys/begin", url.Values{"csrf": {tok}, "password": {"correct horse"}}, origin); resp.StatusCode != http.StatusForbidden {
					t.Fatalf("registration with CSRF token %q = %d, want 403", tok, resp.StatusCode)
				}
			}
			if len(rec.reqs) != 0 {
				t.Fatalf("a cross-session form sent decisions: %+v", rec.reqs)
			}

			// A reader of the database: the id hash is not a cookie; a token derived from it
			// is not the CSRF token.
			row, err := st.GetPageSession(context.Background(), hashID(alice.sid))
			if err != nil {
				t.Fatal(err)
			}
			if got := signedInAs(&client{sid: row.IDHash}); got != "" {
				t.Fatalf("the stored id hash as a cookie signs in as %q", got)
			}
			if resp, _ := do(alice, "/passkeys/begin", url.Values{"csrf": {csrfOf(row.IDHash)}, "password": {"correct horse"}}, origin); resp.StatusCode != http.StatusForbidden {
				t.Fatalf("a CSRF token derived from the stored hash = %d, want 403", resp.StatusCode)
			}

			// Registration from another origin or with no Origin at all.
			aliceCSRF := csrf(alice)
			for _, from := range []string{"", "http://evil.example", "http://localhost:1", "null"} {
				if resp, _ := do(alice, "/passkeys/begin", url.Values{"csrf": {aliceCSRF}, "password": {"correct horse"}}, from); resp.StatusCode != http.StatusForbidden {
					t.Fatalf("registration begun from origin %q = %d, want 403", from, resp.StatusCode)
				}
			}

			// alice's ceremony, finished by bob.
			resp, body := do(alice, "/passkeys/begin", url.Values{"csrf": {aliceCSRF}, "password": {"correct horse"}}, origin)
			var begun struct {
				Ceremony string `json:"ceremony"`
			}
			if err := json.Unmarshal([]byte(body), &begun); err != nil || resp.StatusCode != http.StatusOK || begun.Ceremony == "" {
				t.Fatalf("alice begins = %d %s", resp.StatusCode, body)
			}
			resp, body = do(bob, "/passkeys/finish", url.Values{"csrf": {csrf(bob)}, "ceremony": {begun.Ceremony}, "credential": {`{"id":"x"}`}}, origin)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "expired or was already used") {
				t.Fatalf("bob finishing alice's ceremony = %d\n%s", resp.StatusCode, body)
			}
			if _, err := st.TakePasskeyChallenge(context.Background(), hashID(begun.Ceremony), "alice", time.Now()); err != nil {
				t.Fatalf("bob's attempt used up alice's ceremony: %v", err)
			}

			// Guessing alice's password with her stolen session: 5 wrong tries, then even the
			// right password is refused for a minute, here and at sign-in.
			thief := &client{sid: alice.sid}
			for i := 0; i < LoginFailures; i++ {
				if resp, _ := do(thief, "/passkeys/begin", url.Values{"csrf": {aliceCSRF}, "password": {"guess"}}, origin); resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("guess %d = %d, want 401", i, resp.StatusCode)
				}
			}
			if resp, _ := do(thief, "/passkeys/begin", url.Values{"csrf": {aliceCSRF}, "password": {"correct horse"}}, origin); resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("the right password after %d wrong ones = %d, want 429", LoginFailures, resp.StatusCode)
			}
			if code := login(&client{}, "alice", "correct horse"); code != http.StatusTooManyRequests {
				t.Fatalf("sign-in after %d wrong registration passwords = %d, want 429", LoginFailures, code)
			}
		})
	}
}

// An open /events stream (the live inbox) lasts only as long as its session: signed out on
// another instance, its password changed, its approver removed, or idle past SessionIdle, the
// stream ends within a check; while the session lives it stays open. Before, a stream opened
// with a stolen cookie kept reporting every change to the inbox after the session ended.
func TestEventStreamEndsWithItsSession(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			st, err := store.Open(context.Background(), liveURL(t, driver))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			auth := &changingPasswords{pw: map[string]string{"alice": "correct horse"}, gen: map[string]int{}}
			clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
			a := instance(t, st, auth, clk)
			// Instance B serves the streams, checking its sessions every 50 ms.
			sb, err := New(Options{Store: st, Approvers: func() (Authenticator, error) { return auth, nil }, Now: clk.now,
				Decide: (&recorder{}).decide, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			sb.recheck = 50 * time.Millisecond
			b := &env{t: t, st: st, rec: &recorder{}, pr: &proposalRecorder{}, now: clk.now()}
			b.srv = httptest.NewServer(sb)
			t.Cleanup(b.srv.Close)

			// open starts a stream on B with alice's cookie and returns a channel closed when
			// the stream ends.
			open := func(sid string) <-chan struct{} {
				t.Helper()
				req, _ := http.NewRequest("GET", b.srv.URL+"/events", nil)
				req.AddCookie(&http.Cookie{Name: SessionCookie, Value: sid})
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("GET /events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer resp.Body.Close()
					_, _ = io.Copy(io.Discard, resp.Body)
				}()
				t.Cleanup(func() { resp.Body.Close() })
				return done
			}
			ends := func(done <-chan struct{}, what string) {
				t.Helper()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatalf("the event stream outlived its session (%s)", what)
				}
			}
			lives := func(done <-chan struct{}, what string) {
				t.Helper()
				select {
				case <-done:
					t.Fatalf("the event stream ended while its session lives (%s)", what)
				case <-time.After(300 * time.Millisecond):
				}
			}
			password := "correct horse"
			signIn := func() *browser {
				br := a.browser()
				if resp := br.login("alice", password); resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("sign in = %d", resp.StatusCode)
				}
				return br
			}

			// Signed out on instance A.
			alice := signIn()
			done := open(alice.sid)
			lives(done, "just opened")
			if resp, _ := alice.post("/logout", url.Values{"csrf": {alice.csrf()}}); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign out = %d", resp.StatusCode)
			}
			ends(done, "signed out on another instance")

			// Idle past SessionIdle (the stream itself does not keep it alive).
			alice = signIn()
			done = open(alice.sid)
			clk.add(SessionIdle - time.Second)
			lives(done, "idle just under SessionIdle")
			clk.add(2 * time.Second)
			ends(done, "idle past SessionIdle")

			// Password changed.
			alice = signIn()
			done = open(alice.sid)
			auth.setPassword("alice", "new horse")
			password = "new horse"
			ends(done, "password changed")

			// Approver removed.
			alice = signIn()
			done = open(alice.sid)
			lives(done, "signed in with the new password")
			auth.remove("alice")
			ends(done, "approver removed")
		})
	}
}

// noneRegistration is the PublicKeyCredential JSON a browser returns from
// navigator.credentials.create with "none" attestation (W3C WebAuthn §6.5.4, §8.7) for auth's
// key under credential id credID, over challenge (base64url, as begin returned it), made on
// origin for rpID with flags (AT is added).
func noneRegistration(t *testing.T, auth *passkeytest.Authenticator, credID []byte, challenge, origin, rpID string, flags byte) string {
	t.Helper()
	cd, _ := json.Marshal(map[string]any{"type": "webauthn.create", "challenge": challenge, "origin": origin, "crossOrigin": false})
	rp := sha256.Sum256([]byte(rpID))
	ad := append(rp[:], flags|0x40)
	ad = binary.BigEndian.AppendUint32(ad, 0)
	ad = append(ad, make([]byte, 16)...) // AAGUID
	ad = binary.BigEndian.AppendUint16(ad, uint16(len(credID)))
	ad = append(ad, credID...)
	ad = append(ad, auth.PublicKey()...)
	att, err := webauthncbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": ad})
	if err != nil {
		t.Fatal(err)
	}
	b := base64.RawURLEncoding.EncodeToString
	out, _ := json.Marshal(map[string]any{"id": b(credID), "rawId": b(credID), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b(cd), "attestationObject": b(att)}})
	return string(out)
}

// Registration answers crafted outside a browser (what a stolen session and the password, or
// a hostile script, could post): without user verification, made on another origin, for
// another relying party, or over another ceremony's challenge, nothing is registered; a
// registration that claims a credential id another approver registered is refused and leaves
// that passkey theirs (no hijack by id); a genuine one registers. (With "none" attestation a
// registration proves no possession of the key: registering someone else's public key gains
// nothing, since every decision's assertion is verified under the key and the registrant's
// own name.)
func TestCraftedPasskeyRegistrations(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			st, err := store.Open(context.Background(), liveURL(t, driver))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			p := &passkeyPage{t: t, st: st, rec: &recorder{}}
			p.serve(Options{Store: st, Approvers: func() (Authenticator, error) { return users{"alice": "correct horse", "bob": "battery staple"}, nil },
				Decide: p.rec.decide, Passkeys: passkey.Config{RPID: "localhost", Origins: []string{"http://localhost:*"}}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			p.do("POST", "/login", url.Values{"name": {"bob"}, "password": {"battery staple"}})
			_, page := p.do("GET", "/passkeys", nil)
			m := csrfRe.FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("bob is not signed in:\n%s", page)
			}
			csrf := m[1]
			begin := func() string {
				t.Helper()
				resp, body := p.do("POST", "/passkeys/begin", url.Values{"csrf": {csrf}, "password": {"battery staple"}})
				var b struct {
					Ceremony  string `json:"ceremony"`
					PublicKey struct {
						Challenge string `json:"challenge"`
					} `json:"publicKey"`
				}
				if err := json.Unmarshal([]byte(body), &b); err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("begin = %d %s", resp.StatusCode, body)
				}
				return b.Ceremony + " " + b.PublicKey.Challenge
			}
			finish := func(ceremony, cred string) (int, string) {
				resp, body := p.do("POST", "/passkeys/finish", url.Values{"csrf": {csrf}, "ceremony": {ceremony}, "credential": {cred}, "name": {"crafted"}})
				return resp.StatusCode, body
			}
			auth, err := passkeytest.New()
			if err != nil {
				t.Fatal(err)
			}
			id := func() []byte { b := make([]byte, 16); _, _ = rand.Read(b); return b }

			// alice's passkey, registered before.
			aliceID := id()
			if err := st.AddPasskey(context.Background(), store.Passkey{CredentialID: base64.RawURLEncoding.EncodeToString(aliceID), Approver: "alice", PublicKey: []byte{1, 2, 3}}); err != nil {
				t.Fatal(err)
			}
			other := strings.Fields(begin())[1] // a challenge of another ceremony
			for _, c := range []struct {
				what, origin, rpID string
				flags              byte
				challenge          string
				credID             []byte
				want               string
			}{
				{"no user verification", p.origin, "localhost", 0x01, "", id(), "did not verify"},
				{"another origin", "https://evil.example", "localhost", 0x05, "", id(), "did not verify"},
				{"another relying party", p.origin, "evil.example", 0x05, "", id(), "did not verify"},
				{"another ceremony's challenge", p.origin, "localhost", 0x05, other, id(), "did not verify"},
				{"alice's credential id", p.origin, "localhost", 0x05, "", aliceID, "already registered"},
			} {
				f := strings.Fields(begin())
				ch := f[1]
				if c.challenge != "" {
					ch = c.challenge
				}
				code, body := finish(f[0], noneRegistration(t, auth, c.credID, ch, c.origin, c.rpID, c.flags))
				if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
					t.Fatalf("%s: finish = %d, want 400 %q\n%s", c.what, code, c.want, body)
				}
				if l, _ := st.ListPasskeys(context.Background(), "bob"); len(l) != 0 {
					t.Fatalf("%s registered %+v", c.what, l)
				}
			}
			if pk, err := st.GetPasskey(context.Background(), base64.RawURLEncoding.EncodeToString(aliceID)); err != nil || pk.Approver != "alice" || string(pk.PublicKey) != "\x01\x02\x03" {
				t.Fatalf("alice's passkey after bob claimed its id = %+v, %v", pk, err)
			}
			f := strings.Fields(begin())
			if code, body := finish(f[0], noneRegistration(t, auth, id(), f[1], p.origin, "localhost", 0x05)); code != http.StatusSeeOther {
				t.Fatalf("a genuine registration = %d\n%s", code, body)
			}
			if l, _ := st.ListPasskeys(context.Background(), "bob"); len(l) != 1 || string(l[0].PublicKey) != string(auth.PublicKey()) {
				t.Fatalf("bob's passkeys = %+v", l)
			}
		})
	}
}

// A Slack button on a passkey-required call (a message posted before the policy asked for a
// passkey, or a crafted interaction signed with the Slack secret) decides nothing: the page's
// real Decider refuses to sign a decision without an assertion, so nothing reaches the turn.
// (Were one sent anyway, the worker refuses it passkey_required:
// integration/passkey_test.go.)
func TestSlackCannotDecideAPasskeyCall(t *testing.T) {
	e := newEnv(t)
	if _, err := e.st.CreateConfirmation(context.Background(), store.Confirmation{ID: "cf-slpk", TokenHash: []byte("h-slpk"), WorkflowID: "turn/pk/1",
		RunID: "r", Seq: 1, CallID: "c", CapabilityID: "test.cap", Version: 1, ArgsDigest: "sha256:slpk", Arguments: json.RawMessage(`{}`),
		Display: "pay", ExpiresAt: time.Now().Add(time.Hour), PasskeyRequired: true}); err != nil {
		t.Fatal(err)
	}
	secret := []byte("slack-signing-secret")
	var key token.Key
	// The production Decider, with no Temporal client: anything it tried to send would panic
	// the test.
	s, err := New(Options{Store: e.st, Approvers: func() (Authenticator, error) { return users{"alice": "correct horse"}, nil },
		Decide: Decider(nil, e.st, key, approvers.Credential{}), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Slack: &SlackInteractions{SigningSecret: secret, Users: map[string]string{"UALICE": "alice"}, Allows: func(string) bool { return true }}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for i, action := range []string{SlackActionApprove, SlackActionDeny} {
		body := slackPayloadBody("UALICE", action, "cf-slpk|sha256:slpk", "")
		ts := strconv.FormatInt(time.Now().Add(time.Duration(i)*time.Second).Unix(), 10)
		status, out := postSlack(t, srv.URL, body, ts, SlackSignature(secret, ts, body))
		if status != http.StatusOK || !strings.Contains(out, "decided only with your passkey") {
			t.Fatalf("Slack %s on a passkey call = %d %s", action, status, out)
		}
	}
	if row, _ := e.st.GetConfirmation(context.Background(), "cf-slpk"); row.Decision != "" || row.Generation != 0 {
		t.Fatalf("the confirmation after the Slack clicks = %+v", row)
	}
}

// An assertion the approver's authenticator made on another page than this one (another local
// port: with the default loopback relying party every local port is a passkey origin, so a
// hostile local web app could have the authenticator sign a MAC obtained with a stolen
// session) is refused by the page before anything is sent; the same assertion made on this
// page is sent.
func TestPageRefusesAnAssertionMadeOnAnotherPage(t *testing.T) {
	p := newPasskeyPage(t)
	if _, err := p.st.CreateConfirmation(context.Background(), store.Confirmation{ID: "cf-x", TokenHash: []byte("h"), WorkflowID: "turn/x/1", RunID: "r", Seq: 1,
		CallID: "c", CapabilityID: "test.cap", Version: 1, ArgsDigest: "sha256:x", Arguments: json.RawMessage(`{}`), Display: "pay",
		ExpiresAt: time.Now().Add(time.Hour), PasskeyRequired: true}); err != nil {
		t.Fatal(err)
	}
	csrf := p.signIn()
	auth, err := passkeytest.New()
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := base64.RawURLEncoding.DecodeString(fixedMAC)
	for _, c := range []struct {
		origin string
		sent   bool
	}{{"http://localhost:1", false}, {"http://127.0.0.1" + strings.TrimPrefix(p.origin, "http://localhost"), false}, {"https://evil.example", false}, {p.origin, true}} {
		as, err := auth.Assert(passkeytest.Assertion{Origin: c.origin, RPID: "localhost", Challenge: mac, Flags: passkeytest.FlagUP | passkeytest.FlagUV, Counter: 1})
		if err != nil {
			t.Fatal(err)
		}
		before := len(p.rec.reqs)
		p.do("POST", "/decide", url.Values{"csrf": {csrf}, "confirmation_id": {"cf-x"}, "decision": {"approve"}, "args_digest": {"sha256:x"},
			"nonce": {"nonce-1"}, "passkey": {string(as)}})
		if sent := len(p.rec.reqs) > before; sent != c.sent {
			t.Fatalf("an assertion made on %s: sent = %v, want %v", c.origin, sent, c.sent)
		}
	}
}

// A reader of the database who also stole alice's cookie (not her password) watches
// passkey_challenges while alice registers a passkey, and finishes her ceremony first with a
// credential of their own over its stored challenge: refused, because the store holds only the
// hash of the ceremony id; alice's own browser then finishes it.
func TestDatabaseReaderCannotFinishARegistration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	st, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := &passkeyPage{t: t, st: st, rec: &recorder{}}
	p.serve(Options{Store: st, Approvers: func() (Authenticator, error) { return users{"alice": "correct horse"}, nil },
		Decide: p.rec.decide, Passkeys: passkey.Config{RPID: "localhost", Origins: []string{"http://localhost:*"}}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	csrf := p.signIn()
	resp, body := p.do("POST", "/passkeys/begin", url.Values{"csrf": {csrf}, "password": {"correct horse"}})
	var begun struct {
		Ceremony  string `json:"ceremony"`
		PublicKey struct {
			Challenge string `json:"challenge"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(body), &begun); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("begin = %d %s", resp.StatusCode, body)
	}
	// The reader's view.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var storedID, session string
	if err := db.QueryRow(`SELECT id, session FROM passkey_challenges`).Scan(&storedID, &session); err != nil {
		t.Fatal(err)
	}
	if storedID == begun.Ceremony || strings.Contains(session, begun.Ceremony) {
		t.Fatal("the store holds the ceremony id itself")
	}
	var sd struct {
		Challenge string `json:"challenge"`
	}
	if err := json.Unmarshal([]byte(session), &sd); err != nil || sd.Challenge == "" {
		t.Fatalf("stored session %s (%v)", session, err)
	}
	thief, err := passkeytest.New()
	if err != nil {
		t.Fatal(err)
	}
	cid := make([]byte, 16)
	_, _ = rand.Read(cid)
	resp, body = p.do("POST", "/passkeys/finish", url.Values{"csrf": {csrf}, "ceremony": {storedID}, "name": {"thief"},
		"credential": {noneRegistration(t, thief, cid, sd.Challenge, p.origin, "localhost", 0x05)}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "expired or was already used") {
		t.Fatalf("finishing alice's ceremony by its stored id = %d\n%s", resp.StatusCode, body)
	}
	if l, _ := st.ListPasskeys(context.Background(), "alice"); len(l) != 0 {
		t.Fatalf("the thief registered %+v", l)
	}
	mine, err := passkeytest.New()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = rand.Read(cid)
	if resp, body := p.do("POST", "/passkeys/finish", url.Values{"csrf": {csrf}, "ceremony": {begun.Ceremony}, "name": {"mine"},
		"credential": {noneRegistration(t, mine, cid, begun.PublicKey.Challenge, p.origin, "localhost", 0x05)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice's own finish = %d\n%s", resp.StatusCode, body)
	}
	if l, _ := st.ListPasskeys(context.Background(), "alice"); len(l) != 1 || l[0].Name != "mine" {
		t.Fatalf("alice's passkeys = %+v", l)
	}
}
