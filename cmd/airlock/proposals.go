package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// maxEditFileBytes bounds an edit file (the largest replacement is 32,768 characters).
const maxEditFileBytes = 4 * 32768

func newProposalsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "proposals", Short: "Agent proposals: list, decide (accept, edit from a file, reject), project"}
	var turn string
	list := &cobra.Command{Use: "list", Short: "List captured proposals (ids, kinds and status; never their text)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			st, err := openExistingStore(c.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			rows, err := st.ListProposals(c.Context(), turn)
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				fmt.Fprintln(c.OutOrStdout(), "no agent proposals")
				return nil
			}
			for _, r := range rows {
				status := "pending"
				if d, err := st.GetProposalDecision(c.Context(), r.ID); err == nil {
					status = d.Disposition + " by " + display.Line(d.Actor)
					if rc, err := st.GetReceipt(c.Context(), d.ID); err == nil {
						status += "; " + rc.Kind
						if rc.Reason != "" {
							status += " (" + display.Line(rc.Reason) + ")"
						}
					} else {
						status += "; not yet applied (airlock proposals project " + r.ID + ")"
					}
				}
				// The turn id holds a client-chosen conversation id and the receipt reason is
				// the projection target's: both are shown through display.
				fmt.Fprintf(c.OutOrStdout(), "%s\t%s\t%s\t%s\n", display.Visible(r.ID), display.Visible(string(r.Kind)), display.Line(r.WorkflowID), display.Visible(status))
			}
			return nil
		}}
	list.Flags().StringVar(&turn, "turn", "", "only the proposals of this turn workflow id")

	var accept, reject bool
	var editFile, credFlag, submission string
	decide := &cobra.Command{Use: "decide PROPOSAL_ID (--accept | --reject | --edit-file FILE)", Short: "Append your decision on a proposal and apply it",
		Long: `Append your one decision on a proposal (attested with your approver credential) and signal
its workflow, which applies it: a correction becomes a judgment, a memory change is materialized.
An edit's replacement is read from a file, never from the command line. The same decision
retried converges; a different decision on a decided proposal is refused (it never supersedes
the first). Prints ids and status only.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			disp, text := "", ""
			switch {
			case accept && !reject && editFile == "":
				disp = proposals.Accept
			case reject && !accept && editFile == "":
				disp = proposals.Reject
			case editFile != "" && !accept && !reject:
				disp = proposals.Edit
				f, err := os.Open(editFile)
				if err != nil {
					return err
				}
				b, err := io.ReadAll(io.LimitReader(f, maxEditFileBytes+1))
				f.Close()
				if err != nil {
					return err
				}
				if len(b) > maxEditFileBytes || !utf8.Valid(b) {
					return fmt.Errorf("%s is too large or not UTF-8", editFile)
				}
				text = string(b)
			default:
				return errors.New("give exactly one of --accept, --reject, --edit-file FILE")
			}
			cred, actor, err := loadCredential(credFlag)
			if err != nil {
				return err
			}
			st, err := openExistingStore(c.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			row, err := st.GetProposal(c.Context(), args[0])
			if err != nil {
				return err
			}
			if submission == "" {
				submission = "cli-" + proposals.Digest([]byte(fmt.Sprint(os.Getpid(), args[0], disp)))[:16]
			}
			set, err := approvers.Load(cfg.ApproversPath())
			if err != nil {
				return err
			}
			stored, inserted, err := proposals.Submit(c.Context(), st, set, row, disp, text, submission, cred, actor)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "decision %s on %s: %s (%s)\n", stored.ID, row.ID, stored.Disposition, map[bool]string{true: "appended", false: "already recorded"}[inserted])
			return project(c.Context(), c.OutOrStdout(), st, row, stored)
		}}
	decide.Flags().BoolVar(&accept, "accept", false, "accept the proposed text or correction")
	decide.Flags().BoolVar(&reject, "reject", false, "reject it (no replacement)")
	decide.Flags().StringVar(&editFile, "edit-file", "", "edit: use this file's exact contents as the replacement")
	decide.Flags().StringVar(&credFlag, "credential", "", "approver credential file (AIRLOCK_CREDENTIAL)")
	decide.Flags().StringVar(&submission, "submission", "", "submission id (provenance; default derived)")

	proj := &cobra.Command{Use: "project PROPOSAL_ID", Short: "Apply a decision left between its append and its application", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			st, err := openExistingStore(c.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			row, err := st.GetProposal(c.Context(), args[0])
			if err != nil {
				return err
			}
			d, err := st.GetProposalDecision(c.Context(), row.ID)
			if err != nil {
				return err
			}
			return project(c.Context(), c.OutOrStdout(), st, row, d)
		}}
	cmd.AddCommand(list, decide, proj)
	return cmd
}

// project signals (starting it if needed) the proposal's workflow with decision d and waits
// for its receipt; a decision with a receipt already is only reported.
func project(ctx context.Context, w io.Writer, st *store.Store, row store.ProposalRow, d store.ProposalDecision) error {
	if rc, err := st.GetReceipt(ctx, d.ID); err == nil {
		fmt.Fprintf(w, "receipt %s: %s %s\n", display.Visible(rc.ID), display.Visible(rc.Kind), display.Line(rc.Reason))
		return nil
	}
	c, err := config.DialTemporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := workflows.DeliverProposalDecision(wctx, c, cfg.TaskQueue,
		workflows.ProposalRequest{ProposalID: row.ID, Kind: row.Kind, TurnWorkflowID: row.WorkflowID}, d.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "receipt %s: %s %s\n", display.Visible(s.ReceiptID), display.Visible(string(s.Receipt)), display.Line(s.Reason))
	return nil
}
