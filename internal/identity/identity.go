// Package identity is who a person is, from the company's identity provider (issue 33): OIDC
// sign-in for the approver page, the verification of the provider's access tokens that
// requesters present, and the resolution of both to one person.
//
// Sign-in (RP) is the authorization code flow with PKCE (S256) on github.com/coreos/go-oidc
// and golang.org/x/oauth2: Begin sends the browser to the provider with a fresh state, nonce
// and code verifier, remembered for PendingTTL and bound to the browser by a cookie; Finish
// accepts the provider's redirect only for that state (once), from that browser, exchanges
// the code with the verifier, verifies the ID token against the provider's keys (fetched from
// its JWKS and re-fetched when a token names an unknown key, so key rotation is followed),
// checks the nonce, and returns the Identity the token states. Recheck asks the provider again
// (refresh token grant, a fresh ID token verified the same way), so a person removed from a
// group loses it at the next check.
//
// Approvers and their groups come from configurable claims (NameClaim, SubjectClaim,
// GroupsClaim); provider group names map to the policy's approver groups (GroupMap), and a
// provider group that is not mapped grants nothing. The person is Issuer#Subject, never the
// name: Resolve refuses a name that the approvers file gives to another person, so file
// approvers and provider accounts run side by side without one name meaning two people.
package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/airlock-dev/airlock/internal/approvers"
)

// Config is one identity provider as a deployment configures it (docs/security.md, "One
// person: identity provider sign-in", gives Okta's and Entra ID's values).
type Config struct {
	// Issuer is the provider's issuer URL, exactly as its discovery document and tokens state
	// it (Okta: https://ORG.okta.com/oauth2/default; Entra ID:
	// https://login.microsoftonline.com/TENANT/v2.0).
	Issuer string
	// ClientID and ClientSecret are the approver page's registration at the provider (a
	// confidential web client; PKCE is used as well).
	ClientID     string
	ClientSecret string
	// RedirectURL is the page's callback, registered at the provider
	// (https://approve.example.com/oidc/callback).
	RedirectURL string
	// Scopes asked for besides "openid" (default: profile, email; Okta needs "groups" for its
	// groups claim).
	Scopes []string
	// SubjectClaim names the stable person id (default "sub"; Entra ID: "oid", the object id
	// the directory keeps for the user across applications).
	SubjectClaim string
	// NameClaim names the claim used as approver name (default "preferred_username"; it must
	// match approvers.NamePattern after GroupMap-independent checks, else sign-in is refused).
	NameClaim string
	// GroupsClaim names the claim listing the person's groups (default "groups"; Entra ID
	// lists group object ids there unless configured to emit names).
	GroupsClaim string
	// GroupMap maps a provider group (name or id, as the claim lists it) to a policy approver
	// group ("approval/groups"); unmapped provider groups grant nothing.
	GroupMap map[string]string
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// HTTPClient reaches the provider (default http.DefaultClient).
	HTTPClient *http.Client
}

// Errors callers branch on.
var (
	// ErrState: the redirect's state is unknown, used, expired or from another browser.
	ErrState = errors.New("identity: sign-in state unknown, used, expired or from another browser")
	// ErrToken: the provider's token does not verify (signature, issuer, audience, expiry,
	// nonce) or lacks a required claim.
	ErrToken = errors.New("identity: the provider's token does not verify")
	// ErrName: the token's name claim is not a usable approver name.
	ErrName = errors.New("identity: the token's name claim is not a usable approver name")
	// ErrTwoPeople: the name belongs to another person in the approvers file.
	ErrTwoPeople = errors.New("identity: the name belongs to another person")
	// ErrNoRefresh: Recheck of an identity without a refresh token.
	ErrNoRefresh = errors.New("identity: the provider gave no refresh token; sign in again")
)

// Identity is what a verified ID token states about a person.
type Identity struct {
	// Issuer and Subject identify the person (Person).
	Issuer  string
	Subject string
	// Name is the NameClaim value (the approver name shown and audited).
	Name string
	// Groups are the policy approver groups the provider groups map to (sorted, unique).
	Groups []string
	// ProviderGroups are the groups the token listed, as listed (for the audit and doctor).
	ProviderGroups []string
	// Expiry is the ID token's expiry: a session bound to it ends then unless rechecked.
	Expiry time.Time
	// IDTokenHash identifies the ID token the session is bound to (SHA-256, base64url).
	IDTokenHash string
	// KeyID is the provider key ("kid") that signed the ID token, for the audit.
	KeyID string
	// RefreshToken lets Recheck ask the provider again ("" when none was issued). Secret:
	// kept server-side only.
	RefreshToken string `json:"-"`
}

// Person is the identity's person key, "<issuer>#<subject>" (approvers.Approver.Subject).
func (id Identity) Person() string { return id.Issuer + "#" + id.Subject }

// PendingTTL bounds how long a started sign-in may take.
const PendingTTL = 10 * time.Minute

