// Package oidctest runs a real OpenID Provider for tests: zitadel/oidc's op package (used in
// production by ZITADEL) with its example storage and login UI, served in-process over HTTP
// (issue 33, item 6). Nothing here mints a token: the provider signs every token with its own
// key and publishes it in its JWKS. The wrapper adds what a company directory adds: a "groups"
// claim the test changes while the provider runs, users it can remove, and JWT access tokens.
package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// Provider is one running OpenID Provider.
type Provider struct {
	// Issuer is its issuer URL (http on loopback).
	Issuer string
	store  *groupStorage
}

// SetGroups sets the groups the provider lists for a user from now on (user ids: "u-alice",
// "u-bob", "u-carol").
func (p *Provider) SetGroups(userID string, groups ...string) { p.store.setGroups(userID, groups...) }

// RemoveUser deletes a user from the provider's directory: its refresh tokens stop working.
func (p *Provider) RemoveUser(userID string) {
	p.store.users.mu.Lock()
	defer p.store.users.mu.Unlock()
	delete(p.store.users.m, userID)
}

// Password is every test user's password.
const Password = "verysecure"

// newUsers is the test directory: alice, bob and carol.
func newUsers() map[string]*storage.User {
	return map[string]*storage.User{
		"u-alice": {ID: "u-alice", Username: "alice", Password: "verysecure", FirstName: "Alice", LastName: "A", Email: "alice@corp.example", EmailVerified: true, PreferredLanguage: language.English},
		"u-bob":   {ID: "u-bob", Username: "bob", Password: "verysecure", FirstName: "Bob", LastName: "B", Email: "bob@corp.example", EmailVerified: true, PreferredLanguage: language.English},
		"u-carol": {ID: "u-carol", Username: "carol", Password: "verysecure", FirstName: "Carol", LastName: "C", Email: "carol@corp.example", EmailVerified: true, PreferredLanguage: language.English},
	}
}

type userStore struct {
	mu sync.Mutex
	m  map[string]*storage.User
}

func (u *userStore) GetUserByID(id string) *storage.User {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.m[id]
}

func (u *userStore) GetUserByUsername(name string) *storage.User {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, x := range u.m {
		if x.Username == name {
			return x
		}
	}
	return nil
}

func (*userStore) ExampleClientID() string { return storage.ServiceUserID }

// groupStorage is the example storage with a directory's group memberships in every ID token,
// userinfo answer and JWT access token.
type groupStorage struct {
	*storage.Storage
	users  *userStore
	mu     sync.Mutex
	key    *rotKey             // after RotateKey
	groups map[string][]string // user id -> groups
}

func (s *groupStorage) setGroups(userID string, groups ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[userID] = groups
}

func (s *groupStorage) groupsOf(userID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.groups[userID])
}

func (s *groupStorage) SetUserinfoFromRequest(ctx context.Context, ui *zoidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, token, scopes); err != nil {
		return err
	}
	ui.AppendClaims("groups", s.groupsOf(token.GetSubject()))
	return nil
}

func (s *groupStorage) SetUserinfoFromToken(ctx context.Context, ui *zoidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	ui.AppendClaims("groups", s.groupsOf(ui.Subject))
	return nil
}

func (s *groupStorage) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if claims == nil {
		claims = map[string]any{}
	}
	if u := s.users.GetUserByID(userID); u != nil {
		claims["preferred_username"] = u.Username
	}
	return claims, err
}

func (s *groupStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

// RotateKey replaces the provider's signing key with a fresh RSA key: tokens are signed with
// it from now on, and its JWKS lists only it (a relying party that cached the old key set must
// fetch the new one to verify them).
func (p *Provider) RotateKey(t testing.TB) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.key = &rotKey{id: fmt.Sprintf("rotated-%d", time.Now().UnixNano()), key: k}
}

// rotKey is a signing key the test put in place (RotateKey).
type rotKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *rotKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *rotKey) Key() any                                    { return k.key }
func (k *rotKey) ID() string                                  { return k.id }

type rotPublic struct{ *rotKey }

func (k rotPublic) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k rotPublic) Use() string                        { return "sig" }
func (k rotPublic) Key() any                           { return &k.key.PublicKey }

func (s *groupStorage) rotated() *rotKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

func (s *groupStorage) SigningKey(ctx context.Context) (op.SigningKey, error) {
	if k := s.rotated(); k != nil {
		return k, nil
	}
	return s.Storage.SigningKey(ctx)
}

func (s *groupStorage) KeySet(ctx context.Context) ([]op.Key, error) {
	if k := s.rotated(); k != nil {
		return []op.Key{rotPublic{k}}, nil
	}
	return s.Storage.KeySet(ctx)
}

// jwtClient issues JWT access tokens and puts the profile claims in the ID token.
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (jwtClient) IDTokenUserinfoClaimsAssertion() bool { return true }

var zitadelSetup sync.Mutex // exampleop.SetupServer sets process-wide defaults

// Start runs a provider on a loopback port, until the test ends, with web clients (id,
// secret "secret-"+id) allowed to redirect to redirects.
func Start(t testing.TB, clientIDs []string, redirects ...string) *Provider {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + l.Addr().String()
	clients := map[string]*storage.Client{}
	for _, id := range clientIDs {
		clients[id] = storage.WebClient(id, "secret-"+id, redirects...)
	}
	users := &userStore{m: newUsers()}
	st := &groupStorage{Storage: storage.NewStorageWithClients(users, clients), users: users, groups: map[string][]string{}}
	zitadelSetup.Lock()
	router := exampleop.SetupServer(issuer, st, slog.New(slog.NewTextHandler(io.Discard, nil)), false)
	zitadelSetup.Unlock()
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: router}}
	srv.Start()
	t.Cleanup(srv.Close)
	return &Provider{Issuer: issuer, store: st}
}

// Browser is a cookie-keeping HTTP client (a user agent following redirects).
func Browser(t testing.TB) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

// SignInAt drives the provider's login UI from start (a URL that redirects to the provider's
// authorization endpoint) as username, following every redirect, and returns the last
// response (the relying party's answer to the provider's redirect).
func SignInAt(t testing.TB, b *http.Client, start, username string) *http.Response {
	t.Helper()
	resp, err := b.Get(start)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	login := resp.Request.URL
	id := login.Query().Get("authRequestID")
	if !strings.HasSuffix(login.Path, "/login/username") || id == "" {
		t.Fatalf("the provider did not show its login page: %s (%d)", login, resp.StatusCode)
	}
	resp, err = b.PostForm(login.Scheme+"://"+login.Host+"/login/username", url.Values{"id": {id}, "username": {username}, "password": {Password}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
