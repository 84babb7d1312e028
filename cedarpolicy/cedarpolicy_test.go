package cedarpolicy

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func testActions(t *testing.T) []Action {
	t.Helper()
	mk := func(id string, class Class, schema string, leaving ...string) Action {
		a, err := NewAction(id, class, []byte(schema), leaving)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	return []Action{
		mk("bank.get-balance", ClassLocalRead, `{"type":"object","properties":{}}`),
		mk("web.fetch", ClassExternalRead, `{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`, "url"),
		mk("bank.send-money", ClassWrite, `{"type":"object","properties":{"recipient":{"type":"string"},"amount":{"type":"number"},"subject":{"type":"string"},
			"attachments":{"anyOf":[{"type":"array","items":{"type":"object"}},{"type":"null"}]}},"required":["recipient","amount"]}`, "recipient", "amount"),
		mk("mail.send", ClassWrite, `{"type":"object","properties":{"recipients":{"type":"array","items":{"type":"string"}},"body":{"type":"string"}},"required":["recipients","body"]}`, "recipients", "body"),
	}
}

func teamSet(t *testing.T) *Set {
	t.Helper()
	text, err := os.ReadFile("testdata/team.cedar")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Compile("team.cedar", text, testActions(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSchemaTypesArguments(t *testing.T) {
	a := testActions(t)[2]
	got := map[string]Arg{}
	for _, arg := range a.Args {
		got[arg.Name] = arg
	}
	if got["amount"].Type != TypeLong || !got["amount"].Required || got["subject"].Required || got["recipient"].Type != TypeString {
		t.Fatalf("args %+v", a.Args)
	}
	if _, ok := got["attachments"]; ok {
		t.Fatalf("an array of objects is not exposed: %+v", a.Args)
	}
	if strings.Join(a.Fields, ",") != "amount,attachments,recipient,subject" {
		t.Fatalf("fields %v", a.Fields)
	}
	if !strings.Contains(Schema(testActions(t)), `action "bank.send-money" in ["write"]`) {
		t.Fatalf("schema:\n%s", Schema(testActions(t)))
	}
}

func TestTeamPolicyDecides(t *testing.T) {
	s := teamSet(t)
	if strings.Join(s.Groups(), ",") != "finance" {
		t.Fatalf("groups %v", s.Groups())
	}
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	pay := func(amount string, recipient, amt string) Request {
		return Request{Principal: "alice", Action: "bank.send-money", Resource: "bank", ResourceKind: "system",
			Args:       json.RawMessage(`{"recipient":"GB29NWBK60161331926819","amount":` + amount + `}`),
			Provenance: map[string]string{"recipient": recipient, "amount": amt}, Now: now}
	}
	cases := []struct {
		name   string
		r      Request
		want   Outcome
		policy string
		groups string
		quorum int
		reason string
	}{
		{"read", Request{Principal: "alice", Action: "bank.get-balance", Resource: "none", Args: json.RawMessage(`{}`), Now: now}, OutcomePermit, "reads-automatic", "", 0, ""},
		{"small typed payment", pay("99.5", OriginUser, OriginUser), OutcomePermit, "small-payments-the-user-typed", "", 0, ""},
		{"small payment to a recipient found in a bill", pay("99.5", OriginUntrusted, OriginUser), OutcomeAsk, "", "", 0, ""},
		{"small payment to a recipient typed and in a bill", pay("99.5", OriginBoth, OriginUser), OutcomeAsk, "", "", 0, ""},
		{"1000.01 rounds up over the limit", pay("1000.01", OriginUser, OriginUser), OutcomeAsk, "big-payments-two-approvers", "finance", 2, "two approvers"},
		{"big payment", pay("5000", OriginUser, OriginUser), OutcomeAsk, "big-payments-two-approvers", "finance", 2, "two approvers"},
		{"fetch typed", Request{Principal: "alice", Action: "web.fetch", Resource: "example.org", Args: json.RawMessage(`{"url":"https://example.org/"}`),
			Hosts: []string{"example.org"}, DestinationOrigin: OriginUser, Now: now}, OutcomePermit, "fetch-what-the-user-typed", "", 0, ""},
		{"fetch from a page", Request{Principal: "alice", Action: "web.fetch", Resource: "evil.example", Args: json.RawMessage(`{"url":"https://evil.example/"}`),
			Hosts: []string{"evil.example"}, DestinationOrigin: OriginUntrusted, Now: now}, OutcomeForbid, "no-unnamed-hosts", "", 0, "did not name"},
		{"internal mail", Request{Principal: "alice", Action: "mail.send", Resource: "mail", Args: json.RawMessage(`{"recipients":["bob@example.com"],"body":"hi there"}`),
			Domains: []string{"example.com"}, DestinationOrigin: OriginUser, Now: now}, OutcomePermit, "internal-mail", "", 0, ""},
		{"outside mail", Request{Principal: "alice", Action: "mail.send", Resource: "mail", Args: json.RawMessage(`{"recipients":["eve@elsewhere.net"],"body":"hi there"}`),
			Domains: []string{"elsewhere.net"}, DestinationOrigin: OriginUser, Now: now}, OutcomeAsk, "", "", 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := s.Decide(c.r)
			if d.Outcome != c.want || (c.policy != "" && strings.Join(d.Policies, ",") != c.policy) ||
				strings.Join(d.Groups, ",") != c.groups || d.Quorum != c.quorum || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("decision %+v, want %s by %q groups %q quorum %d", d, c.want, c.policy, c.groups, c.quorum)
			}
		})
	}
}

func TestCompileRefusesUnknownNames(t *testing.T) {
	for name, text := range map[string]string{
		"unknown capability":   `permit (principal, action == Action::"bank.steal", resource);`,
		"unknown argument":     `permit (principal, action == Action::"bank.send-money", resource) when { context.args.iban == "x" };`,
		"ill-typed comparison": `permit (principal, action == Action::"bank.send-money", resource) when { context.args.amount == "lots" };`,
		"optional unguarded":   `permit (principal, action == Action::"bank.send-money", resource) when { context.args.subject == "rent" };`,
		"unknown annotation":   `@approve("yes") permit (principal, action == Action::"web.fetch", resource);`,
		"bad quorum":           `@ask("x") @quorum("12") permit (principal, action == Action::"web.fetch", resource);`,
		"ask on forbid":        `@ask("x") forbid (principal, action == Action::"web.fetch", resource);`,
		"groups without ask":   `@groups("finance") permit (principal, action == Action::"web.fetch", resource);`,
		"not cedar":            `permit principal;`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Compile("bad.cedar", []byte(text), testActions(t)); !errors.Is(err, ErrInvalid) {
				t.Fatalf("compiled: %v", err)
			}
		})
	}
}

