package registry

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// emptyPolicy is a valid policy sidecar that permits nothing: registry fixtures load with it,
// so their only diagnostics are their own.
var emptyPolicy = Source{Name: "empty policy", Data: []byte(`{"schema/v":"capability-authorization-policy.v1","revision":"empty","grants":[],"principals":[],"capabilities":[]}`)}

// fixtureImpls binds the base implementations plus, for every entry whose schema/ref is
// "testdata:<file>", a schema-defined implementation read from testdata/schemas/<file>.
func fixtureImpls(t *testing.T, src Source) []Implementation {
	impls := baseImpls()
	doc, err := decodeDocument(src.Data)
	if err != nil {
		return impls
	}
	// Fixtures register system.health and web.fetch: the catalog capabilities (which joined
	// the base later) are bound only where a fixture registers them.
	impls = slices.DeleteFunc(impls, func(im Implementation) bool {
		return strings.HasPrefix(im.ID, "capability.catalog.") &&
			!slices.ContainsFunc(doc.Entries, func(e Entry) bool { return e.ID == im.ID && e.Version == im.Version })
	})
	for _, e := range doc.Entries {
		if name, ok := strings.CutPrefix(e.Airlock.SchemaRef, "testdata:"); ok {
			b, err := os.ReadFile(filepath.Join("testdata", "schemas", name))
			if err != nil {
				t.Fatal(err)
			}
			impls = append(impls, Implementation{ID: e.ID, Version: e.Version, Schema: b, Invoke: okInvoke})
		}
		if m := e.Airlock.MCP; m != nil {
			def, err := DecodeMCPDefinition(m.Definition)
			if err != nil {
				continue
			}
			schema, err := MCPArgumentSchema(def.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			impls = append(impls, Implementation{ID: e.ID, Version: e.Version, Schema: schema, Invoke: okInvoke})
		}
	}
	return impls
}

// Every load-time rule has a failing fixture under testdata/invalid named after it, and each
// fixture fails with its own rule and no other: the diagnostics name the rule (and the entry,
// where the rule is about one).
func TestEachRuleHasAFixtureThatFailsWithItsOwnRule(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "invalid", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var have []Rule
	for _, f := range files {
		have = append(have, Rule(strings.TrimSuffix(filepath.Base(f), ".json")))
	}
	for _, ri := range AllRules() {
		if !slices.Contains(have, ri.Rule) {
			t.Errorf("rule %s has no fixture testdata/invalid/%s.json", ri.Rule, ri.Rule)
		}
	}
	for _, f := range files {
		rule := Rule(strings.TrimSuffix(filepath.Base(f), ".json"))
		t.Run(string(rule), func(t *testing.T) {
			if !slices.ContainsFunc(AllRules(), func(ri RuleInfo) bool { return ri.Rule == rule }) {
				t.Fatalf("fixture %s names no rule", f)
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src := Source{Name: filepath.Base(f), Data: b}
			var sources []Source
			impls := baseImpls()
			switch {
			case rule == RuleCedarPolicy:
				// The fixture is Cedar text: a source named *.cedar beside the base registry.
				sources = []Source{Base(), BasePolicy(), {Name: "cedar-policy.cedar", Data: b}}
			case rule == RulePolicyMissing:
				sources = []Source{src}
				impls = fixtureImpls(t, src)
			case strings.HasPrefix(string(rule), "policy-"):
				sources = []Source{Base(), src}
			default:
				sources = []Source{src, emptyPolicy}
				impls = fixtureImpls(t, src)
			}
			r, err := Load(sources, impls)
			var le *LoadError
			if r != nil || !errors.As(err, &le) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("want a *LoadError, got %v, %v", r, err)
			}
			if got := le.Rules(); len(got) != 1 || got[0] != rule {
				t.Fatalf("rules = %v, want only %s:\n%v", got, rule, err)
			}
			for _, d := range le.Diagnostics {
				if !strings.Contains(d.String(), "["+string(rule)+"]") {
					t.Errorf("diagnostic does not name its rule: %s", d)
				}
			}
		})
	}
	if len(files) != len(AllRules()) {
		t.Errorf("%d fixtures for %d rules", len(files), len(AllRules()))
	}
}

// The valid base registry and policy pass every rule (the fixtures fail only by their edit).
func TestFixtureBaseIsValid(t *testing.T) {
	if _, err := Load([]Source{Base(), BasePolicy()}, baseImpls()); err != nil {
		t.Fatal(err)
	}
}

// Entries P072 registers for other surfaces (reserved, federated-only, not dispatchable) are
// valid without the airlock block, and neither need nor receive an implementation.
func TestEntriesForOtherSurfacesNeedNoAirlockBlock(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(Embedded, &doc); err != nil {
		t.Fatal(err)
	}
	flags := func(fed bool) map[string]any {
		return map[string]any{"dispatchable": false, "advertisable": fed, "passport/eligible": fed, "signing-domain": false,
			"host-route": false, "federated-discovery": fed}
	}
	doc["entries"] = append(doc["entries"].([]any),
		map[string]any{"capability/id": "corpus.provider", "version": 1, "owner": "corpus", "surfaces": []string{"federated"},
			"wire/name": "app/corpus-provider", "status": "active", "flags": flags(true)},
		map[string]any{"capability/id": "room.join", "version": 1, "owner": "rooms", "surfaces": []string{"host-local"},
			"wire/name": "app/room.join", "status": "reserved", "flags": map[string]any{"dispatchable": true, "advertisable": false,
				"passport/eligible": false, "signing-domain": false, "host-route": true, "federated-discovery": false}},
		map[string]any{"capability/id": "core/messaging", "version": 1, "owner": "protocol", "surfaces": []string{"federated"},
			"wire/name": "core/messaging", "status": "active", "flags": flags(true)},
		map[string]any{"capability/id": "article-review@participant:did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
			"version": 1, "owner": "a participant", "surfaces": []string{"federated"}, "wire/name": "plugin/article-review",
			"status": "deprecated", "removal/deadline": "2027-01-01T00:00:00Z", "flags": flags(true)},
	)
	b, _ := json.Marshal(doc)
	r, err := Load([]Source{{Name: "surfaces", Data: b}, BasePolicy()}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Capabilities()) != 11 { // the base 7 (4 capabilities, 3 proposal tools) and these 4
		t.Fatalf("capabilities = %d", len(r.Capabilities()))
	}
	rj, _ := r.ByKey("room.join@1")
	if el := r.Eligible(rj, UseResolve, fixedNow); el.Code != RefusalReserved {
		t.Fatalf("reserved entry admitted: %+v", el)
	}
	cp, _ := r.ByKey("corpus.provider@1")
	if el := r.Eligible(cp, UseResolve, fixedNow); el.Code != RefusalNotDispatchable {
		t.Fatalf("federated-only entry admitted for resolve: %+v", el)
	}
}

var fixedNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// The checked-in docs/CAPABILITY-REGISTRY.md is exactly the projection of the checked-in
// registry and policies (make check runs this test): regenerate with `airlock registry doc`.
func TestCapabilityRegistryDocIsCurrent(t *testing.T) {
	sets, err := EmbeddedProjectionSets()
	if err != nil {
		t.Fatal(err)
	}
	want, err := Projection(sets)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", DocPath))
	if err != nil {
		t.Fatalf("%v (generate it with: airlock registry doc)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s drifted from the registry: regenerate it with `airlock registry doc` (bin/airlock registry doc)", DocPath)
	}
}

// The embedded layer policies are GeneratePolicy's output for the embedded layers (one
// classification, not two): send_money and every other effectful tool keep the four-eyes rule.
func TestEmbeddedLayerPoliciesAreGenerated(t *testing.T) {
	for _, n := range LayerNames() {
		layer, err := Layer(n)
		if err != nil {
			t.Fatal(err)
		}
		emb, err := LayerPolicy(n)
		if err != nil {
			t.Fatal(err)
		}
		var want PolicyDocument
		if err := json.Unmarshal(emb.Data, &want); err != nil {
			t.Fatal(err)
		}
		var got PolicyDocument
		if err := json.Unmarshal(GeneratePolicy(layer, want.Revision).Data, &got); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Errorf("%s: embedded policy differs from the generated one", n)
		}
	}
}
