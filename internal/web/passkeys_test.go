package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/store"
)

// passkeyPage is a page server for passkey tests reached as http://localhost:PORT (the Host
// and Origin a browser sends there), with a recorded Decide and a fixed Challenge.
type passkeyPage struct {
	t      *testing.T
	srv    *httptest.Server
	st     *store.Store
	rec    *recorder
	origin string
	sid    string
	c      *http.Client
	asked  []approval.Request
}

const fixedMAC = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8" // 32 bytes 0..31, base64url

func newPasskeyPage(t *testing.T) *passkeyPage {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := &passkeyPage{t: t, st: st, rec: &recorder{}}
	p.serve(Options{Store: st, Approvers: func() (Authenticator, error) { return users{"alice": "correct horse"}, nil },
		Decide: p.rec.decide, Passkeys: passkey.Config{RPID: "localhost", Origins: []string{"http://localhost:*"}},
		Challenge: func(_ context.Context, r approval.Request) (string, string, error) {
			p.asked = append(p.asked, r)
			return "nonce-1", fixedMAC, nil
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	jar, _ := cookiejar.New(nil)
	p.c.Jar = jar
	return p
}

// serve starts the page of o on a local server for p: its origin as the browser names it
// (http://localhost:PORT) and a client that follows no redirect (and keeps no cookies).
func (p *passkeyPage) serve(o Options) {
	p.t.Helper()
	s, err := New(o)
	if err != nil {
		p.t.Fatal(err)
	}
	p.srv = httptest.NewServer(s)
	p.t.Cleanup(p.srv.Close)
	u, _ := url.Parse(p.srv.URL)
	p.origin = "http://localhost:" + u.Port()
	p.c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (p *passkeyPage) do(method, path string, form url.Values) (*http.Response, string) {
	p.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, p.srv.URL+path, body)
	req.Host = strings.TrimPrefix(p.origin, "http://")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", p.origin)
	}
	if p.sid != "" {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: p.sid})
	}
	resp, err := p.c.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			p.sid = c.Value
		}
	}
	return resp, string(out)
}

func (p *passkeyPage) signIn() string {
	p.t.Helper()
	p.do("POST", "/login", url.Values{"name": {"alice"}, "password": {"correct horse"}})
	_, page := p.do("GET", "/passkeys", nil)
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		p.t.Fatalf("no CSRF token on /passkeys:\n%s", page)
	}
	return m[1]
}