func TestGroupsNamedInPolicies(t *testing.T) {
	s, err := Compile("g.cedar", []byte(`permit (principal in Group::"ops", action == Action::"web.fetch", resource);
@ask("treasury decides") @groups("treasury, finance") permit (principal, action == Action::"bank.send-money", resource);`), testActions(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Groups(), ",") != "finance,ops,treasury" {
		t.Fatalf("groups %v", s.Groups())
	}
	d := s.Decide(Request{Principal: "carol", Groups: []string{"ops"}, Action: "web.fetch", Resource: "x", Args: json.RawMessage(`{"url":"https://x/"}`)})
	if d.Outcome != OutcomePermit {
		t.Fatalf("a member of ops is permitted: %+v", d)
	}
	d = s.Decide(Request{Principal: "dave", Action: "web.fetch", Resource: "x", Args: json.RawMessage(`{"url":"https://x/"}`)})
	if d.Outcome != OutcomeAsk || len(d.Groups) != 0 {
		t.Fatalf("a non-member is asked (any approver): %+v", d)
	}
}

func TestErringForbidForbids(t *testing.T) {
	s, err := Compile("e.cedar", []byte(`permit (principal, action == Action::"bank.send-money", resource);
@reason("no rent") forbid (principal, action == Action::"bank.send-money", resource) when { context.args has subject && context.args.subject == "rent" && context.args.amount / 0 == 1 };`), testActions(t))
	if err != nil {
		// Cedar has no division: use an overflow instead.
		s, err = Compile("e.cedar", []byte(`permit (principal, action == Action::"bank.send-money", resource);
@reason("too much") forbid (principal, action == Action::"bank.send-money", resource) when { context.args.amount * 9223372036854775807 > 0 };`), testActions(t))
		if err != nil {
			t.Fatal(err)
		}
	}
	d := s.Decide(Request{Principal: "a", Action: "bank.send-money", Args: json.RawMessage(`{"recipient":"GB29NWBK60161331926819","amount":5}`)})
	if d.Outcome != OutcomeForbid || len(d.Errors) == 0 {
		t.Fatalf("an erring forbid forbids: %+v", d)
	}
}
