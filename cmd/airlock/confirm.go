package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
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

func newEditCmd() *cobra.Command {
	var approver, arguments string
	cmd := &cobra.Command{
		Use:   "edit CONFIRMATION-ID --args JSON",
		Short: "Deny a pending call and run it with your own arguments instead, as a new proposal",
		Long: `Edit a pending confirmation. The proposal shown is never changed: it is denied with reason
edited_by_approver, and the turn goes on with exactly the arguments given here as a new proposal of
the same tool, recorded as approver-originated. It passes resolve, validate and policy again (invalid
arguments are rejected and nothing runs); the edit, whose signature binds these arguments, is its
confirmation. The audit keeps both argument digests.`,
		Example: `  airlock edit cf-1a2b3c4d5e6f70819203 --args '{"to":"acct-1","amount":5}'`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if arguments == "" {
				return errors.New("--args is required: the JSON object of arguments to run instead")
			}
			return decideCmd(cmd, args[0], workflows.DecisionEdit, approver, "", json.RawMessage(arguments))
		},
	}
	cmd.Flags().StringVar(&approver, "approver", "", "approver identity recorded in the audit (default $AIRLOCK_APPROVER or $USER)")
	cmd.Flags().StringVar(&arguments, "args", "", "the arguments to run instead, a JSON object (required)")
	return cmd
}

func decideCmd(cmd *cobra.Command, id, decision, approver, reason string, edited ...json.RawMessage) error {
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
	return sendDecision(ctx, cmd.OutOrStdout(), c, st, id, decision, approverName(approver), reason, edited...)
}

// sendDecision signs the decision on confirmation id with its token (opened with the approver
// key; the token itself is never sent), delivers it as the turn's confirmation signal and
// waits up to 10 s for the turn's verdict. Only a decision that decided the proposal prints
// success; a decision that lost to another approver's, was refused, or was not judged in time
// is an error that says so.
func sendDecision(ctx context.Context, out io.Writer, c client.Client, st *store.Store, id, decision, approver, reason string, edited ...json.RawMessage) error {
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		return err
	}
	req := approval.Request{ConfirmationID: id, Decision: decision, Approver: approver, Reason: reason}
	if len(edited) > 0 {
		req.Arguments = edited[0]
	}
	var ref *approval.RefusedError
	for attempt := 1; ; attempt++ {
		d, err := approval.Send(ctx, c, st, key, req)
		var np *approval.NotPendingError
		switch {
		case errors.As(err, &np) && np.Detail == "no such confirmation":
			return fmt.Errorf("no confirmation %s (see airlock pending)", id)
		case errors.Is(err, token.ErrSealed):
			return fmt.Errorf("open the token of %s with the approver key %s: %w", id, cfg.KeyFile(), err)
		case err != nil:
			return err
		}
		err = approval.Wait(ctx, st, d, 10*time.Second)
		// A presentation by someone else replaced the token this decision was signed with:
		// sign with the fresh one and send once more.
		if attempt == 1 && errors.As(err, &ref) && ref.Code == activities.DecisionMACInvalid && ref.Reissued {
			fmt.Fprintf(out, "%s: the token was replaced while the decision was on its way; signing again\n", id)
			continue
		}
		return decisionOutcome(ctx, out, st, id, decision, approver, err)
	}
}

// decisionOutcome reports what became of a sent decision (approval.Wait's err).
func decisionOutcome(ctx context.Context, out io.Writer, st *store.Store, id, decision, approver string, err error) error {
	var ref *approval.RefusedError
	switch {
	case err == nil:
		fmt.Fprintf(out, "%s: %s by %s\n", id, pastTense(decision), approver)
		return nil
	case errors.Is(err, approval.ErrNoVerdict):
		wf := "its turn"
		if r, gerr := st.GetConfirmation(ctx, id); gerr == nil {
			wf = r.WorkflowID
		}
		return fmt.Errorf("%s: the %s was delivered to %s but the turn has not judged it within 10 s (is a worker running?); "+
			"it stays in the turn's history and is judged when a worker resumes the turn (airlock turn show)", id, decision, wf)
	case errors.As(err, &ref) && ref.Reissued:
		return fmt.Errorf("%w; the proposal is still pending with a fresh token: decide again", err)
	}
	return err
}

func pastTense(decision string) string {
	switch decision {
	case workflows.DecisionApprove:
		return store.DecisionApproved
	case workflows.DecisionEdit:
		return "edited (the edited call runs as a new proposal)"
	}
	return store.DecisionDenied
}
