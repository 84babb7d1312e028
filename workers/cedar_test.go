package workers

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/registry"
)

func writeCedar(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "team.cedar")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A Cedar policy is loaded with the registry and watched for live reload; one that names a
// capability, argument or group the registry (or the approvers file) does not know stops the
// worker from serving, with the rule in the diagnostic.
func TestCedarPolicyLoadsAndIsRefusedOnUnknownNames(t *testing.T) {
	dir := t.TempDir()
	apf := filepath.Join(dir, "approvers.json")
	cred, err := approvers.NewCredential("approver:bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := approvers.Add(apf, approvers.Approver{Name: "bob", PublicKey: cred.Public(), Groups: []string{"ops"}}); err != nil {
		t.Fatal(err)
	}
	good := `@id("fetch-typed") permit (principal, action == Action::"web.fetch", resource) when { context.destination.origin == "user" };
@id("ops") @ask("ops decides") @groups("ops") permit (principal, action == Action::"web.fetch", resource);`
	cfg := config.Config{CedarFile: writeCedar(t, good), ApproversFile: apf}
	reg, err := LoadRegistry(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reg.Cedar() == nil || reg.Cedar().Len() != 2 || strings.Join(reg.Cedar().Groups(), ",") != "ops" {
		t.Fatalf("cedar policy %+v", reg.Cedar())
	}
	if !slices.Contains(WatchedFiles(cfg), cfg.CedarFile) {
		t.Fatalf("the Cedar file is not watched for live reload: %v", WatchedFiles(cfg))
	}
	base, _ := LoadRegistry(config.Config{}, nil, nil)
	fc, _ := reg.ByKey("web.fetch@1")
	fb, _ := base.ByKey("web.fetch@1")
	if fc.Fingerprint() == fb.Fingerprint() {
		t.Fatal("a Cedar policy does not change the capabilities' fingerprint: approvals would survive a policy change")
	}

	for name, c := range map[string]struct {
		text string
		want error
	}{
		"unknown capability":   {`permit (principal, action == Action::"web.fetch2", resource);`, registry.ErrInvalid},
		"unknown argument":     {`permit (principal, action == Action::"web.fetch", resource) when { context.args.uri == "x" };`, registry.ErrInvalid},
		"unknown group":        {`@ask("x") @groups("finance") permit (principal, action == Action::"web.fetch", resource);`, ErrUnknownGroup},
		"unknown group entity": {`permit (principal in Group::"finance", action == Action::"web.fetch", resource);`, ErrUnknownGroup},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadRegistry(config.Config{CedarFile: writeCedar(t, c.text), ApproversFile: apf}, nil, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("loaded: %v, want %v", err, c.want)
			}
			var le *registry.LoadError
			if errors.As(err, &le) && !slices.Contains(le.Rules(), registry.RuleCedarPolicy) {
				t.Fatalf("rules %v", le.Rules())
			}
		})
	}
	if _, err := LoadRegistry(config.Config{CedarFile: filepath.Join(dir, "team.json")}, nil, nil); err == nil {
		t.Fatal("a Cedar file not named *.cedar was loaded")
	}
}

// The converter writes Cedar that loads against the registry and decides as the JSON policy:
// the base policy's automatic reads permit, web.fetch (confirm) asks.
func TestConvertedJSONPolicyDecidesAlike(t *testing.T) {
	base, err := LoadRegistry(config.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := registry.ConvertPolicy(base.Policy(), base.Capabilities())
	reg, err := LoadRegistry(config.Config{CedarFile: writeCedar(t, text)}, nil, nil)
	if err != nil {
		t.Fatalf("converted policy refused: %v\n%s", err, text)
	}
	for _, c := range reg.Capabilities() {
		if c.IsProposal() {
			continue
		}
		auth := base.Authorize(c, "alice")
		d := reg.Cedar().Decide(cedarpolicy.Request{Principal: "alice", Action: c.ID, Resource: "none", Args: []byte(`{}`)})
		want := cedarpolicy.OutcomeAsk
		if auth.Automatic {
			want = cedarpolicy.OutcomePermit
		}
		if auth.Code == registry.PolicyDenied {
			want = cedarpolicy.OutcomeForbid
		}
		if d.Outcome != want {
			t.Errorf("%s: JSON %+v, converted Cedar %s", c.Key(), auth, d.Outcome)
		}
	}
}
