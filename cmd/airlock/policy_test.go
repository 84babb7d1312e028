package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/store"
)

// policy diff --audit replays the facts a shadow row recorded through a new candidate and
// lists the calls whose decision would change from the live one.
func TestPolicyDiffReplaysShadowRows(t *testing.T) {
	old := cfg
	t.Cleanup(func() { cfg = old })
	cfg.Home, cfg.DatabaseURL, cfg.Layers, cfg.CedarFile, cfg.CedarShadowFile = t.TempDir(), "", nil, "", ""
	ctx := context.Background()
	st, err := store.Open(ctx, cfg.StoreURL())
	if err != nil {
		t.Fatal(err)
	}
	facts := func(url, origin string) cedarpolicy.Request {
		return cedarpolicy.Request{Principal: "alice", Action: "web.fetch", Resource: "x", ResourceKind: "host",
			Args: json.RawMessage(`{"url":"` + url + `"}`), DestinationOrigin: origin, Now: time.Now()}
	}
	for i, r := range []activities.ShadowRecord{
		{Live: activities.LiveVerdict{Outcome: cedarpolicy.OutcomeAsk}, Candidate: &activities.CedarVerdict{Outcome: cedarpolicy.OutcomePermit}, Facts: facts("https://typed.example/", "user")},
		{Live: activities.LiveVerdict{Outcome: cedarpolicy.OutcomeAsk}, Candidate: &activities.CedarVerdict{Outcome: cedarpolicy.OutcomeAsk}, Facts: facts("https://page.example/", "untrusted")},
	} {
		b, _ := json.Marshal(r)
		if _, err := st.AppendAudit(ctx, store.AuditEvent{Key: "wf/run/" + string(rune('1'+i)) + "/policy_shadow", WorkflowID: "turn/c/1", RunID: "run", Seq: i + 1,
			CapabilityID: "web.fetch", Version: 1, Outcome: activities.AuditPolicyShadow, Detail: string(b), At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	cand := filepath.Join(t.TempDir(), "next.cedar")
	if err := os.WriteFile(cand, []byte(`@id("typed") permit (principal, action == Action::"web.fetch", resource) when { context.destination.origin == "user" };
@id("page") @reason("no") forbid (principal, action == Action::"web.fetch", resource) when { context.destination.origin == "untrusted" };`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := diffAudit(ctx, &out, cand, 100); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "turn/c/1 #1 web.fetch: ask -> permit (typed") || !strings.Contains(got, "turn/c/1 #2 web.fetch: ask -> forbid (page no)") ||
		!strings.Contains(got, "2 shadow rows replayed") || !strings.Contains(got, "2 would change") {
		t.Fatalf("diff output:\n%s", got)
	}
}
