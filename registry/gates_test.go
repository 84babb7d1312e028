package registry

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Formats are asserted at stage 2, not annotations: each of email, date-time, date, uri,
// ipv4, ipv6 and uuid accepts a valid value and refuses an invalid one.
func TestArgumentFormatsAreAsserted(t *testing.T) {
	schema := `{"type":"object","additionalProperties":false,"properties":{
	  "email":{"type":"string","format":"email"},"date-time":{"type":"string","format":"date-time"},
	  "date":{"type":"string","format":"date"},"uri":{"type":"string","format":"uri"},
	  "ipv4":{"type":"string","format":"ipv4"},"ipv6":{"type":"string","format":"ipv6"},
	  "uuid":{"type":"string","format":"uuid"}}}`
	doc := strings.Replace(string(Embedded), `"tool/name": "web_fetch"`, `"tool/name": "web_fetch", "schema/ref": "test:formats"`, 1)
	doc = strings.Replace(doc, `"fields": ["url"]`, `"fields": ["uri"]`, 1)
	r, err := Load([]Source{{"formats", []byte(doc)}, BasePolicy()}, []Implementation{
		baseImpls()[0], {ID: "web.fetch", Version: 1, Schema: json.RawMessage(schema), Invoke: okInvoke}, baseImpls()[2], baseImpls()[3]})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.ByToolName("web_fetch")
	cases := []struct{ field, good, bad string }{
		{"email", "ops@example.org", "not an email"},
		{"date-time", "2026-12-01T10:00:00Z", "2026-12-01 10:00"},
		{"date", "2026-12-01", "01/12/2026"},
		{"uri", "https://example.org/a?b=c", "example.org/no-scheme"},
		{"ipv4", "192.0.2.7", "192.0.2.300"},
		{"ipv6", "2001:db8::1", "2001:db8:::1"},
		{"uuid", "0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165"},
	}
	for _, tc := range cases {
		good, _ := json.Marshal(map[string]string{tc.field: tc.good})
		if _, err := c.ValidateArguments(good); err != nil {
			t.Errorf("%s %q refused: %v", tc.field, tc.good, err)
		}
		bad, _ := json.Marshal(map[string]string{tc.field: tc.bad})
		var ae *ArgumentError
		if _, err := c.ValidateArguments(bad); !errors.As(err, &ae) || ae.Code != "schema_mismatch" {
			t.Errorf("%s %q accepted (format must be asserted): %v", tc.field, tc.bad, err)
		}
	}
}

// A schema using a keyword the validator would not enforce is refused at load, naming the
// keyword and where it is.
func TestArgumentSchemasWithUnenforcedKeywordsAreRefused(t *testing.T) {
	doc := strings.Replace(string(Embedded), `"tool/name": "web_fetch"`, `"tool/name": "web_fetch", "schema/ref": "test:x"`, 1)
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"b":{"type":"string","contentMediaType":"text/html"}}}`, `/properties/b/contentMediaType: keyword "contentMediaType"`},
		{`{"type":"object","x-max-amount":100}`, `keyword "x-max-amount"`},
		{`{"type":"object","properties":{"c":{"type":"string","format":"color"}}}`, `format "color" is not asserted`},
		{`{"type":"object","properties":{"c":{"$ref":"https://example.org/s.json"}}}`, `leaves the document`},
		{`{"type":"object","properties":{"c":{"type":"string","readOnly":true}}}`, `keyword "readOnly"`},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`, `not JSON Schema 2020-12`},
		{`{"type":"object","anyOf":[{"required":["a"]},{"minProperties":2,"dependencies":{}}]}`, `/anyOf/1/dependencies`},
	} {
		_, err := Load([]Source{{"x", []byte(doc)}, BasePolicy()}, []Implementation{
			baseImpls()[0], {ID: "web.fetch", Version: 1, Schema: json.RawMessage(tc.schema), Invoke: okInvoke}})
		if err == nil || !strings.Contains(err.Error(), "[argument-schema]") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an argument-schema refusal mentioning %q, got %v", tc.schema, tc.want, err)
		}
	}
}

