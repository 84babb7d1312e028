package activities

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/capabilities"
	"github.com/airlock-dev/airlock/internal/catalog"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/registry"
)

func cedarRegistry(t *testing.T, live, shadow string) *registry.Registry {
	t.Helper()
	noop := func(context.Context, *urlArgs, registry.Invocation) (registry.Output, error) {
		return registry.Output{}, nil
	}
	type none struct{}
	srcs := []registry.Source{registry.Base(), registry.BasePolicy()}
	if live != "" {
		srcs = append(srcs, registry.Source{Name: "live.cedar", Data: []byte(live)})
	}
	if shadow != "" {
		srcs = append(srcs, registry.Source{Name: "next.shadow.cedar", Data: []byte(shadow)})
	}
	r, err := registry.Load(srcs, []registry.Implementation{
		registry.Typed("system.health", 1, func(context.Context, *none, registry.Invocation) (registry.Output, error) {
			return registry.Output{}, nil
		}),
		registry.Typed("web.fetch", 1, noop),
		capabilities.CatalogList(&catalog.Catalog{}), capabilities.CatalogDescribe(&catalog.Catalog{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A candidate policy in shadow is decided on the same facts as the live one and never acts:
// the live JSON policy asks for web.fetch, the candidate would permit the typed URL and
// forbid the one only in untrusted data; the admission follows the live policy alone, and
// the shadow source changes no capability's fingerprint.
func TestShadowPolicyDecidesBesideTheLiveOne(t *testing.T) {
	const next = `@id("typed") permit (principal, action == Action::"web.fetch", resource) when { context.destination.origin == "user" };
@id("untrusted") @reason("not from a page") forbid (principal, action == Action::"web.fetch", resource) when { context.destination.origin == "untrusted" };`
	reg := cedarRegistry(t, "", next)
	plain := cedarRegistry(t, "", "")
	f1, _ := reg.ByKey("web.fetch@1")
	f2, _ := plain.ByKey("web.fetch@1")
	if f1.Fingerprint() != f2.Fingerprint() {
		t.Fatal("a shadow policy changed the fingerprint: it would void approvals though it decides nothing")
	}
	entries := []provenance.Entry{{Kind: provenance.SourceUser, Text: "read https://typed.example/a"},
		{Kind: provenance.SourceResult, Text: "see https://page.example/b", Capability: "web.fetch"}}
	admit := func(url string) Admission {
		args := json.RawMessage(`{"url":"` + url + `"}`)
		rep, err := provenance.Compute(args, entries)
		if err != nil {
			t.Fatal(err)
		}
		return Admit(reg, AdmitInput{Call: parse.Call{Name: "web_fetch", CallID: "c", Arguments: args}, Principal: "alice", Now: time.Now(),
			Provenance: func() provenance.Report { return rep }})
	}
	for url, want := range map[string]cedarpolicy.Outcome{"https://typed.example/a": cedarpolicy.OutcomePermit,
		"https://page.example/b": cedarpolicy.OutcomeForbid, "https://other.example/c": cedarpolicy.OutcomeAsk} {
		ad := admit(url)
		if !ad.Admitted || ad.Automatic || ad.Cedar != nil {
			t.Fatalf("%s: the live policy (JSON, confirm) did not decide alone: %+v", url, ad)
		}
		if ad.Shadow == nil || ad.Shadow.Outcome != want || ad.facts == nil || ad.facts.DestinationOrigin == "" {
			t.Fatalf("%s: shadow %+v, want %s", url, ad.Shadow, want)
		}
		if lv := LiveOf(ad); lv == nil || lv.Outcome != cedarpolicy.OutcomeAsk {
			t.Fatalf("%s: live verdict %+v", url, lv)
		}
	}

	// The same policy live: permit runs, forbid is not admitted and says why.
	reg = cedarRegistry(t, next, "")
	args := json.RawMessage(`{"url":"https://page.example/b"}`)
	rep, _ := provenance.Compute(args, entries)
	ad := Admit(reg, AdmitInput{Call: parse.Call{Name: "web_fetch", CallID: "c", Arguments: args}, Principal: "alice", Now: time.Now(),
		Provenance: func() provenance.Report { return rep }})
	if ad.Admitted || ad.Stage != StagePolicy || ad.Code != PolicyForbidden || ad.Detail != "not from a page" {
		t.Fatalf("live forbid: %+v", ad)
	}
	if lv := LiveOf(ad); lv == nil || lv.Outcome != cedarpolicy.OutcomeForbid {
		t.Fatalf("live verdict of a forbid %+v", lv)
	}
}
