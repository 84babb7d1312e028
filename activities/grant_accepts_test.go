package activities

import (
	"encoding/json"
	"testing"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// A repeat grant answers a call only where a decision by its approver on that call would count
// (found by an attack helper): an approver no longer on file closes the grant; one outside the
// groups this call's policy names (a Cedar ask's groups depend on the call's context), or one
// who is the call's principal or requester under four eyes, leaves the grant open and the call
// asks a person.
func TestGrantAnswersOnlyCallsItsApproverMayDecide(t *testing.T) {
	var file approvers.File
	for name, groups := range map[string][]string{"alice": {"support"}, "bob": nil} {
		c, err := approvers.NewCredential("approver:" + name)
		if err != nil {
			t.Fatal(err)
		}
		file.Approvers = append(file.Approvers, approvers.Approver{Name: name, PublicKey: c.Public(), Groups: groups})
	}
	b, _ := json.Marshal(file)
	set, err := approvers.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Registry: cedarRegistry(t, "", ""), Approvers: approvers.Static(set)}
	in := IssueInput{CapabilityID: "web.fetch", Version: 1, Principal: "user:carol", Requester: "app-1"}
	for _, tc := range []struct {
		name     string
		approver string
		pol      registry.PolicyEntry
		in       IssueInput
		want     string
	}{
		{"stands", "alice", registry.PolicyEntry{}, in, ""},
		{"in this call's groups", "alice", registry.PolicyEntry{ApproverGroups: []string{"support"}}, in, ""},
		{"removed", "zed", registry.PolicyEntry{}, in, store.GrantApproverGone},
		{"outside this call's groups", "alice", registry.PolicyEntry{ApproverGroups: []string{"security"}}, in, store.GrantSkip},
		{"four eyes: the principal", "bob", registry.PolicyEntry{DistinctApprover: true}, IssueInput{CapabilityID: "web.fetch", Version: 1, Principal: "bob"}, store.GrantSkip},
		{"four eyes: the requester", "bob", registry.PolicyEntry{DistinctApprover: true}, IssueInput{CapabilityID: "web.fetch", Version: 1, Principal: "user:carol", Requester: "bob"}, store.GrantSkip},
		{"four eyes: someone else", "bob", registry.PolicyEntry{DistinctApprover: true}, in, ""},
	} {
		if got := a.grantAccepts(store.Grant{ID: "rg-1", Approver: tc.approver}, tc.in, tc.pol); got != tc.want {
			t.Errorf("%s: grantAccepts = %q, want %q", tc.name, got, tc.want)
		}
	}
	a.Approvers = nil
	if got := a.grantAccepts(store.Grant{ID: "rg-1", Approver: "alice"}, in, registry.PolicyEntry{}); got != store.GrantApproverGone {
		t.Errorf("no approvers file: %q, want %q (nothing can be judged: fail closed)", got, store.GrantApproverGone)
	}
}
