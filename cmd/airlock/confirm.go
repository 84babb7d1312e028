package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

func approverName(flag string) string {
	if flag != "" {
		return flag
	}
	if u := os.Getenv("AIRLOCK_APPROVER"); u != "" {
		return u
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}

func newPendingCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "pending",
		Short:   "List confirmations waiting for a human decision (never shows tokens)",
		Example: "  airlock pending\n  AIRLOCK_DATABASE_URL=postgres://… airlock pending",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			st, err := openExistingStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			rows, err := st.ListPendingConfirmations(ctx, time.Now())
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				fmt.Fprintln(out, "no pending confirmations")
				return nil
			}
			for _, r := range rows {
				printPending(out, workflows.PendingConfirmation{ConfirmationID: r.ID, WorkflowID: r.WorkflowID, Seq: r.Seq, CallID: r.CallID,
					CapabilityID: r.CapabilityID, Version: r.Version, ToolName: toolOf(r.Display), Arguments: r.Arguments, ExpiresAt: r.ExpiresAt})
			}
			return nil
		},
	}
}

func toolOf(display string) string {
	for i, ch := range display {
		if ch == ' ' {
			return display[:i]
		}
	}
	return display
}

func newApproveCmd() *cobra.Command {
	var approver string
	cmd := &cobra.Command{
		Use:   "approve CONFIRMATION-ID",
		Short: "Approve a pending confirmation: the call runs once, with exactly the arguments shown",
		Long: `Approve a pending confirmation. The approver surface opens the confirmation's sealed token
with the approver key and signals the turn; the workflow consumes the token (single use) and
checks it is bound to this turn, proposal, capability and argument digest before executing.`,
		Example: "  airlock approve cf-1a2b3c4d5e6f70819203 --approver alice",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return decideCmd(cmd, args[0], workflows.DecisionApprove, approver, "")
		},
	}
	cmd.Flags().StringVar(&approver, "approver", "", "approver identity recorded in the audit (default $AIRLOCK_APPROVER or $USER)")
	return cmd
}

func newDenyCmd() *cobra.Command {
	var approver, reason string
	cmd := &cobra.Command{
		Use:     "deny CONFIRMATION-ID --reason R",
		Short:   "Deny a pending confirmation: the call never runs and is not retried",
		Example: `  airlock deny cf-1a2b3c4d5e6f70819203 --reason "not our account"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return errors.New("--reason is required: it is shown to the model and kept in the audit")
			}
			return decideCmd(cmd, args[0], workflows.DecisionDeny, approver, reason)
		},
	}
	cmd.Flags().StringVar(&approver, "approver", "", "approver identity recorded in the audit (default $AIRLOCK_APPROVER or $USER)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the call is denied (required)")
	return cmd
}

func decideCmd(cmd *cobra.Command, id, decision, approver, reason string) error {
	ctx := cmd.Context()
	st, err := openExistingStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := config.DialTemporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return sendDecision(ctx, cmd.OutOrStdout(), c, st, id, decision, approverName(approver), reason)
}

// sendDecision opens the sealed token of confirmation id and signals its turn, then waits
// briefly for the workflow to record the decision.
func sendDecision(ctx context.Context, out io.Writer, c client.Client, st *store.Store, id, decision, approver, reason string) error {
	row, err := st.GetConfirmation(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no confirmation %s (see airlock pending)", id)
	} else if err != nil {
		return err
	}
	if row.Decision != "" {
		return fmt.Errorf("confirmation %s is already %s", id, row.Decision)
	}
	if !time.Now().Before(row.ExpiresAt) {
		return fmt.Errorf("confirmation %s expired at %s", id, row.ExpiresAt.Local().Format(time.RFC3339))
	}
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		return err
	}
	tok, err := token.Open(key, row.SealedToken, id)
	if err != nil {
		return fmt.Errorf("open the token of %s with the approver key %s: %w", id, cfg.KeyFile(), err)
	}
	err = c.SignalWorkflow(ctx, row.WorkflowID, row.RunID, workflows.SignalConfirmation, workflows.ConfirmationSignal{
		ConfirmationID: id, Decision: decision, Token: tok, Approver: approver, Reason: reason})
	if err != nil {
		return fmt.Errorf("signal turn %s: %w", row.WorkflowID, err)
	}
	before, err := st.ListAudit(ctx, row.WorkflowID)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r, err := st.GetConfirmation(ctx, id)
		if err == nil && r.Decision != "" {
			fmt.Fprintf(out, "%s: %s by %s\n", id, r.Decision, approver)
			return nil
		}
		// The workflow refuses a decision it cannot accept and audits why.
		if rows, err := st.ListAudit(ctx, row.WorkflowID); err == nil {
			for _, a := range rows[min(len(before), len(rows)):] {
				if a.Outcome == "confirmation_refused" && a.Seq == row.Seq && a.Approver == approver {
					return fmt.Errorf("the turn refused the %s of %s: %s (%s)", decision, id, a.Reason, a.Detail)
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "%s: %s sent to %s; the turn has not recorded it yet (is a worker running?)\n", id, decision, row.WorkflowID)
	return nil
}
