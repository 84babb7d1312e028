package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// ProposalOutcome is what became of one decision on an agent proposal.
type ProposalOutcome struct {
	// Decision is the proposal's stored decision: this one, or on a conflict the first one,
	// which stands.
	Decision store.ProposalDecision
	// Inserted is true when this decision was appended, false when the same decision was
	// already recorded (a retry converged) or on a conflict.
	Inserted bool
	// Conflict is true when the proposal already had a different decision.
	Conflict bool
	// Status is the proposal workflow's status once it applied the decision (zero when it
	// did not answer in time: the decision stays recorded and is applied when a worker runs).
	Status workflows.ProposalStatus
	// Pending is the error waiting for the application, if any (never proposal text).
	Pending error
}

// ProposalDecideFunc records and applies actor's decision (proposals.Accept, Edit or Reject;
// replacement only for an edit) on a stored proposal, attested with the page's surface
// credential. A conflict with a first, different decision is reported in the outcome, not as
// an error; an error means nothing was recorded (an untrusted chain, a bad replacement).
type ProposalDecideFunc func(ctx context.Context, row store.ProposalRow, disposition, replacement, submissionID, actor string) (ProposalOutcome, error)

// ProposalDecider is the ProposalDecideFunc of the running page: proposals.Submit (the CLI's
// path: build, attest with the surface credential, replay the chain, verify against the
// approvers file, append) then workflows.DeliverProposalDecision on taskQueue.
func ProposalDecider(c client.Client, st *store.Store, surface approvers.Credential, src *approvers.Source, taskQueue string) ProposalDecideFunc {
	return func(ctx context.Context, row store.ProposalRow, disposition, replacement, submissionID, actor string) (ProposalOutcome, error) {
		set, err := src.Current()
		if err != nil {
			return ProposalOutcome{}, err
		}
		stored, inserted, err := proposals.Submit(ctx, st, set, row, disposition, replacement, submissionID, surface, actor)
		out := ProposalOutcome{Decision: stored, Inserted: inserted}
		if errors.Is(err, store.ErrConflict) {
			out.Conflict = true
		} else if err != nil {
			return ProposalOutcome{}, err
		}
		if rc, err := st.GetReceipt(ctx, stored.ID); err == nil {
			out.Status = workflows.ProposalStatus{ProposalID: row.ID, Kind: row.Kind, State: "applied", ReceiptID: rc.ID, Receipt: rc.Kind, Reason: rc.Reason}
			return out, nil
		}
		out.Status, out.Pending = workflows.DeliverProposalDecision(ctx, c, taskQueue,
			workflows.ProposalRequest{ProposalID: row.ID, Kind: row.Kind, TurnWorkflowID: row.WorkflowID}, stored.ID)
		return out, nil
	}
}

// proposalView is one agent proposal as the page shows it: every model-controlled value
// through show (internal/display).
type proposalView struct {
	ID, Kind   string
	WorkflowID shown
	TurnLink   string
	Target     shown
	Operation  string
	Text       shown
	Reason     shown
	Editable   bool
	Broken     bool
	Decision   *store.ProposalDecision
	Actor      shown
	Receipt    string
	CSRF       string
}

type proposalsData struct {
	Pending, Decided []proposalView
	Enabled          bool
	Outcome          *proposalBanner
}

// proposalBanner is the banner shown after a decision: what became of it.
type proposalBanner struct {
	OK   bool
	Text string
}

func (s *Server) proposalView(ctx context.Context, r *http.Request, row store.ProposalRow) proposalView {
	v := proposalView{ID: row.ID, Kind: row.Kind, WorkflowID: show(row.WorkflowID, fieldLimit), TurnLink: turnLink(row.WorkflowID), CSRF: current(r).csrf}
	p, err := proposals.DecodeProposal(row.Payload)
	if err != nil {
		v.Broken = true
	} else {
		v.Reason = show(p.Reason, fieldLimit)
		v.Operation = p.Operation
		switch p.Kind {
		case proposals.KindMemory:
			if p.Memory != nil {
				v.Target = show(fmt.Sprintf("%s (document %s, version %s)", p.Memory.Path, p.Memory.DocumentID, p.Memory.VersionID), fieldLimit)
			}
			v.Text, v.Editable = show(p.ProposedText, literalLimit), true
		case proposals.KindCorrection:
			if p.Target != nil {
				v.Target = show(fmt.Sprintf("output %s of %s", p.Target.OutputID, p.Target.WorkflowID), fieldLimit)
			}
			v.Text, v.Editable = show(p.Replacement, literalLimit), true
		case proposals.KindFocus:
			v.Target = show(p.Fingerprint, fieldLimit)
			v.Text = show(string(p.Declaration), literalLimit)
		}
	}
	if d, err := s.opt.Store.GetProposalDecision(ctx, row.ID); err == nil {
		v.Decision, v.Actor = &d, show(d.Actor, fieldLimit)
		if rc, err := s.opt.Store.GetReceipt(ctx, d.ID); err == nil {
			v.Receipt = rc.Kind
			if rc.Reason != "" {
				v.Receipt += " (" + rc.Reason + ")"
			}
		}
	}
	return v
}

