package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/catalog"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/registry"
)

// Outcome reasons of catalog reads refused by the controller (stage catalog).
const (
	// ReasonCatalogAmbiguous: one message proposed catalog reads and other calls; none ran.
	ReasonCatalogAmbiguous = "ambiguous_catalog_and_effect"
	// ReasonCatalogClosed: a catalog read after the controller completed (the turn already
	// answered or proposed an effect).
	ReasonCatalogClosed = "catalog_closed"
	// ReasonCatalogStopped: a catalog read after an earlier read of the same message stopped
	// the controller.
	ReasonCatalogStopped = "catalog_stopped"
	// ReasonCatalogNotAutomatic: the policy would not let the read run without a human; the
	// controller runs only automatic reads.
	ReasonCatalogNotAutomatic = "catalog_not_automatic"
)

// isCatalogCall reports whether call names a catalog operation, by the tool name the host
// offered in this round's catalog (never by anything else the model wrote).
func (t *turn) isCatalogCall(call parse.Call) bool {
	ref, ok := t.catalog[call.Name]
	return ok && catalog.IsCatalog(ref.CapabilityID)
}

// catalogMessage runs one model message through the catalog controller. A message with no
// catalog call is not handled here (handled false): an answer or an effect proposal completes
// a running controller and goes on unchanged. A message with catalog reads is handled here:
// mixed with other calls, every call is refused as ambiguous and the turn stops; otherwise each
// read passes the controller's bounds, the executor's three gates, runs, and its result enters
// model context only if it fits the turn's catalog context bound. stop reports a stopped
// controller: the turn ends without another inference.
func (t *turn) catalogMessage(ctx workflow.Context, round int, calls []parse.Call) (handled, stop bool, err error) {
	n := 0
	for _, c := range calls {
		if t.isCatalogCall(c) {
			n++
		}
	}
	if n == 0 {
		if t.ctl != nil {
			t.ctl.Inferred()
			if len(calls) == 0 {
				t.ctl.Fire(catalog.EventAnswer, catalog.Correlation{}, "")
			} else {
				t.ctl.Fire(catalog.EventEffect, catalog.Correlation{}, "")
			}
		}
		return false, false, nil
	}
	if t.ctl == nil {
		t.ctl = catalog.NewController()
	}
	t.ctl.Inferred()
	refuse := func(call parse.Call, o activities.Outcome, stage activities.Stage, reason, detail string) error {
		pr := t.newProposal(round, call)
		if ref, ok := t.catalog[call.Name]; ok {
			pr.po.CapabilityID, pr.po.Version = ref.CapabilityID, ref.Version
		}
		po, err := t.verdict(ctx, pr, o, stage, reason, detail, nil)
		t.result.Outcomes = append(t.result.Outcomes, po)
		return err
	}
	if n < len(calls) {
		t.ctl.Fire(catalog.EventMixed, catalog.Correlation{}, ReasonCatalogAmbiguous)
		for _, c := range calls {
			if err := refuse(c, activities.OutcomeRejected, activities.StageCatalog, ReasonCatalogAmbiguous,
				"a message may either read the catalog or propose other calls, not both; nothing in it ran. Propose the call again on its own after reading the catalog"); err != nil {
				return true, true, err
			}
		}
		return true, true, nil
	}
	for _, call := range calls {
		switch t.ctl.State {
		case catalog.Completed:
			if err := refuse(call, activities.OutcomeRejected, activities.StageCatalog, ReasonCatalogClosed,
				"catalog discovery ended in this turn when it answered or proposed another call"); err != nil {
				return true, false, err
			}
			continue
		case catalog.Stopped:
			if err := refuse(call, activities.OutcomeRejected, activities.StageCatalog, ReasonCatalogStopped,
				"an earlier catalog read of this message stopped catalog discovery for this turn"); err != nil {
				return true, true, err
			}
			continue
		}
		if err := t.catalogRead(ctx, round, call); err != nil {
			return true, false, err
		}
	}
	return true, t.ctl.State == catalog.Stopped, nil
}

