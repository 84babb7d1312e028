package identity_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/identity"
	"github.com/airlock-dev/airlock/internal/identity/oidctest"
)

// page is a relying party as the approver page mounts it: /login begins, /oidc/callback
// finishes and answers the identity as JSON (or 403 with the error).
type page struct {
	URL  string
	rp   *identity.RP
	mu   sync.Mutex
	last identity.Identity
	errs []error
}

func startPage(t *testing.T, mutate func(*identity.Config), clientIDs ...string) (*page, *oidctest.Provider) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &page{URL: "http://" + l.Addr().String()}
	if len(clientIDs) == 0 {
		clientIDs = []string{"airlock-page"}
	}
	op := oidctest.Start(t, clientIDs, p.URL+"/oidc/callback")
	cfg := identity.Config{Issuer: op.Issuer, ClientID: "airlock-page", ClientSecret: "secret-airlock-page", RedirectURL: p.URL + "/oidc/callback",
		GroupMap: map[string]string{"Airlock-Payments": "payments", "Airlock-Ops": "ops"}}
	if mutate != nil {
		mutate(&cfg)
	}
	if p.rp, err = identity.New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) { p.rp.Begin(w, r, "/") })
	mux.HandleFunc("/oidc/callback", func(w http.ResponseWriter, r *http.Request) {
		id, _, err := p.rp.Finish(r)
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.errs = append(p.errs, err)
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		p.last = id
		json.NewEncoder(w).Encode(id)
	})
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	srv.Start()
	t.Cleanup(srv.Close)
	return p, op
}

func (p *page) lastErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) == 0 {
		return nil
	}
	return p.errs[len(p.errs)-1]
}

// Sign-in through a real provider: code flow with PKCE, state and nonce; the identity is the
// provider's subject, the name from preferred_username, the groups mapped (an unmapped
// provider group grants nothing); a group change at the provider takes effect at the next
// check (Recheck), and a person removed from every group keeps no approver group.
func TestSignInThroughProviderAndGroupChange(t *testing.T) {
	p, op := startPage(t, nil)
	op.SetGroups("u-alice", "Airlock-Payments", "Everyone")
	b := oidctest.Browser(t)
	resp := oidctest.SignInAt(t, b, p.URL+"/login", "alice")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, body(t, resp))
	}
	resp.Body.Close()
	id := p.last
	if id.Subject != "u-alice" || id.Issuer != op.Issuer || id.Name != "alice" || strings.Join(id.Groups, ",") != "payments" ||
		strings.Join(id.ProviderGroups, ",") != "Airlock-Payments,Everyone" || id.RefreshToken == "" || !id.Expiry.After(time.Now()) {
		t.Fatalf("identity = %+v", id)
	}
	// The provider rotates its signing key: the next sign-in's ID token names a key the RP has
	// not seen, and the RP fetches the provider's key set again instead of refusing it.
	firstKey := id.KeyID
	op.RotateKey(t)
	resp = oidctest.SignInAt(t, oidctest.Browser(t), p.URL+"/login", "alice")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in after the provider rotated its key: %d %s", resp.StatusCode, body(t, resp))
	}
	resp.Body.Close()
	id = p.last
	if !strings.HasPrefix(id.KeyID, "rotated-") || id.KeyID == firstKey || firstKey == "" {
		t.Fatalf("the ID token after rotation was signed by %q (before: %q)", id.KeyID, firstKey)
	}
	op.SetGroups("u-alice", "Airlock-Ops")
	now, err := p.rp.Recheck(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(now.Groups, ",") != "ops" || now.Person() != id.Person() {
		t.Fatalf("after the provider moved alice to ops: %+v", now)
	}
	op.SetGroups("u-alice")
	if now, err = p.rp.Recheck(context.Background(), now); err != nil || len(now.Groups) != 0 {
		t.Fatalf("after the provider removed alice from every group: %+v, %v", now, err)
	}
	// Removed from the directory: the provider refuses the next check, so the session ends.
	op.RemoveUser("u-alice")
	if gone, err := p.rp.Recheck(context.Background(), now); err == nil {
		t.Fatalf("a person removed at the provider passed the check: %+v", gone)
	}
	// The file and the provider side by side: "alice" in the file without alice's subject is
	// another person, so the provider's alice is refused; bound by oidc_subject, she signs in
	// as the file's alice with both the file's and the provider's groups.
	file := approvers.File{Approvers: []approvers.Approver{{Name: "alice", Groups: []string{"audit"}}}}
	set := parse(t, file)
	if _, _, err := identity.Resolve(set, id); !errorsIs(err, identity.ErrTwoPeople) {
		t.Fatalf("an unbound file alice and the provider's alice: %v", err)
	}
	file.Approvers[0].Subject = id.Person()
	if name, groups, err := identity.Resolve(parse(t, file), id); err != nil || name != "alice" || strings.Join(groups, ",") != "audit,payments" {
		t.Fatalf("bound: %s %v %v", name, groups, err)
	}
	// A principal of another approver is that approver's name too.
	file = approvers.File{Approvers: []approvers.Approver{{Name: "al", Principals: []string{"alice"}}}}
	if _, _, err := identity.Resolve(parse(t, file), id); !errorsIs(err, identity.ErrTwoPeople) {
		t.Fatalf("alice, a principal of approver al: %v", err)
	}
}