// maxPending bounds the started sign-ins remembered at once (oldest dropped first).
const maxPending = 4096

// BindingCookie is the cookie that binds a started sign-in to its browser.
const BindingCookie = "airlock_oidc"

// RP is the approver page's relying party at one provider. Safe for concurrent use.
type RP struct {
	cfg      Config
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	ctx      context.Context // carries the HTTP client for the provider

	mu      sync.Mutex
	pending map[string]pending // by state
}

type pending struct {
	binding  string // SHA-256 of the cookie value, base64url
	verifier string // PKCE code verifier
	nonce    string
	returnTo string
	expires  time.Time
}

// New discovers the provider at cfg.Issuer (its /.well-known/openid-configuration, whose
// issuer must equal cfg.Issuer) and returns the RP. Errors: discovery failed, or a required
// setting is missing.
func New(ctx context.Context, cfg Config) (*RP, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("identity: an OIDC provider needs an issuer, a client id and a redirect URL")
	}
	cfg = withDefaults(cfg)
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), cfg.HTTPClient)
	p, err := oidc.NewProvider(pctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("identity: discover %s: %w", cfg.Issuer, err)
	}
	scopes := append([]string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess}, cfg.Scopes...)
	return &RP{cfg: cfg, ctx: pctx, pending: map[string]pending{},
		oauth:    oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL, Endpoint: p.Endpoint(), Scopes: scopes},
		verifier: p.VerifierContext(pctx, &oidc.Config{ClientID: cfg.ClientID, Now: cfg.Now}),
	}, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Scopes == nil {
		cfg.Scopes = []string{oidc.ScopeProfile, "email"}
	}
	if cfg.SubjectClaim == "" {
		cfg.SubjectClaim = "sub"
	}
	if cfg.NameClaim == "" {
		cfg.NameClaim = "preferred_username"
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	return cfg
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Begin starts a sign-in: it remembers a fresh state, nonce and PKCE verifier, sets the
// binding cookie (HttpOnly, SameSite=Lax: the provider's redirect is a top-level GET) and
// redirects the browser to the provider. returnTo is where Finish's caller sends the browser
// afterwards (a path on the page; the caller checks it).
func (r *RP) Begin(w http.ResponseWriter, req *http.Request, returnTo string) {
	state, nonce, verifier, binding := random(), random(), oauth2.GenerateVerifier(), random()
	now := r.cfg.Now()
	r.mu.Lock()
	for s, p := range r.pending {
		if now.After(p.expires) {
			delete(r.pending, s)
		}
	}
	if len(r.pending) >= maxPending {
		var oldest string
		for s, p := range r.pending {
			if oldest == "" || p.expires.Before(r.pending[oldest].expires) {
				oldest = s
			}
		}
		delete(r.pending, oldest)
	}
	r.pending[state] = pending{binding: digest(binding), verifier: verifier, nonce: nonce, returnTo: returnTo, expires: now.Add(PendingTTL)}
	r.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: BindingCookie, Value: binding, Path: "/", HttpOnly: true, Secure: req.TLS != nil,
		SameSite: http.SameSiteLaxMode, MaxAge: int(PendingTTL / time.Second)})
	http.Redirect(w, req, r.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), http.StatusFound)
}

// Finish completes a sign-in from the provider's redirect: the state must be one Begin
// remembered for this browser (its binding cookie), unexpired and unused (it is used up now,
// whatever follows); the code is exchanged with the PKCE verifier; the ID token must verify
// (signature under the provider's keys, issuer, audience, expiry) and carry the nonce.
// It returns the Identity and where to send the browser. Errors: ErrState, ErrToken (wrapped
// with why), ErrName, or the provider's error response.
func (r *RP) Finish(req *http.Request) (Identity, string, error) {
	q := req.URL.Query()
	state := q.Get("state")
	r.mu.Lock()
	p, ok := r.pending[state]
	delete(r.pending, state) // single use, whatever follows
	r.mu.Unlock()
	c, cerr := req.Cookie(BindingCookie)
	switch {
	case !ok || state == "":
		return Identity{}, "", ErrState
	case cerr != nil || subtle.ConstantTimeCompare([]byte(digest(c.Value)), []byte(p.binding)) != 1:
		return Identity{}, "", fmt.Errorf("%w: the sign-in was started in another browser", ErrState)
	case r.cfg.Now().After(p.expires):
		return Identity{}, "", fmt.Errorf("%w: it expired", ErrState)
	}
	if e := q.Get("error"); e != "" {
		return Identity{}, "", fmt.Errorf("identity: the provider refused the sign-in: %.100q", e)
	}
	tok, err := r.oauth.Exchange(r.ctx, q.Get("code"), oauth2.VerifierOption(p.verifier))
	if err != nil {
		return Identity{}, "", fmt.Errorf("%w: code exchange: %w", ErrToken, err)
	}
	id, err := r.identityFrom(tok, p.nonce)
	return id, p.returnTo, err
}

