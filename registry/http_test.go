package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// httpDoc is a registry with one HTTP capability: block is its http object, dest its
// destination.
func httpDoc(method, block, dest string) []byte {
	return []byte(fmt.Sprintf(`{"schema/v":"capability-registry.v1","revision":"h","entries":[
 {"capability/id":"tickets.create","version":1,"owner":"t","surfaces":["host-local"],"wire/name":"app/tickets.create","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":"create_ticket","description":"Create a ticket.","side-effect":"external-write","network":"external","per-turn/cap":2,"timeout":"5s","model-visible":true,
   "destination":%s,"http":{"method":%q,%s}}}]}`, dest, method, block))
}

const ticketArgs = `"arguments":{"type":"object","additionalProperties":false,"required":["project","title"],"properties":{"project":{"type":"string"},"title":{"type":"string"}}}`

// Every HTTP rule refuses its broken declaration with a message naming the problem; the
// complete declaration loads, bound by its own argument schema.
func TestHTTPDeclarationRules(t *testing.T) {
	goodDest := `{"kind":"host","name":"tickets.example.com","fields":["project","title"]}`
	good := `"url":"https://tickets.example.com/api","path":"/projects/{project}/tickets","body":["title"],` + ticketArgs
	cases := []struct{ name, method, block, dest, want string }{
		{"unknown method", "TRACE", good, goodDest, `at /entries/0/airlock/http/method`},
		{"relative url", "POST", strings.Replace(good, "https://tickets.example.com/api", "/api", 1), goodDest, "is not http or https"},
		{"no host", "POST", strings.Replace(good, "https://tickets.example.com/api", "https:///api", 1), goodDest, "has no host"},
		{"user info", "POST", strings.Replace(good, "https://", "https://u:p@", 1), goodDest, "user info"},
		{"query in url", "POST", strings.Replace(good, "/api", "/api?x=1", 1), goodDest, "query or fragment"},
		{"host in compatibility form", "POST", strings.Replace(good, "tickets.example.com", "ｔickets.example.com", 1), goodDest, `is contacted as "tickets.example.com"`},
		{"slot not declared", "POST", strings.Replace(good, "{project}", "{team}", 1), goodDest, `path uses "team"`},
		{"argument never sent", "POST", strings.Replace(good, `"body":["title"]`, `"body":[]`, 1), `{"kind":"host","name":"tickets.example.com","fields":["project"]}`, `"title" is declared but never sent`},
		{"argument sent twice", "POST", strings.Replace(good, `"body":["title"]`, `"body":["title","project"]`, 1), goodDest, `sent twice`},
		{"body on GET", "GET", good, goodDest, "carries no body"},
		{"open schema", "POST", strings.Replace(good, `"additionalProperties":false,`, ``, 1), goodDest, "every argument is declared"},
		{"reserved header", "POST", good + `,"headers":[{"name":"Host","secret":"x"}]`, goodDest, "set by Airlock"},
		{"destination elsewhere", "POST", good, `{"kind":"host","name":"evil.example","fields":["project","title"]}`, `is not the url's host`},
		{"destination hides a field", "POST", good, `{"kind":"host","name":"tickets.example.com","fields":["project"]}`, "are not the arguments sent"},
		{"destination not a host", "POST", good, `{"kind":"system","name":"tickets","fields":["project","title"]}`, "is kind host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]Source{{Name: "h", Data: httpDoc(tc.method, tc.block, tc.dest)}, emptyPolicy}, nil)
			var le *LoadError
			if !errors.As(err, &le) || le.Rules()[0] != RuleHTTP || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want [http] mentioning %q, got %v", tc.want, err)
			}
		})
	}
	doc := httpDoc("POST", good, goodDest)
	var h struct {
		Entries []Entry `json:"entries"`
	}
	_ = json.Unmarshal(doc, &h)
	hb := h.Entries[0].Airlock.HTTP
	impl := Implementation{ID: "tickets.create", Version: 1, Schema: hb.ArgumentSchema(), Invoke: okInvoke}
	if _, err := Load(WithStructuralPolicy(Source{Name: "h", Data: doc}), []Implementation{impl}); err != nil {
		t.Fatalf("a complete declaration must load: %v", err)
	}
	impl.Schema = json.RawMessage(`{"type":"object"}`)
	if _, err := Load(WithStructuralPolicy(Source{Name: "h", Data: doc}), []Implementation{impl}); err == nil || !strings.Contains(err.Error(), "served from its declaration") {
		t.Fatalf("code bound with another schema must be refused: %v", err)
	}
	if got := hb.Slots(); len(got) != 1 || got[0] != "project" {
		t.Errorf("slots %v", got)
	}
}
