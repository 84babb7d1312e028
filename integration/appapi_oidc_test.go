package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/appapi"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/identity"
	"github.com/airlock-dev/airlock/workers"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The application API accepts the identity provider's access tokens as requesters (issue 33,
// item 2), verified against a real OpenID Provider's keys: alice's token starts a turn as
// oidc:alice and reads it; bob's token, a token for another audience and another app's API key
// do not see it.
func TestAppAPIAcceptsTheIdentityProvidersTokens(t *testing.T) {
	op, accessToken := startProvider(t, "airlock-api", "other-app")
	a := newAPIStack(t, newFakeModel(t))
	// A starter whose registration speaks for the provider's principals.
	starter, err := clients.NewCredential(fmt.Sprintf("idp-app-%d", time.Now().UnixNano()%1000000))
	if err != nil {
		t.Fatal(err)
	}
	if err := clients.Add(itClients, clients.Client{Name: starter.Name, PublicKey: starter.Public(), Principals: []string{"oidc:*"}}); err != nil {
		t.Fatal(err)
	}
	access, err := identity.NewAccessVerifier(context.Background(), identity.AccessConfig{Issuer: op.Issuer, Audience: "airlock-api", PrincipalClaim: "preferred_username"})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t)
	cfg := testConfig(t)
	startWorker(t, c, cfg)
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, sum, err := appapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := appapi.NewKeys([]appapi.Caller{{Name: "idp-unused", Principal: "nobody", KeySHA256: sum}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := appapi.New(appapi.Options{Store: openStore(t, cfg), Temporal: c, TaskQueue: cfg.TaskQueue, Keys: keys, Starter: starter,
		ApproverKey: key, Access: access})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	doc, err := openapi3.NewLoader().LoadFromData(appapi.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: hs.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	idp := *a
	idp.url, idp.srv, idp.router = hs.URL, srv, router
	apiKeys["idp-alice"], apiKeys["idp-bob"] = accessToken("airlock-api", "alice"), accessToken("airlock-api", "bob")
	apiKeys["idp-other-audience"] = accessToken("other-app", "alice")

	if code, b, _ := idp.do("POST", "/v1/turns", "idp-other-audience", map[string]any{"message": "hi"}, map[string]string{"Idempotency-Key": "o-1"}); code != 401 {
		t.Fatalf("a token for another audience: %d %s", code, b)
	}
	code, b, _ := idp.do("POST", "/v1/turns", "idp-alice", map[string]any{"message": "hello"}, map[string]string{"Idempotency-Key": "i-1"})
	if code != 201 {
		t.Fatalf("start as oidc:alice: %d %s", code, b)
	}
	var turn appapi.Turn
	if err := json.Unmarshal(b, &turn); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/v1/conversations/%s/turns/%d", turn.Conversation, turn.Seq)
	if code, b, _ := idp.do("GET", path, "idp-alice", nil, nil); code != 200 {
		t.Fatalf("alice reads her turn: %d %s", code, b)
	}
	if code, _, _ := idp.do("GET", path, "idp-bob", nil, nil); code != 404 {
		t.Fatalf("bob reads alice's turn: %d", code)
	}
	// The worker records the proven requester when the turn's first step runs.
	st := openStore(t, cfg)
	eventually(t, 30*time.Second, "the turn's requester recorded as oidc:alice", func() bool {
		rq, err := st.GetRequester(context.Background(), turn.ID, "")
		return err == nil && rq.Principal == "oidc:alice" && rq.Client == starter.Name
	})
}
