package identity_test

import (
	"context"
	"errors"
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

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// A real OpenID Provider in the test: zitadel/oidc's op package (used in production by
// ZITADEL) with its example storage and login UI, served in-process over HTTP. Nothing here
// mints a token: the provider signs every token with its own key and publishes it in its JWKS.
// The wrapper adds what a company directory adds: a "groups" claim that the test changes while
// the provider runs, and JWT access tokens.

// provider is one running OpenID Provider.
type provider struct {
	Issuer string
	store  *groupStorage
}

// users of the test directory (password "verysecure" each).
var testUsers = map[string]*storage.User{
	"u-alice": {ID: "u-alice", Username: "alice", Password: "verysecure", FirstName: "Alice", LastName: "A", Email: "alice@corp.example", EmailVerified: true, PreferredLanguage: language.English},
	"u-bob":   {ID: "u-bob", Username: "bob", Password: "verysecure", FirstName: "Bob", LastName: "B", Email: "bob@corp.example", EmailVerified: true, PreferredLanguage: language.English},
	"u-carol": {ID: "u-carol", Username: "carol", Password: "verysecure", FirstName: "Carol", LastName: "C", Email: "carol@corp.example", EmailVerified: true, PreferredLanguage: language.English},
}

type userStore struct{}

func (userStore) GetUserByID(id string) *storage.User { return testUsers[id] }
func (userStore) GetUserByUsername(name string) *storage.User {
	for _, u := range testUsers {
		if u.Username == name {
			return u
		}
	}
	return nil
}
func (userStore) ExampleClientID() string { return storage.ServiceUserID }

// groupStorage is the example storage with a directory's group memberships in every ID token,
// userinfo answer and JWT access token.
type groupStorage struct {
	*storage.Storage
	mu     sync.Mutex
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
	claims["preferred_username"] = testUsers[userID].Username
	return claims, err
}

func (s *groupStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

// jwtClient issues JWT access tokens and puts the profile claims in the ID token.
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (jwtClient) IDTokenUserinfoClaimsAssertion() bool { return true }

var zitadelSetup sync.Mutex // exampleop.SetupServer sets process-wide defaults

// startProvider runs a provider on a loopback port with web clients (id, secret "secret-"+id)
// allowed to redirect to redirects.
func startProvider(t *testing.T, clientIDs []string, redirects ...string) *provider {
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
	st := &groupStorage{Storage: storage.NewStorageWithClients(userStore{}, clients), groups: map[string][]string{}}
	zitadelSetup.Lock()
	router := exampleop.SetupServer(issuer, st, slog.New(slog.NewTextHandler(io.Discard, nil)), false)
	zitadelSetup.Unlock()
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: router}}
	srv.Start()
	t.Cleanup(srv.Close)
	return &provider{Issuer: issuer, store: st}
}

// browser is a cookie-keeping HTTP client (a user agent following redirects).
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

// signInAt drives the provider's login UI from start (a URL that redirects to the provider's
// authorization endpoint) as username, following every redirect, and returns the last
// response (the relying party's answer to the provider's redirect).
func signInAt(t *testing.T, b *http.Client, start, username string) *http.Response {
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
	resp, err = b.PostForm(login.Scheme+"://"+login.Host+"/login/username", url.Values{"id": {id}, "username": {username}, "password": {"verysecure"}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

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

var _ = fmt.Sprintf
