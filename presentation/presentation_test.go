package presentation_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/registry"
)

// The status is said in the same plain words for every viewer and every state, and every
// hostile string comes out visible.
func TestStatusInPlainWords(t *testing.T) {
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	decided := now.Add(-time.Minute)
	base := presentation.Input{ID: "cf-1", WorkflowID: "turn/c\u202e/1", CapabilityID: "payments.send", Version: 2, ToolName: "send\x1b[2J",
		Arguments: json.RawMessage(`{"to":"a\u200bb"}`), Groups: []string{"finance"}, Quorum: 2, Approvals: []string{"erin"},
		ExpiresAt: now.Add(time.Hour), Now: now, UserRequest: "<b>pay</b>\u202e",
		Disclosure: &registry.Disclosure{Description: "Send money", Destination: registry.Destination{Kind: "host", Name: "bank.example"}}}
	for _, tc := range []struct {
		name string
		edit func(*presentation.Input)
		want string
	}{
		{"pending", func(*presentation.Input) {}, "waiting for a decision: 2 needed, 1 so far (erin)"},
		{"voted", func(in *presentation.Input) { in.Viewer = "erin" }, "your approval counted; 1 more needed from finance"},
		{"ran", func(in *presentation.Input) {
			in.Decision, in.DecidedBy, in.DecidedAt, in.Outcome = "approved", "bob", &decided, "executed"
		}, "approved by bob; it ran"},
		{"failed", func(in *presentation.Input) { in.Decision, in.DecidedBy, in.Outcome = "approved", "bob", "failed" }, "approved by bob; it ran and failed"},
		{"denied", func(in *presentation.Input) { in.Decision, in.DecidedBy, in.Reason = "denied", "bob", "no\u202e" },
			"denied by bob: no<U+202E> [flags: bidi_control]; the call never ran"},
		{"expired", func(in *presentation.Input) { in.Decision = "expired" }, "expired: nobody decided in time; the call never ran"},
		{"expired undecided", func(in *presentation.Input) { in.Now = now.Add(2 * time.Hour) }, "expired: nobody decided in time; the call never ran"},
	} {
		in := base
		tc.edit(&in)
		c := presentation.Build(in)
		if got := c.StatusLine(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		b, _ := json.Marshal(c)
		var lines []string
		for _, l := range c.Lines(0) {
			lines = append(lines, l.Label+": "+l.Text)
		}
		for _, raw := range []string{"\u202e", "\u200b", "\x1b"} {
			if strings.Contains(string(b), raw) || strings.Contains(strings.Join(lines, "\n"), raw) {
				t.Errorf("%s: %q reached the presentation raw", tc.name, raw)
			}
		}
	}
	c := presentation.Build(base)
	if c.Destination.Line != "host bank.example" || c.Quorum.Line() != "2 needed, 1 so far (erin)" || c.UserRequest.Text != "<b>pay</b><U+202E>" ||
		c.Ref() != "payments.send@2" || c.Expiry() != "2026-12-05T09:00:00Z" {
		t.Fatalf("presentation: %+v", c)
	}
}

// Deciders says who may decide, with or without groups, and says "other than the requester"
// where the policy asks for four eyes: the card, the CLI, the API and the notices all print it.
func TestDecidersSayFourEyes(t *testing.T) {
	for _, tc := range []struct {
		groups   []string
		distinct bool
		want     string
	}{
		{nil, false, "any approver"},
		{nil, true, "any approver other than the requester"},
		{[]string{"finance", "ops"}, false, "members of finance, ops"},
		{[]string{"finance", "ops"}, true, "members of finance, ops other than the requester"},
	} {
		c := presentation.Build(presentation.Input{ID: "cf-1", CapabilityID: "payments.send", Version: 1,
			Groups: tc.groups, DistinctApprover: tc.distinct})
		if got := c.Quorum.Deciders(); got != tc.want {
			t.Errorf("groups %v, distinct %v: Deciders() = %q, want %q", tc.groups, tc.distinct, got, tc.want)
		}
		if c.Quorum.DistinctFromRequester != tc.distinct {
			t.Errorf("groups %v: DistinctFromRequester = %v, want %v", tc.groups, c.Quorum.DistinctFromRequester, tc.distinct)
		}
		found := false
		for _, l := range c.Lines(0) {
			if l.Label == presentation.LabelDeciders {
				found = l.Text == tc.want+"; 1 needed, none so far"
			}
		}
		if !found {
			t.Errorf("groups %v, distinct %v: no deciders line %q in %v", tc.groups, tc.distinct, tc.want, c.Lines(0))
		}
		b, _ := json.Marshal(c.Quorum)
		if !strings.Contains(string(b), fmt.Sprintf(`"distinct_from_requester":%v`, tc.distinct)) {
			t.Errorf("quorum JSON %s lacks distinct_from_requester", b)
		}
	}
}

// Brief keeps every value only to its limit (what notices carry: found by an attack helper,
// a webhook carried a 20,000-rune argument and the whole user request) and leaves the
// presentation it was made from whole.
func TestBriefCarriesValuesOnlyToTheirLimit(t *testing.T) {
	long := strings.Repeat("x", 20000)
	in := presentation.Input{ID: "cf-1", WorkflowID: "turn/c/1", CapabilityID: "mail.send", Version: 1, ToolName: "send_mail",
		Arguments: json.RawMessage(`{"to":"a@example.com","body":"` + long + `"}`), UserRequest: long, Limit: 200,
		ExpiresAt: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC), Now: time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC),
		Disclosure: &registry.Disclosure{Description: long, Destination: registry.Destination{Kind: "host", Name: "mail.example", Fields: []string{"to", "body"}}}}
	whole := presentation.Build(in)
	b, _ := json.Marshal(whole)
	if !strings.Contains(string(b), long) {
		t.Fatal("the signed-in presentation must keep the whole value")
	}
	brief := whole.Brief()
	bb, _ := json.Marshal(brief)
	if strings.Contains(string(bb), strings.Repeat("x", 1000)) || len(bb) > 8000 {
		t.Fatalf("Brief carries whole values: %d bytes", len(bb))
	}
	if !strings.Contains(string(bb), `"truncated"`) {
		t.Fatalf("Brief must still say a value was cut: %s", bb)
	}
	again, _ := json.Marshal(whole)
	if string(again) != string(b) {
		t.Fatal("Brief changed the presentation it was made from")
	}
}