// The redirect is accepted once, from the browser that began it: a replayed callback (same
// code and state) is refused, as is a state finished in another browser, and a forged state.
func TestSignInStateIsSingleUseAndBrowserBound(t *testing.T) {
	p, _ := startPage(t, nil)
	b := oidctest.Browser(t)
	var callback string
	b.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), p.URL+"/oidc/callback") {
			callback = r.URL.String()
		}
		return nil
	}
	resp := oidctest.SignInAt(t, b, p.URL+"/login", "bob")
	if resp.StatusCode != http.StatusOK || callback == "" {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, body(t, resp))
	}
	resp.Body.Close()
	// Replayed in the same browser.
	resp, err := b.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a replayed callback: %d", resp.StatusCode)
	}
	wantErr(t, "replayed callback", p.lastErr(), identity.ErrState)

	// Begun in one browser, finished in another (login CSRF): refused.
	victim, attacker := oidctest.Browser(t), oidctest.Browser(t)
	attacker.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), p.URL+"/oidc/callback") {
			callback = r.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp = oidctest.SignInAt(t, attacker, p.URL+"/login", "carol")
	resp.Body.Close()
	resp, err = victim.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a callback finished in another browser: %d", resp.StatusCode)
	}
	wantErr(t, "another browser", p.lastErr(), identity.ErrState)
	resp, _ = victim.Get(p.URL + "/oidc/callback?state=forged&code=x")
	resp.Body.Close()
	wantErr(t, "forged state", p.lastErr(), identity.ErrState)
}

// A name claim that is not an approver name is refused at sign-in, and the subject claim is
// configurable (Entra ID's "oid" is absent from this provider's tokens: refused, never a
// fallback to another claim).
func TestSignInRefusesUnusableClaims(t *testing.T) {
	p, _ := startPage(t, func(c *identity.Config) { c.NameClaim = "email_verified" })
	resp := oidctest.SignInAt(t, oidctest.Browser(t), p.URL+"/login", "alice")
	resp.Body.Close()
	wantErr(t, "a boolean name claim", p.lastErr(), identity.ErrName)
	p, _ = startPage(t, func(c *identity.Config) { c.SubjectClaim = "oid" })
	resp = oidctest.SignInAt(t, oidctest.Browser(t), p.URL+"/login", "alice")
	resp.Body.Close()
	wantErr(t, "no oid claim", p.lastErr(), identity.ErrToken)
}

// requesterApp is an application registered at a provider as a plain OAuth client: its users
// sign in there and it presents their access tokens to Airlock as the requester's identity.
type requesterApp struct {
	op       *oidctest.Provider
	catchURL string
}

func startRequesterProviders(t *testing.T, clientIDs ...string) (*requesterApp, *requesterApp) {
	t.Helper()
	catch := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(catch.Close)
	return &requesterApp{op: oidctest.Start(t, clientIDs, catch.URL+"/cb"), catchURL: catch.URL + "/cb"},
		&requesterApp{op: oidctest.Start(t, clientIDs, catch.URL+"/cb"), catchURL: catch.URL + "/cb"}
}