func deprecatedRegistry(t *testing.T, status, deadline string) *Registry {
	t.Helper()
	repl := `"status": "` + status + `"`
	if deadline != "" {
		repl += `, "removal/deadline": "` + deadline + `"`
	}
	doc := strings.Replace(string(Embedded), `"status": "active"`, repl, 2) // system.health and web.fetch
	r, err := Load([]Source{{"dep", []byte(doc)}, BasePolicy()}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Deprecated entries are admitted with a warning strictly before removal/deadline, and refused
// from it on, in the catalog and at resolve alike; reserved entries are refused at every gate.
func TestStatusRulesAtTheAdmissionGate(t *testing.T) {
	dl := "2026-12-01T12:00:00Z"
	r := deprecatedRegistry(t, "deprecated", dl)
	c, _ := r.ByToolName("web_fetch")
	before, at := fixedNow.Add(-time.Second), fixedNow
	if el := r.Eligible(c, UseResolve, before); !el.Admitted() || !strings.Contains(el.Warning, dl) {
		t.Fatalf("before the deadline: %+v", el)
	}
	if len(r.Catalog(nil, before)) != 4 {
		t.Fatal("deprecated entries stay in the catalog until their deadline")
	}
	if el := r.Eligible(c, UseResolve, at); el.Code != RefusalPastDeadline {
		t.Fatalf("at the deadline: %+v", el)
	}
	if n := len(r.Catalog(nil, at)); n != 2 { // the two catalog capabilities stay active
		t.Fatalf("catalog past the deadline has %d entries", n)
	}
	res := deprecatedRegistry(t, "reserved", "")
	c, _ = res.ByToolName("web_fetch")
	if el := res.Eligible(c, UseResolve, before); el.Code != RefusalReserved {
		t.Fatalf("reserved: %+v", el)
	}
	if len(res.Catalog(nil, before)) != 2 { // only the two catalog capabilities, still active
		t.Fatal("reserved entries are never in the catalog")
	}
}

// The three gates are distinct: a document can pass the shape gate and still not register a
// name; a registered, eligible capability can still be refused by policy.
func TestThreeGatesAreDistinct(t *testing.T) {
	// Shape valid, not registered: the schema gate passes, the admission gate refuses the name.
	r, err := Load([]Source{Base(), BasePolicy()}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.ByToolName("shell_run"); ok {
		t.Fatal("an unregistered name resolved")
	}
	// Registered and eligible, but no policy entry: denied at the policy gate.
	pol := `{"schema/v":"capability-authorization-policy.v1","revision":"p","grants":["host.observe","web.read"],
	  "principals":[{"principal":"ops","grants":["host.observe","web.read"]},{"principal":"*","grants":["host.observe"]}],
	  "capabilities":[{"capability/id":"system.health","version":1,"grants/required":["host.observe"],"autonomy":"confirm","approval/distinct-approver":true}]}`
	r, err = Load([]Source{Base(), {"p", []byte(pol)}}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	fetch, _ := r.ByToolName("web_fetch")
	if el := r.Eligible(fetch, UseResolve, fixedNow); !el.Admitted() {
		t.Fatalf("web.fetch is registered and eligible: %+v", el)
	}
	if a := r.Authorize(fetch, "ops"); a.Code != PolicyNoEntry {
		t.Fatalf("no policy entry must deny: %+v", a)
	}
	health, _ := r.ByToolName("system_health")
	if a := r.Authorize(health, "ops"); a.Code != "" || a.Automatic || !a.DistinctApprover {
		t.Fatalf("policy confirm overrides the structural automatic; four-eyes from the policy: %+v", a)
	}
	if a := r.Authorize(health, "guest"); a.Code != "" {
		t.Fatalf("'*' covers undeclared principals: %+v", a)
	}
	strict := strings.Replace(pol, `,{"principal":"*","grants":["host.observe"]}`, ``, 1)
	r, err = Load([]Source{Base(), {"p", []byte(strict)}}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	health, _ = r.ByToolName("system_health")
	if a := r.Authorize(health, "guest"); a.Code != PolicyUnknownPrincipal {
		t.Fatalf("unknown principal: %+v", a)
	}
	ungranted := strings.Replace(strict, `{"principal":"ops","grants":["host.observe","web.read"]}`, `{"principal":"ops","grants":["web.read"]}`, 1)
	r, err = Load([]Source{Base(), {"p", []byte(ungranted)}}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	health, _ = r.ByToolName("system_health")
	if a := r.Authorize(health, "ops"); a.Code != PolicyUngranted || !strings.Contains(a.Detail, "host.observe") {
		t.Fatalf("ungranted: %+v", a)
	}
	denied := strings.Replace(pol, `"autonomy":"confirm"`, `"autonomy":"deny"`, 1)
	r, err = Load([]Source{Base(), {"p", []byte(denied)}}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	health, _ = r.ByToolName("system_health")
	if a := r.Authorize(health, "ops"); a.Code != PolicyDenied {
		t.Fatalf("deny: %+v", a)
	}
}

// A capability's fingerprint changes with its entry or its policy, not with another entry or
// a revision label: an approval is void only when what it approved changed.
func TestFingerprintFollowsEntryAndPolicy(t *testing.T) {
	load := func(reg, pol string) *Registry {
		r, err := Load([]Source{{"r", []byte(reg)}, {"p", []byte(pol)}}, baseImpls())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base, pol := string(Embedded), string(EmbeddedPolicy)
	r0 := load(base, pol)
	fp := func(r *Registry, k string) string { return r.CapabilityRevision(k) }
	relabeled := load(strings.Replace(base, `"2026-12-02.2"`, `"2026-12-02.3"`, 1), pol)
	if fp(r0, "web.fetch@1") != fp(relabeled, "web.fetch@1") || r0.Revision() == relabeled.Revision() {
		t.Fatal("a revision label alone must change the registry revision, not the capability's fingerprint")
	}
	otherEntry := load(strings.Replace(base, `"per-turn/cap": 3`, `"per-turn/cap": 4`, 1), pol)
	if fp(r0, "web.fetch@1") != fp(otherEntry, "web.fetch@1") || fp(r0, "system.health@1") == fp(otherEntry, "system.health@1") {
		t.Fatal("an edit of system.health changes its fingerprint only")
	}
	policy := load(base, strings.Replace(pol, `"autonomy": "confirm",
      "approval/distinct-approver": false`, `"autonomy": "confirm",
      "approval/distinct-approver": true`, 1))
	if fp(r0, "web.fetch@1") == fp(policy, "web.fetch@1") {
		t.Fatal("a policy change of web.fetch changes its fingerprint")
	}
}
