package registry

import (
	"errors"
	"strings"
	"testing"
)

// Destination declarations are checked at load: each broken declaration is refused with its
// rule and a message naming what is wrong, and a valid one loads.
func TestDestinationDeclarationsAreChecked(t *testing.T) {
	const webFetch = `"destination": {"kind": "host", "name": "*", "fields": ["url"]}`
	cases := []struct {
		name, dest string
		rule       Rule
		want       string
	}{
		{"missing on an external capability", ``, RuleDestinationDeclared, "declares no destination"},
		{"kind none on an external one", `"destination": {"kind": "none"}`, RuleDestination, "only for side-effect none and network local"},
		{"unknown kind", `"destination": {"kind": "planet", "name": "x"}`, RuleDestination, `at /entries/1/airlock/destination/kind`},
		{"host in compatibility characters", `"destination": {"kind": "host", "name": "ａｐｉ．example.com"}`, RuleDestination, `is resolved as "api.example.com"`},
		{"host in upper case", `"destination": {"kind": "host", "name": "API.example.com"}`, RuleDestination, `is resolved as "api.example.com"`},
		{"non-ASCII host not in xn-- form", `"destination": {"kind": "host", "name": "bücher.example"}`, RuleDestination, `"xn--bcher-kva.example"`},
		{"any host without fields", `"destination": {"kind": "host", "name": "*"}`, RuleDestination, "needs the fields"},
		{"system without a name", `"destination": {"kind": "system"}`, RuleDestination, "needs a name"},
		{"server name with a hidden character", `"destination": {"kind": "server", "name": "tick\u200bets"}`, RuleDestination, "<U+200B>"},
		{"field the capability never receives", `"destination": {"kind": "host", "name": "*", "fields": ["url", "body"]}`, RuleDestinationFields, `"body" are not top-level arguments`},
		{"unknown key", `"destination": {"kind": "host", "name": "*", "fields": ["url"], "port": 1}`, RuleStrictShape, "port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repl := ""
			if tc.dest != "" {
				repl = tc.dest + ",\n        "
			}
			doc := strings.Replace(string(Embedded), webFetch+",\n        ", repl, 1)
			if doc == string(Embedded) {
				t.Fatal("fixture edit did not apply")
			}
			_, err := Load([]Source{{Name: "dest", Data: []byte(doc)}, BasePolicy()}, baseImpls())
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("want a *LoadError, got %v", err)
			}
			// A shape failure leaves the document unread, so the policy's references to its
			// entries fail too; every other case has its rule alone.
			got := le.Rules()
			if got[0] != tc.rule || (tc.rule != RuleStrictShape && len(got) != 1) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %s mentioning %q, got %v:\n%v", tc.rule, tc.want, got, err)
			}
		})
	}
	r, err := Load([]Source{Base(), BasePolicy()}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.ByKey("web.fetch@1")
	if d := c.DestinationOf(); d.Kind != DestinationHost || d.Name != AnyHost || len(d.Fields) != 1 || d.Fields[0] != "url" {
		t.Fatalf("web.fetch destination = %+v", d)
	}
	h, _ := r.ByKey("system.health@1")
	if d := h.DestinationOf(); d.Kind != DestinationNone {
		t.Fatalf("system.health destination = %+v", d)
	}
}
