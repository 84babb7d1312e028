package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/identity"
	"github.com/airlock-dev/airlock/internal/identity/oidctest"
	"github.com/airlock-dev/airlock/internal/mcpserver"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
)

// `airlock mcp serve` as an OAuth 2.1 resource server (the MCP authorization specification),
// against a real OpenID Provider (zitadel/oidc's, in-process): its RFC 9728 metadata names the
// provider and every 401 points at it; an access token the provider issued for Airlock's
// audience is the caller (oidc:<user>), whose call the gateway attests and the worker runs; a
// token for another audience is refused before any MCP message is read.
func TestMCPServeAcceptsTheIdentityProvidersTokens(t *testing.T) {
	op, accessToken := startProvider(t, "airlock-mcp", "other-app")

	c := dial(t)
	cfg := testConfig(t)
	cfg.PolicyFile = gatewayPolicy(t)
	startWorker(t, c, cfg)
	reg, err := workers.LoadRegistry(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	access, err := identity.NewAccessVerifier(context.Background(), identity.AccessConfig{Issuer: op.Issuer, Audience: "airlock-mcp", PrincipalClaim: "preferred_username"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	srv := mcpserver.New(mcpserver.Options{Registry: func() *registry.Registry { return reg }, Temporal: c, TaskQueue: cfg.TaskQueue,
		Clients: clients.NewSource(itClients).Current, Gateway: itGateway, Access: access,
		Resource: hs.URL + "/mcp", AuthorizationServers: []string{op.Issuer}})
	mux.Handle("/mcp", srv.Handler())
	mux.Handle(mcpserver.MetadataPath+"/mcp", srv.MetadataHandler())

	// Discovery: a 401 names the metadata, which names the provider.
	resp, err := http.Post(hs.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+srv.MetadataURL()+`"`) {
		t.Fatalf("unauthenticated: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	resp, err = http.Get(srv.MetadataURL())
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	err = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if err != nil || meta.Resource != hs.URL+"/mcp" || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != op.Issuer {
		t.Fatalf("protected resource metadata = %+v, %v", meta, err)
	}

	connect := func(tok string) (*mcp.ClientSession, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return mcp.NewClient(&mcp.Implementation{Name: "idp-agent", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{tok}}}, nil)
	}
	if cs, err := connect(accessToken("other-app", "alice")); err == nil {
		cs.Close()
		t.Fatal("a token for another audience connected")
	}
	cs, err := connect(accessToken("airlock-mcp", "alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "system_health", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Meta[mcpserver.MetaOutcome] != "executed" {
		t.Fatalf("system_health as oidc:alice = %+v (%s)", res, textOf(res))
	}
	id, _ := res.Meta[mcpserver.MetaWorkflow].(string)
	rq, err := openStore(t, cfg).GetRequester(context.Background(), id, "")
	if err != nil || rq.Principal != "oidc:alice" || rq.Client != itGateway.Name {
		t.Fatalf("requester of %s = %+v, %v", id, rq, err)
	}
}

// startProvider runs a real OpenID Provider (zitadel/oidc's, in-process) with these OAuth
// clients registered, and returns it with a function that signs user in as client (the
// authorization code flow with PKCE, through the provider's login page) and returns the
// provider's JWT access token.
func startProvider(t *testing.T, clientIDs ...string) (*oidctest.Provider, func(client, user string) string) {
	t.Helper()
	catch := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(catch.Close)
	op := oidctest.Start(t, clientIDs, catch.URL+"/cb")
	return op, func(client, user string) string {
		t.Helper()
		ctx := context.Background()
		p, err := oidc.NewProvider(ctx, op.Issuer)
		if err != nil {
			t.Fatal(err)
		}
		conf := oauth2.Config{ClientID: client, ClientSecret: "secret-" + client, RedirectURL: catch.URL + "/cb", Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile"}}
		verifier := oauth2.GenerateVerifier()
		start := httptest.NewServer(http.RedirectHandler(conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), http.StatusFound))
		defer start.Close()
		resp := oidctest.SignInAt(t, oidctest.Browser(t), start.URL, user)
		resp.Body.Close()
		tok, err := conf.Exchange(ctx, resp.Request.URL.Query().Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
}