// The Passkeys page and its ceremonies need a signed-in approver who types their password
// again (a session alone adds no passkey); registration is begun with
// options for the configured relying party (kept in the store), a ceremony is used once, and
// an answer that is not a registration registers nothing; nobody removes a passkey that is
// not theirs.
func TestPasskeyRegistrationEndpoints(t *testing.T) {
	p := newPasskeyPage(t)
	if resp, _ := p.do("GET", "/passkeys", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /passkeys signed out = %d", resp.StatusCode)
	}
	if resp, _ := p.do("POST", "/passkeys/begin", url.Values{"csrf": {"x"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST /passkeys/begin signed out = %d", resp.StatusCode)
	}
	csrf := p.signIn()
	if resp, _ := p.do("POST", "/passkeys/begin", url.Values{"csrf": {"wrong"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("begin without the CSRF token = %d", resp.StatusCode)
	}
	resp, body := p.do("POST", "/passkeys/begin", url.Values{"csrf": {csrf}, "password": {"wrong"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Wrong password") {
		t.Fatalf("begin with a wrong password = %d %s", resp.StatusCode, body)
	}
	if n, _ := p.st.PasskeyHolders(context.Background()); len(n) != 0 {
		t.Fatal("a passkey exists")
	}
	resp, body = p.do("POST", "/passkeys/begin", url.Values{"csrf": {csrf}, "password": {"correct horse"}})
	var begun struct {
		Ceremony  string `json:"ceremony"`
		PublicKey struct {
			Challenge string `json:"challenge"`
			RP        struct {
				ID string `json:"id"`
			} `json:"rp"`
			User struct {
				Name string `json:"name"`
			} `json:"user"`
			AuthenticatorSelection struct {
				UserVerification string `json:"userVerification"`
			} `json:"authenticatorSelection"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(body), &begun); err != nil || resp.StatusCode != http.StatusOK || begun.Ceremony == "" || begun.PublicKey.Challenge == "" ||
		begun.PublicKey.RP.ID != "localhost" || begun.PublicKey.User.Name != "alice" || begun.PublicKey.AuthenticatorSelection.UserVerification != "required" {
		t.Fatalf("begin = %d %s (%v)", resp.StatusCode, body, err)
	}
	resp, body = p.do("POST", "/passkeys/finish", url.Values{"csrf": {csrf}, "ceremony": {begun.Ceremony}, "credential": {`{"id":"x"}`}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "not a passkey registration") {
		t.Fatalf("finish with a non-registration = %d\n%s", resp.StatusCode, body)
	}
	resp, body = p.do("POST", "/passkeys/finish", url.Values{"csrf": {csrf}, "ceremony": {begun.Ceremony}, "credential": {`{"id":"x"}`}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "expired or was already used") {
		t.Fatalf("a ceremony used twice = %d\n%s", resp.StatusCode, body)
	}
	if l, _ := p.st.ListPasskeys(context.Background(), "alice"); len(l) != 0 {
		t.Fatalf("passkeys registered: %+v", l)
	}
	if err := p.st.AddPasskey(context.Background(), store.Passkey{CredentialID: "bobs-key", Approver: "bob", PublicKey: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if resp, _ := p.do("POST", "/passkeys/remove", url.Values{"csrf": {csrf}, "credential_id": {"bobs-key"}}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("alice removing bob's passkey = %d", resp.StatusCode)
	}
	if k, _ := p.st.GetPasskey(context.Background(), "bobs-key"); k.RemovedAt != nil {
		t.Fatal("bob's passkey was removed by alice")
	}
}

// A passkey-required card asks for the passkey; /decide/challenge refuses an approver with no
// passkey and otherwise returns the decision's MAC as the challenge, for this RP, with the
// approver's passkeys as allowCredentials; /decide forwards the nonce and the assertion, and
// refuses an assertion that is not JSON without sending anything.
func TestPasskeyDecisionEndpoints(t *testing.T) {
	p := newPasskeyPage(t)
	now := time.Now()
	if _, err := p.st.CreateConfirmation(context.Background(), store.Confirmation{ID: "cf-pk", TokenHash: []byte("h"), WorkflowID: "turn/c/1", RunID: "r", Seq: 1,
		CallID: "c", CapabilityID: "test.cap", Version: 1, ArgsDigest: "sha256:pk", Arguments: json.RawMessage(`{"n":1}`), Display: "pay {}",
		ExpiresAt: now.Add(time.Hour), PasskeyRequired: true}); err != nil {
		t.Fatal(err)
	}
	csrf := p.signIn()
	_, inbox := p.do("GET", "/", nil)
	if !strings.Contains(inbox, `class="approve" data-passkey="1"`) || !strings.Contains(inbox, "Decided only with your passkey") || !strings.Contains(inbox, `name="passkey"`) {
		t.Fatalf("the inbox does not ask for a passkey on cf-pk:\n%s", inbox)
	}
	form := url.Values{"csrf": {csrf}, "confirmation_id": {"cf-pk"}, "decision": {"approve"}, "args_digest": {"sha256:pk"}}
	resp, body := p.do("POST", "/decide/challenge", form)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "register one under Passkeys first") || len(p.asked) != 0 {
		t.Fatalf("challenge without a passkey = %d %s (asked %d)", resp.StatusCode, body, len(p.asked))
	}
	if err := p.st.AddPasskey(context.Background(), store.Passkey{CredentialID: "YWxpY2Vz", Approver: "alice", PublicKey: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	resp, body = p.do("POST", "/decide/challenge", form)
	var ch struct {
		Nonce     string `json:"nonce"`
		PublicKey struct {
			Challenge        string `json:"challenge"`
			RPID             string `json:"rpId"`
			UserVerification string `json:"userVerification"`
			Allow            []struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			} `json:"allowCredentials"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(body), &ch); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("challenge = %d %s (%v)", resp.StatusCode, body, err)
	}
	want, _ := base64.RawURLEncoding.DecodeString(fixedMAC)
	got, _ := base64.RawURLEncoding.DecodeString(ch.PublicKey.Challenge)
	if ch.Nonce != "nonce-1" || string(got) != string(want) || ch.PublicKey.RPID != "localhost" || ch.PublicKey.UserVerification != "required" ||
		len(ch.PublicKey.Allow) != 1 || ch.PublicKey.Allow[0].ID != "YWxpY2Vz" || ch.PublicKey.Allow[0].Type != "public-key" {
		t.Fatalf("challenge answer = %+v", ch)
	}
	if len(p.asked) != 1 || p.asked[0].Approver != "alice" || p.asked[0].ConfirmationID != "cf-pk" || p.asked[0].ArgsDigest != "sha256:pk" {
		t.Fatalf("the challenge signed %+v", p.asked)
	}
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("nonce", "nonce-1")
	bad.Set("passkey", "not json")
	p.do("POST", "/decide", bad)
	if len(p.rec.reqs) != 0 {
		t.Fatalf("a decision with a non-JSON assertion was sent: %+v", p.rec.reqs)
	}
	good := bad
	good.Set("passkey", `{"id":"YWxpY2Vz"}`)
	p.do("POST", "/decide", good)
	if len(p.rec.reqs) != 1 || p.rec.reqs[0].Nonce != "nonce-1" || string(p.rec.reqs[0].Passkey) != `{"id":"YWxpY2Vz"}` || p.rec.reqs[0].Approver != "alice" {
		t.Fatalf("decide sent %+v", p.rec.reqs)
	}
	// A page reached under an address that is no passkey origin (an IP) says so.
	req := form.Encode()
	r, _ := http.NewRequest("POST", p.srv.URL+"/decide/challenge", strings.NewReader(req))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", p.srv.URL)
	r.AddCookie(&http.Cookie{Name: SessionCookie, Value: p.sid})
	res, err := p.c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "not served at a configured passkey origin") {
		t.Fatalf("challenge on 127.0.0.1 = %d %s", res.StatusCode, b)
	}
}