// catalogRead takes one catalog read through the controller (awaiting-inference →
// pending-read → pending-egress → awaiting-inference) and the executor; anything else stops
// the controller.
func (t *turn) catalogRead(ctx workflow.Context, round int, call parse.Call) error {
	ref := t.catalog[call.Name]
	pr := t.newProposal(round, call)
	record := func(pos []ProposalOutcome, err error) error {
		t.result.Outcomes = append(t.result.Outcomes, pos...)
		return err
	}
	if code := t.ctl.AdmitRead(ref.CapabilityID == catalog.ListID); code != "" {
		t.ctl.Fire(catalog.EventBudget, catalog.Correlation{}, code)
		pr.po.CapabilityID, pr.po.Version = ref.CapabilityID, ref.Version
		pr.early = &earlyVerdict{outcome: activities.OutcomeBudgetExhausted, stage: activities.StageBudget, reason: code,
			detail: fmt.Sprintf("a turn may make at most %d catalog reads, %d of them list pages", catalog.MaxReads, catalog.MaxPages)}
		return record(t.finalize(ctx, pr))
	}
	if err := t.admit(ctx, pr); err != nil {
		return err
	}
	if pr.early == nil && !pr.adm.Automatic {
		pr.early = &earlyVerdict{outcome: activities.OutcomeRejected, stage: activities.StageCatalog, reason: ReasonCatalogNotAutomatic,
			detail: "the authorization policy does not let this catalog read run without a human; catalog discovery runs automatic reads only"}
	}
	if pr.early != nil {
		// Not a valid allowlisted read (parse failure, a bound, a gate): the controller stops.
		t.ctl.Fire(catalog.EventRefusal, catalog.Correlation{}, pr.early.reason)
		return record(t.finalize(ctx, pr))
	}
	t.ctl.Fire(catalog.EventRead, catalog.Correlation{Workflow: t.workflowID, Principal: t.req.Principal, Seq: pr.po.Seq,
		CapabilityID: pr.adm.CapabilityID, ArgsDigest: pr.adm.ArgsDigest}, "")
	corr := t.ctl.Pending
	pr.egress = func(out *activities.ExecuteOutput) {
		if out.Outcome != activities.OutcomeExecuted || !t.ctl.Fire(catalog.EventResult, corr, "") {
			return
		}
		size := len(out.Output.Data)
		if code := t.ctl.AdmitEgress(size); code != "" {
			t.ctl.Fire(catalog.EventBudget, corr, code)
			*out = activities.ExecuteOutput{Outcome: activities.OutcomeBudgetExhausted, Reason: code, RetrievedAt: out.RetrievedAt,
				Output: registry.Output{Error: fmt.Sprintf("the result (%d bytes) would take this turn's catalog context over %d bytes; it was not given to the model", size, catalog.MaxContextBytes)}}
			return
		}
		t.ctl.Fire(catalog.EventEgress, corr, "")
	}
	err := record(t.finalize(ctx, pr))
	if t.ctl.State == catalog.PendingRead || t.ctl.State == catalog.PendingEgress {
		// The read was refused (stale_cursor, not_found, result_too_large) or failed.
		reason := pr.po.Reason
		if reason == "" {
			reason = "catalog_read_" + string(pr.po.Outcome)
			if pr.env.Error != "" {
				var r catalog.Refusal
				if data := pr.env.Data; len(data) > 0 && jsonUnmarshal(data, &r) == nil && r.Refusal != "" {
					reason = r.Refusal
				}
			}
		}
		t.ctl.Fire(catalog.EventRefusal, catalog.Correlation{}, reason)
	}
	return err
}

// catalogControl is the TurnResult view of the controller (nil when the turn never read the
// catalog).
func (t *turn) catalogControl() *CatalogControl {
	if t.ctl == nil {
		return nil
	}
	c := t.ctl
	return &CatalogControl{State: string(c.State), Reads: c.Reads, Pages: c.Pages, Rounds: c.Rounds, Bytes: c.Bytes, StopReason: c.StopReason}
}

// jsonUnmarshal decodes a capability's refusal data (a struct without maps: deterministic).
func jsonUnmarshal(b []byte, v any) error {
	return json.Unmarshal(b, v) //workflowcheck:ignore
}