// accessToken signs username in at the app's provider as client (code flow with PKCE) and
// returns the provider's JWT access token.
func (a *requesterApp) accessToken(t *testing.T, client, username string) string {
	t.Helper()
	ctx := context.Background()
	p, err := oidc.NewProvider(ctx, a.op.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	conf := oauth2.Config{ClientID: client, ClientSecret: "secret-" + client, RedirectURL: a.catchURL, Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile"}}
	verifier := oauth2.GenerateVerifier()
	start := httptest.NewServer(http.RedirectHandler(conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), http.StatusFound))
	defer start.Close()
	resp := oidctest.SignInAt(t, oidctest.Browser(t), start.URL, username)
	resp.Body.Close()
	q := resp.Request.URL.Query()
	if q.Get("state") != "st" || q.Get("code") == "" {
		t.Fatalf("no code at the app's redirect: %s", resp.Request.URL)
	}
	tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(tok.AccessToken, ".") != 2 {
		t.Fatalf("the provider's access token is not a JWT: %.20s…", tok.AccessToken)
	}
	return tok.AccessToken
}

// Requester access tokens (issue 33, item 2) verified against a real provider's keys: a token
// the provider issued for Airlock's audience proves its user ("oidc:<sub>", person
// issuer#sub); an expired token, one for another audience, one from another issuer (another
// provider with the same client registration) and a tampered one are refused.
func TestAccessTokensOfARealProvider(t *testing.T) {
	app, other := startRequesterProviders(t, "airlock-api", "other-app")
	ctx := context.Background()
	v, err := identity.NewAccessVerifier(ctx, identity.AccessConfig{Issuer: app.op.Issuer, Audience: "airlock-api", PrincipalClaim: "preferred_username"})
	if err != nil {
		t.Fatal(err)
	}
	tok := app.accessToken(t, "airlock-api", "alice")
	who, err := v.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if who.Principal != "oidc:alice" || who.Person != app.op.Issuer+"#u-alice" || !who.Expiry.After(time.Now()) {
		t.Fatalf("requester = %+v", who)
	}
	late, err := identity.NewAccessVerifier(ctx, identity.AccessConfig{Issuer: app.op.Issuer, Audience: "airlock-api",
		Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.Verify(ctx, tok); !errors.Is(err, identity.ErrAccessToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired token: %v", err)
	}
	if _, err := v.Verify(ctx, app.accessToken(t, "other-app", "alice")); !errors.Is(err, identity.ErrAccessToken) || !strings.Contains(err.Error(), "audience") {
		t.Fatalf("a token for another audience: %v", err)
	}
	// Another provider's token fails on its keys before its issuer is read: either refuses it.
	if _, err := v.Verify(ctx, other.accessToken(t, "airlock-api", "alice")); !errors.Is(err, identity.ErrAccessToken) ||
		!(strings.Contains(err.Error(), "issuer") || strings.Contains(err.Error(), "signature")) {
		t.Fatalf("a token from another issuer: %v", err)
	}
	// The right keys, another issuer expected: the issuer check alone refuses it.
	wrongIss, err := identity.NewAccessVerifier(ctx, identity.AccessConfig{Issuer: other.op.Issuer, JWKSURL: app.op.Issuer + "/keys", Audience: "airlock-api"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrongIss.Verify(ctx, tok); !errors.Is(err, identity.ErrAccessToken) || !strings.Contains(err.Error(), "different provider") {
		t.Fatalf("a token of another issuer than expected (keys verify): %v", err)
	}
	parts := strings.Split(tok, ".")
	forged := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
	if _, err := v.Verify(ctx, forged); !errors.Is(err, identity.ErrAccessToken) {
		t.Fatalf("a token with another signature: %v", err)
	}
	for _, junk := range []string{"", "alk1.x.y", "a.b", strings.Repeat("a.", 5000) + "a"} {
		if _, err := v.Verify(ctx, junk); !errors.Is(err, identity.ErrAccessToken) {
			t.Fatalf("Verify(%.20q) = %v", junk, err)
		}
	}
}

func parse(t *testing.T, f approvers.File) *approvers.Set {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	set, err := approvers.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}
