package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// PolicyForbidden is the stage-3 refusal code of a call a Cedar forbid matched (issue 37);
// the detail is the policy's @reason.
const PolicyForbidden = "policy_forbidden"

// CedarVerdict is a Cedar policy's decision on one call as the turn carries it: the outcome
// (permit, forbid, ask), the determining policies, the reason (a forbid's @reason, an ask
// rule's @ask text) and, for an ask, the approver groups and quorum the ask rules name.
type CedarVerdict struct {
	Outcome  cedarpolicy.Outcome `json:"outcome"`
	Policies []string            `json:"policies,omitempty"`
	Reason   string              `json:"reason,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Quorum   int                 `json:"quorum,omitempty"`
	// Policy is the policy set's digest (cedarpolicy.Set.Digest).
	Policy string `json:"policy,omitempty"`
}

// VerdictOf is d as carried by a turn, under the policy set with digest digest.
func VerdictOf(d cedarpolicy.Decision, digest string) *CedarVerdict {
	return &CedarVerdict{Outcome: d.Outcome, Policies: d.Policies, Reason: d.Reason, Groups: d.Groups, Quorum: d.Quorum, Policy: digest}
}

// CedarRequest is the Cedar request of a call of c: principal and groups, the capability as
// action, its declared destination as resource (the URL's host for a host destination taken
// from the arguments; "none" when nothing leaves), the typed arguments, each argument field's
// origin from rep (untrusted wins over none, none over both, both over user; a report that
// could not be computed makes every origin none), the hosts and e-mail domains of the leaving
// values and their combined origin, and the turn's facts.
func CedarRequest(c *registry.Capability, principal string, groups []string, args json.RawMessage, rep provenance.Report, now time.Time, calls int) cedarpolicy.Request {
	dest := c.DestinationOf()
	byField := map[string][]string{}
	var hosts, domains []string
	if rep.Error == "" {
		for _, v := range rep.Values {
			f := v.Field()
			byField[f] = append(byField[f], v.Origin())
			if !slices.Contains(dest.Fields, f) {
				continue
			}
			switch v.Kind {
			case provenance.KindHost:
				if !slices.Contains(hosts, v.Text) {
					hosts = append(hosts, v.Text)
				}
			case provenance.KindDomain:
				if !slices.Contains(domains, v.Text) {
					domains = append(domains, v.Text)
				}
			}
		}
	}
	prov := map[string]string{}
	for f, os := range byField {
		prov[f] = cedarpolicy.CombineOrigins(os...)
	}
	origin := cedarpolicy.OriginUser // nothing the model chose leaves
	if len(dest.Fields) > 0 {
		var os []string
		for _, f := range dest.Fields {
			if o, ok := prov[f]; ok {
				os = append(os, o)
			}
		}
		if len(os) > 0 {
			origin = cedarpolicy.CombineOrigins(os...)
		}
		// A leaving field absent from the call sends nothing, so it does not count; a
		// report that could not be computed gives no origins: none.
		if rep.Error != "" {
			origin = cedarpolicy.OriginNone
		}
	}
	sort.Strings(hosts)
	sort.Strings(domains)
	resource := dest.Name
	switch {
	case dest.Kind == registry.DestinationNone:
		resource = "none"
	case dest.Kind == registry.DestinationHost && dest.Name == registry.AnyHost && len(hosts) > 0:
		resource = hosts[0]
	}
	return cedarpolicy.Request{Principal: principal, Groups: groups, Action: c.ID, Resource: resource, ResourceKind: string(dest.Kind),
		Args: args, Provenance: prov, Hosts: hosts, Domains: domains, DestinationOrigin: origin, Now: now, Calls: calls}
}

// principalGroups are the principal's groups in the approvers file (none when it cannot be
// read or names no such person).
func (a *Activities) principalGroups(principal string) []string {
	if a.Approvers == nil {
		return nil
	}
	set, err := a.Approvers()
	if err != nil || set == nil {
		return nil
	}
	return set.GroupsOf(principal)
}

// provenanceHook is the AdmitInput.Provenance hook of a turn: the report of args over the
// conversation's stored context, computed once and only when a Cedar policy asks.
func (a *Activities) provenanceHook(ctx context.Context, conversation string, args json.RawMessage) func() provenance.Report {
	var rep *provenance.Report
	return func() provenance.Report {
		if rep != nil {
			return *rep
		}
		r := provenance.Report{Rules: provenance.Rules, Error: "no store"}
		if a.Store != nil {
			var err error
			if r, _, err = a.computeProvenance(ctx, conversation, args); err != nil {
				r = provenance.Report{Rules: provenance.Rules, Error: err.Error()}
			}
		}
		rep = &r
		return r
	}
}

// runsAsCedarPermit is Execute's own check of an unconfirmed call of a capability that is not
// automatic as such: the Cedar policy this worker serves must permit it on the stored context
// now (defense in depth: the workflow's admission is not trusted for it).
func (a *Activities) runsAsCedarPermit(ctx context.Context, reg *registry.Registry, c *registry.Capability, in ExecuteInput) bool {
	set := reg.Cedar()
	if set == nil {
		return false
	}
	if auth := reg.Authorize(c, in.Principal); auth.Code != "" {
		return false
	}
	rep := a.provenanceHook(ctx, turnConversation("", in.WorkflowID), in.Arguments)()
	d := set.Decide(CedarRequest(c, in.Principal, a.principalGroups(in.Principal), in.Arguments, rep, a.now(), in.Calls))
	return d.Outcome == cedarpolicy.OutcomePermit
}

// AuditPolicyShadow is the audit kind of a candidate policy's would-be decision on one call
// (AIRLOCK_CEDAR_SHADOW): Detail is a ShadowRecord as JSON.
const AuditPolicyShadow = "policy_shadow"

// ShadowRecord is what a policy_shadow audit row holds: the live decision, the candidate's,
// and the facts both were made on, so `airlock policy diff --audit` can replay the call
// through any later candidate exactly.
type ShadowRecord struct {
	Live      LiveVerdict         `json:"live"`
	Candidate *CedarVerdict       `json:"candidate"`
	Facts     cedarpolicy.Request `json:"facts"`
}

// LiveVerdict is the live policy's decision on a call as its admission shows it: permit
// (automatic), forbid (refused at stage 3, with the code) or ask.
type LiveVerdict struct {
	Outcome cedarpolicy.Outcome `json:"outcome"`
	Code    string              `json:"code,omitempty"`
	Detail  string              `json:"detail,omitempty"`
}

// LiveOf is the live verdict an admission shows (nil for one rejected before stage 3).
func LiveOf(ad Admission) *LiveVerdict {
	switch {
	case !ad.Admitted && ad.Stage == StagePolicy:
		return &LiveVerdict{Outcome: cedarpolicy.OutcomeForbid, Code: ad.Code, Detail: ad.Detail}
	case !ad.Admitted:
		return nil
	case ad.Automatic:
		return &LiveVerdict{Outcome: cedarpolicy.OutcomePermit}
	}
	return &LiveVerdict{Outcome: cedarpolicy.OutcomeAsk}
}

// recordShadow writes the policy_shadow audit row of an admission a candidate policy judged
// (idempotent by key: a retried Admit writes it once).
func (a *Activities) recordShadow(ctx context.Context, in AdmitInput, ad Admission) error {
	live := LiveOf(ad)
	if ad.Shadow == nil || ad.facts == nil || live == nil || a.Store == nil || in.WorkflowID == "" {
		return nil
	}
	b, err := json.Marshal(ShadowRecord{Live: *live, Candidate: ad.Shadow, Facts: *ad.facts})
	if err != nil {
		return fmt.Errorf("shadow record: %w", err)
	}
	if _, err := a.Store.AppendAudit(ctx, store.AuditEvent{Key: fmt.Sprintf("%s/%s/%d/%s", in.WorkflowID, in.RunID, in.Seq, AuditPolicyShadow),
		WorkflowID: in.WorkflowID, RunID: in.RunID, Seq: in.Seq, CallID: in.Call.CallID, CapabilityID: ad.CapabilityID, Version: ad.Version,
		Outcome: AuditPolicyShadow, Stage: string(StagePolicy), Reason: string(live.Outcome) + "->" + string(ad.Shadow.Outcome),
		Detail: string(b), ArgsDigest: ad.ArgsDigest, At: a.now()}); err != nil {
		return fmt.Errorf("audit policy shadow: %w", err)
	}
	return nil
}
