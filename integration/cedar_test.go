package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/workflows"
)

// cedarTeamPolicy is a team's Cedar policy over web.fetch (issue 37): a fetch of the URL the
// user typed runs, nothing is fetched from a URL found only in fetched pages, anything else
// is decided by two members of ops.
const cedarTeamPolicy = `
@id("fetch-typed")
permit (principal, action == Action::"web.fetch", resource)
when { context.destination.origin == "user" };

@id("no-unnamed-hosts")
@reason("nothing is fetched from a URL the user did not name")
forbid (principal, action == Action::"web.fetch", resource)
when { context.destination.origin == "untrusted" };

@id("ops-decide")
@ask("a fetch the user did not type exactly is decided by two of ops")
@groups("ops")
@quorum("2")
permit (principal, action == Action::"web.fetch", resource);
`

// approversWithGroups copies the tests' approvers file with groups set by name.
func approversWithGroups(t *testing.T, groups map[string][]string) string {
	t.Helper()
	raw, err := os.ReadFile(itApprovers)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	set := 0
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if n, ok := x["name"].(string); ok {
				if g, ok := groups[n]; ok {
					x["groups"] = g
					set++
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)
	if set != len(groups) {
		t.Fatalf("approvers file %s: set groups on %d of %d approvers", itApprovers, set, len(groups))
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	p := filepath.Join(t.TempDir(), "approvers.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCedarPolicyGatesARealTurn: one real turn on the dev server under a Cedar policy. The
// typed URL is permitted (runs without a human), a URL found only in the fetched page is
// forbidden with the policy's reason (never fetched), and the typed URL with one more query
// parameter gets no decision, so it asks: the ask rule's group decides (mallory, not in ops, is
// refused approver_ineligible) and its quorum of two holds the call until bob and carol
// both approved.
func TestCedarPolicyGatesARealTurn(t *testing.T) {
	var hits sync32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.add(r.URL.RequestURI())
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>story</title></head><body><p>see also http://"+r.Host+"/second?id=9 and more</p></body></html>")
	}))
	defer target.Close()
	typed := target.URL + "/story?id=7"
	second := target.URL + "/second?id=9"
	model := newFakeModel(t,
		calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":%q}`, typed))),
		calls(call("c2", "web_fetch", fmt.Sprintf(`{"url":%q}`, second))),
		calls(call("c3", "web_fetch", fmt.Sprintf(`{"url":%q}`, typed+"&ref=x"))),
	)
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	cfg.ApproversFile = approversWithGroups(t, map[string][]string{"bob": {"ops"}, "carol": {"ops"}})
	cfg.CedarFile = filepath.Join(t.TempDir(), "team.cedar")
	if err := os.WriteFile(cfg.CedarFile, []byte(cedarTeamPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	startWorker(t, c, cfg)
	st := openStore(t, cfg)

	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "cedar", Principal: "alice", Message: "summarize " + typed})
	var p workflows.PendingConfirmation
	eventually(t, 60*time.Second, "the third call held, or the turn's end", func() bool {
		if ps := pending(t, c, run.GetID()); len(ps) > 0 {
			p = ps[0]
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		var res workflows.TurnResult
		if err := run.Get(ctx, &res); err == nil {
			t.Fatalf("the turn ended without asking: %s", outcomeList(res))
		}
		return false
	})
	if hits.count(typed) != 1 || hits.count(second) != 0 {
		t.Fatalf("fetches before the third call was held: %v; want the typed URL once (permit) and the page's URL never (forbid)", hits.all())
	}
	if !strings.Contains(string(p.Arguments), "ref=x") || p.Quorum != 2 || strings.Join(p.ApproverGroups, ",") != "ops" {
		t.Fatalf("held call %s, quorum %d, groups %v; want the URL with one more parameter, 2 approvals of ops", p.Arguments, p.Quorum, p.ApproverGroups)
	}
	err := decideAs(t, c, cfg, st, p.ConfirmationID, workflows.DecisionApprove, "mallory", "")
	var refused *approval.RefusedError
	if !errors.As(err, &refused) || refused.Code != activities.ApproverIneligible {
		t.Fatalf("mallory (not in ops) approving: %v, want %s", err, activities.ApproverIneligible)
	}
	err = decideAs(t, c, cfg, st, p.ConfirmationID, workflows.DecisionApprove, "bob", "")
	if !errors.As(err, &refused) || refused.Code != activities.QuorumPending {
		t.Fatalf("bob's approval: %v, want %s (one of two)", err, activities.QuorumPending)
	}
	if hits.count(typed+"&ref=x") != 0 {
		t.Fatal("the asked call ran on one approval of two")
	}
	if err := decideAs(t, c, cfg, st, p.ConfirmationID, workflows.DecisionApprove, "carol", ""); err != nil {
		t.Fatalf("carol's approval: %v", err)
	}
	res := result(t, run)
	if got := outcomeList(res); got != "web_fetch:executed web_fetch:rejected:policy_forbidden web_fetch:executed" {
		t.Fatalf("outcomes = %s", got)
	}
	if d := res.Outcomes[1].Detail; !strings.Contains(d, "nothing is fetched from a URL the user did not name") {
		t.Fatalf("the forbid's detail %q does not give the policy's reason", d)
	}
	if hits.count(second) != 0 || hits.count(typed+"&ref=x") != 1 {
		t.Fatalf("fetches: %v", hits.all())
	}
}