// identityFrom verifies tok's ID token (and its nonce, when nonce is set) and reads the claims.
func (r *RP) identityFrom(tok *oauth2.Token, nonce string) (Identity, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, fmt.Errorf("%w: the provider returned no ID token", ErrToken)
	}
	idt, err := r.verifier.Verify(r.ctx, raw)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrToken, err)
	}
	if nonce != "" && subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return Identity{}, fmt.Errorf("%w: the ID token's nonce is not this sign-in's (a replayed token)", ErrToken)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("%w: claims: %w", ErrToken, err)
	}
	id, err := claimsIdentity(r.cfg, idt.Issuer, claims)
	if err != nil {
		return Identity{}, err
	}
	id.Expiry, id.IDTokenHash, id.RefreshToken, id.KeyID = idt.Expiry, digest(raw), tok.RefreshToken, keyID(raw)
	return id, nil
}

// claimsIdentity reads the configured claims of a verified token.
func claimsIdentity(cfg Config, issuer string, claims map[string]any) (Identity, error) {
	sub, _ := claims[cfg.SubjectClaim].(string)
	if sub == "" || len(sub) > 255 {
		return Identity{}, fmt.Errorf("%w: no usable %q claim", ErrToken, cfg.SubjectClaim)
	}
	name, _ := claims[cfg.NameClaim].(string)
	if !approvers.NamePattern.MatchString(name) {
		return Identity{}, fmt.Errorf("%w: %q claim %.80q does not match %s", ErrName, cfg.NameClaim, name, approvers.NamePattern)
	}
	id := Identity{Issuer: issuer, Subject: sub, Name: name}
	if list, ok := claims[cfg.GroupsClaim].([]any); ok {
		for _, g := range list {
			s, ok := g.(string)
			if !ok {
				continue
			}
			id.ProviderGroups = append(id.ProviderGroups, s)
			if mapped, ok := cfg.GroupMap[s]; ok && !slices.Contains(id.Groups, mapped) {
				id.Groups = append(id.Groups, mapped)
			}
		}
	}
	slices.Sort(id.Groups)
	return id, nil
}

// Recheck asks the provider again about id's person (refresh token grant; the new ID token is
// verified as at sign-in, without a nonce, which refreshed tokens do not carry) and returns
// what it states now: a person removed from a group at the provider has lost it. The person
// must be the same (issuer and subject). Errors: ErrNoRefresh, ErrToken, or the provider's
// refusal (a disabled account, a revoked grant): the session ends.
func (r *RP) Recheck(ctx context.Context, id Identity) (Identity, error) {
	if id.RefreshToken == "" {
		return Identity{}, ErrNoRefresh
	}
	src := r.oauth.TokenSource(oidc.ClientContext(ctx, r.cfg.HTTPClient), &oauth2.Token{RefreshToken: id.RefreshToken, Expiry: time.Unix(1, 0)})
	tok, err := src.Token()
	if err != nil {
		return Identity{}, fmt.Errorf("identity: the provider refused to refresh: %w", err)
	}
	now, err := r.identityFrom(tok, "")
	if err != nil {
		return Identity{}, err
	}
	if now.Person() != id.Person() {
		return Identity{}, fmt.Errorf("%w: the refreshed token names another person", ErrToken)
	}
	if now.RefreshToken == "" {
		now.RefreshToken = id.RefreshToken
	}
	return now, nil
}

// Resolve is the approver a provider identity signs in as, under the approvers file set (nil:
// none): the approver bound to its person (approvers.Approver.Subject) keeps its name (a
// file approver's groups joined with the provider's; the page's own earlier record of the
// person replaced by the provider's groups now); otherwise the identity's Name, refused (ErrTwoPeople) when the file gives that name,
// or lists it as a principal of, another person (one name never means two people). Groups
// are the identity's (from the provider, mapped), joined with a bound file approver's.
func Resolve(set *approvers.Set, id Identity) (name string, groups []string, err error) {
	if set != nil {
		if n, ok := set.BySubject(id.Person()); ok {
			if set.ProviderAccount(n) {
				// The page's own record of this person: the provider's groups now replace it.
				return n, slices.Clone(id.Groups), nil
			}
			g := append(set.GroupsOf(n), id.Groups...)
			slices.Sort(g)
			return n, slices.Compact(g), nil
		}
		if set.PersonOf(id.Name) != strings.ToLower(id.Name) {
			return "", nil, fmt.Errorf("%w: %q is in the approvers file without oidc_subject %q", ErrTwoPeople, id.Name, id.Person())
		}
	}
	return id.Name, slices.Clone(id.Groups), nil
}

// keyID is the "kid" of a verified compact JWS's header ("" when it names none).
func keyID(raw string) string {
	head, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if json.Unmarshal(b, &h) != nil {
		return ""
	}
	return h.Kid
}