// proposalsPage lists agent proposals: pending ones with Accept, Edit and Reject; decided ones
// with their decision and receipt.
func (s *Server) proposalsPage(w http.ResponseWriter, r *http.Request) {
	s.renderProposals(w, r, http.StatusOK, nil)
}

func (s *Server) renderProposals(w http.ResponseWriter, r *http.Request, status int, o *proposalBanner) {
	ctx := r.Context()
	rows, err := s.opt.Store.ListProposals(ctx, "")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not read the proposals", err)
		return
	}
	d := proposalsData{Enabled: s.opt.DecideProposal != nil, Outcome: o}
	for i := len(rows) - 1; i >= 0; i-- { // newest first
		v := s.proposalView(ctx, r, rows[i])
		if v.Decision == nil {
			d.Pending = append(d.Pending, v)
		} else {
			d.Decided = append(d.Decided, v)
		}
	}
	s.render(w, r, status, "proposals", "Agent proposals", d)
}

// decideProposal records the signed-in approver's decision on one proposal (the approver is
// the session's, never a form field) and shows its outcome. An edit's replacement is the
// textarea's exact value: browsers submit every line break as CRLF, so CRLF is turned back
// into the LF the textarea held; nothing else is changed (no trimming).
func (s *Server) decideProposal(w http.ResponseWriter, r *http.Request) {
	me := current(r)
	f := r.PostForm
	if s.opt.DecideProposal == nil {
		s.fail(w, r, http.StatusServiceUnavailable, "deciding proposals is not enabled on this page", nil)
		return
	}
	row, err := s.opt.Store.GetProposal(r.Context(), f.Get("proposal_id"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "no such proposal", nil)
		return
	}
	disp, text := f.Get("disposition"), ""
	switch disp {
	case proposals.Accept, proposals.Reject:
	case proposals.Edit:
		text = strings.ReplaceAll(f.Get("replacement"), "\r\n", "\n")
	default:
		s.renderProposals(w, r, http.StatusBadRequest, &proposalBanner{Text: "Unknown decision: nothing was recorded."})
		return
	}
	if err := proposals.CheckDisposition(row.Kind, disp, text); err != nil {
		s.renderProposals(w, r, http.StatusBadRequest, &proposalBanner{Text: "Nothing was recorded: " + err.Error()})
		return
	}
	sub := "web-" + proposals.Digest([]byte(me.csrf + "\x00" + row.ID + "\x00" + disp))[:16]
	ctx, cancel := context.WithTimeout(r.Context(), s.opt.DecideTimeout)
	defer cancel()
	out, err := s.opt.DecideProposal(ctx, row, disp, text, sub, me.approver)
	if err != nil {
		s.opt.Log.Info("web: proposal decision not recorded", "proposal", row.ID, "approver", me.approver, "err", err)
		s.renderProposals(w, r, http.StatusOK, &proposalBanner{Text: "Not recorded: the proposal or the decision did not verify (see the server's log)."})
		return
	}
	s.renderProposals(w, r, http.StatusOK, proposalOutcomeText(row.ID, out))
}

// proposalOutcomeText says what became of a proposal decision, for the approver.
func proposalOutcomeText(id string, out ProposalOutcome) *proposalBanner {
	d := out.Decision
	var b strings.Builder
	switch {
	case out.Conflict:
		fmt.Fprintf(&b, "Conflict: %s already has another decision (%s by %s, %s); it stands and yours was not recorded.", id, d.Disposition, display1(d.Actor), d.ID)
	case out.Inserted:
		fmt.Fprintf(&b, "Recorded: %s %s by %s (%s).", id, pastTense(d.Disposition), display1(d.Actor), d.ID)
	default:
		fmt.Fprintf(&b, "Converged: the same decision (%s) was already recorded for %s.", pastTense(d.Disposition), id)
	}
	ok := !out.Conflict
	switch {
	case out.Status.Receipt != "":
		fmt.Fprintf(&b, " Receipt %s: %s", out.Status.ReceiptID, out.Status.Receipt)
		if out.Status.Reason != "" {
			fmt.Fprintf(&b, " (%s)", out.Status.Reason)
		}
		b.WriteString(".")
	case out.Pending != nil:
		b.WriteString(" Not applied yet (no answer from the proposal's workflow in time; is a worker running?): it is applied when a worker runs.")
	}
	return &proposalBanner{OK: ok, Text: b.String()}
}

func display1(s string) string { return show(s, fieldLimit).Text }

func pastTense(disp string) string {
	switch disp {
	case proposals.Accept:
		return "accepted"
	case proposals.Reject:
		return "rejected"
	case proposals.Edit:
		return "edited"
	}
	return disp
}
