package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
)

// grouped is an Authenticator with approver groups (as approvers.Set offers them).
type grouped struct {
	users
	groups map[string][]string
}

func (g grouped) GroupsOf(name string) []string { return g.groups[name] }

// The inbox lists a signed-in approver only what their groups may decide (issue 21): carol, in
// no group, sees the confirmation every approver may decide and not the payments one; alice,
// in payments, sees both; the counts agree.
func TestInboxListsOnlyWhatTheApproverMayDecide(t *testing.T) {
	e := newEnvWith(t, grouped{users: users{"alice": "correct horse", "carol": "correct horse"}, groups: map[string][]string{"alice": {"payments"}}})
	for _, c := range []store.Confirmation{
		{ID: "cf-open", TokenHash: []byte("h-open"), WorkflowID: "turn/c/1", RunID: "r", Seq: 1, CapabilityID: "web.fetch", Version: 1,
			ArgsDigest: "d", Arguments: []byte(`{"url":"https://example.org"}`), Display: "web_fetch {}", ExpiresAt: time.Now().Add(time.Hour)},
		{ID: "cf-pay", TokenHash: []byte("h-pay"), WorkflowID: "turn/c/1", RunID: "r", Seq: 2, CapabilityID: "bank.send", Version: 1,
			ArgsDigest: "d", Arguments: []byte(`{"to":"x"}`), Display: "send_money {}", ExpiresAt: time.Now().Add(time.Hour), ApproverGroups: []string{"payments"}},
	} {
		if _, err := e.st.CreateConfirmation(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string][]string{"carol": {"cf-open"}, "alice": {"cf-open", "cf-pay"}} {
		b := e.browser()
		b.login(name, "correct horse")
		_, page := b.get("/")
		for _, id := range []string{"cf-open", "cf-pay"} {
			shown := strings.Contains(page, `data-confirmation="`+id+`"`)
			if shown != (id == want[0] || (len(want) > 1 && id == want[1])) {
				t.Errorf("%s: %s shown = %v", name, id, shown)
			}
		}
	}
}
