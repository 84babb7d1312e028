package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/present"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// loadCredential reads the CLI approver's credential (--credential, AIRLOCK_CREDENTIAL or
// ~/.config/airlock/credential.json): the approver identity of approve and deny is its owner's,
// never a typed name.
func loadCredential(flag string) (approvers.Credential, string, error) {
	path := flag
	if path == "" {
		path = cfg.CredentialPath()
	}
	cred, err := approvers.LoadCredential(path)
	if errors.Is(err, fs.ErrNotExist) {
		hint := ""
		if found, _ := filepath.Glob(filepath.Join(cfg.CredentialsDir(), "*.json")); len(found) > 0 {
			// e.g. make run's demo approver: name what exists instead of only how to create one.
			hint = fmt.Sprintf(" (credentials under %s: %s)", cfg.CredentialsDir(), strings.Join(found, ", "))
		}
		return cred, "", fmt.Errorf("no approver credential at %s: pass yours with --credential PATH or AIRLOCK_CREDENTIAL%s; "+
			"an administrator creates one with `airlock approvers add NAME`: %w", path, hint, err)
	}
	if err != nil {
		return cred, "", err
	}
	name, ok := strings.CutPrefix(cred.Signer, "approver:")
	if !ok || !approvers.NamePattern.MatchString(name) {
		return cred, "", fmt.Errorf("%s is not an approver credential (signer %s)", path, display.Visible(cred.Signer))
	}
	return cred, name, nil
}

// DefaultPendingLimit is how many confirmations `airlock pending` prints unless --limit says
// otherwise: a queue of thousands should not scroll past the terminal.
const DefaultPendingLimit = 50

func newPendingCmd() *cobra.Command {
	var full, asJSON bool
	var max int
	cmd := &cobra.Command{
		Use:     "pending",
		Short:   "List confirmations waiting for a human decision (never shows tokens)",
		Example: "  airlock pending\n  AIRLOCK_DATABASE_URL=postgres://… airlock pending",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if max < 0 {
				return fmt.Errorf("--limit %d: give a number of confirmations, or 0 for all", max)
			}
			st, err := openExistingStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			rows, err := st.ListPendingConfirmations(ctx, time.Now())
			if err != nil {
				return err
			}
			if len(rows) == 0 && !asJSON {
				fmt.Fprintln(out, "no pending confirmations")
				return nil
			}
			limit := 0
			if full {
				limit = -1
			}
			shown := rows
			if max > 0 && len(rows) > max {
				shown = rows[:max]
			}
			// Every surface presents a confirmation the same way (presentation, built by
			// approval.Present from the row, its requester, votes and outcome). Rows issued
			// before the quorum was stored read the policy this configuration serves.
			reg, _ := workers.LoadRegistry(cfg, nil, nil)
			now := time.Now()
			var list []presentation.Confirmation
			for _, r := range shown {
				in := present.Input(r)
				in.Now, in.Limit = now, cliLimit(limit)
				if in.Quorum == 0 && reg != nil {
					if pe, ok := reg.Policy().Entry(fmt.Sprintf("%s@%d", r.CapabilityID, r.Version)); ok {
						in.Quorum = pe.Approvals()
					}
				}
				if err := present.Gather(ctx, st, r, &in); err != nil {
					return err
				}
				list = append(list, presentation.Build(in))
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(PendingList{Schema: PendingSchema, Confirmations: list, Total: len(rows)})
			}
			for _, c := range list {
				printPresentation(out, c, limit)
			}
			if len(shown) < len(rows) {
				fmt.Fprintf(out, "showing %d of %d pending confirmations (--limit 0 shows all; the approver page pages through them)\n", len(shown), len(rows))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "show every argument value whole (long values are cut by default)")
	cmd.Flags().IntVar(&max, "limit", DefaultPendingLimit, "print at most this many confirmations, oldest first (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the confirmations as JSON ({\"schema\": \"airlock.pending.v1\", \"confirmations\": [presentation…], \"total\": N})")
	return cmd
}

// PendingSchema names the shape of `airlock pending --json`.
const PendingSchema = "airlock.pending.v1"

// PendingList is `airlock pending --json`: the confirmations shown (each the canonical
// presentation.Confirmation, the same object the application API and the webhook notices
// carry) and how many are pending in all.
type PendingList struct {
	Schema        string                      `json:"schema"`
	Confirmations []presentation.Confirmation `json:"confirmations"`
	Total         int                         `json:"total"`
}

// decisionFlags are the flags approve and deny share.
type decisionFlags struct {
	credential, removedApprover string
}

func (f *decisionFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.credential, "credential", "", "approver credential file (AIRLOCK_CREDENTIAL; default ~/.config/airlock/credential.json); its owner is the approver")
	cmd.Flags().StringVar(&f.removedApprover, "approver", "", "removed: the approver is the credential's owner")
	_ = cmd.Flags().MarkHidden("approver")
}

func (f *decisionFlags) check() error {
	if f.removedApprover != "" {
		return errors.New("--approver was removed: a typed name proves nothing. The approver is the owner of the credential " +
			"(--credential PATH or AIRLOCK_CREDENTIAL), created by `airlock approvers add NAME`")
	}
	return nil
}

func newApproveCmd() *cobra.Command {
	var f decisionFlags
	var rep repeatGrant
	cmd := &cobra.Command{
		Use:   "approve CONFIRMATION-ID",
		Short: "Approve a pending confirmation: the call runs once, with exactly the arguments shown",
		Long: `Approve a pending confirmation. The approver surface opens the confirmation's sealed token
with the approver key, signs the decision with it (the token never leaves this process) and
attests it with your approver credential; the worker checks the credential against the
approvers file, consumes the token (single use) and checks it is bound to this turn, proposal,
capability and argument digest before executing. Four-eyes rules compare the credential's
owner with the turn's requesting principal.

--repeat N --repeat-minutes T also approves the next N calls of the same capability with the
same arguments (same digest), by the same principal in the same conversation, within T minutes
(a repeat grant, issue 37: N at most 20, T at most 60). Each later call still passes resolve,
validate and policy, runs at most once, and is audited as run under your grant with the uses
left; a registry or policy change voids the grant. A call that needs more than one approval
takes no grant: the approval is refused (repeat_grant_refused) and the call keeps waiting.`,
		Example: "  airlock approve cf-1a2b3c4d5e6f70819203\n  AIRLOCK_CREDENTIAL=~/alice.json airlock approve cf-1a2b3c4d5e6f70819203\n  airlock approve cf-1a2b3c4d5e6f70819203 --repeat 3 --repeat-minutes 15",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if err := rep.check(); err != nil {
				return err
			}
			return decideCmd(cmd, args[0], workflows.DecisionApprove, f.credential, "", rep)
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&rep.Count, "repeat", 0, fmt.Sprintf("also approve the next N identical calls (1-%d; 0: none)", activities.MaxRepeatCalls))
	cmd.Flags().IntVar(&rep.Minutes, "repeat-minutes", 0, fmt.Sprintf("how long the repeat grant lasts, in minutes (1-%d; required with --repeat)", activities.MaxRepeatMinutes))
	return cmd
}

// repeatGrant is `airlock approve --repeat N --repeat-minutes T` (issue 37, item 4).
type repeatGrant struct{ Count, Minutes int }

// check refuses a repeat grant out of its bounds before anything is signed.
func (r repeatGrant) check() error {
	if r.Count == 0 && r.Minutes == 0 {
		return nil
	}
	if r.Count < 1 || r.Count > activities.MaxRepeatCalls || r.Minutes < 1 || r.Minutes > activities.MaxRepeatMinutes {
		return fmt.Errorf("--repeat takes 1 to %d calls and --repeat-minutes 1 to %d minutes, both together", activities.MaxRepeatCalls, activities.MaxRepeatMinutes)
	}
	return nil
}

func newDenyCmd() *cobra.Command {
	var f decisionFlags
	var reason string
	cmd := &cobra.Command{
		Use:     "deny CONFIRMATION-ID --reason R",
		Short:   "Deny a pending confirmation: the call never runs and is not retried",
		Example: `  airlock deny cf-1a2b3c4d5e6f70819203 --reason "not our account"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if reason == "" {
				return errors.New("--reason is required: the model is told why its call was denied")
			}
			return decideCmd(cmd, args[0], workflows.DecisionDeny, f.credential, reason, repeatGrant{})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why the call is denied (required)")
	return cmd
}

func newEditCmd() *cobra.Command {
	var f decisionFlags
	var arguments string
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
			if err := f.check(); err != nil {
				return err
			}
			if arguments == "" {
				return errors.New("--args is required: the JSON object of arguments to run instead")
			}
			return decideCmd(cmd, args[0], workflows.DecisionEdit, f.credential, "", repeatGrant{}, json.RawMessage(arguments))
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&arguments, "args", "", "the arguments to run instead, a JSON object (required)")
	return cmd
}

func decideCmd(cmd *cobra.Command, id, decision, credential, reason string, rep repeatGrant, edited ...json.RawMessage) error {
	ctx := cmd.Context()
	st, err := openExistingStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	cred, approver, err := loadCredential(credential)
	if err != nil {
		return err
	}
	c, err := config.DialTemporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return sendDecision(ctx, cmd.OutOrStdout(), c, st, id, decision, approver, cred, reason, rep, edited...)
}

// sendDecision signs the decision on confirmation id with its token (opened with the approver
// key; the token itself is never sent), delivers it as the turn's confirmation signal and
// waits up to 10 s for the turn's verdict. Only a decision that decided the proposal prints
// success; a decision that lost to another approver's, was refused, or was not judged in time
// is an error that says so.
func sendDecision(ctx context.Context, out io.Writer, c client.Client, st *store.Store, id, decision, approver string, cred approvers.Credential, reason string, rep repeatGrant, edited ...json.RawMessage) error {
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		return err
	}
	req := approval.Request{ConfirmationID: id, Decision: decision, Approver: approver, Reason: reason, Signer: cred,
		RepeatCount: rep.Count, RepeatMinutes: rep.Minutes}
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
	case errors.As(err, &ref) && ref.Code == activities.QuorumPending:
		// The approval counts towards the capability's quorum (issue 21); the call waits for
		// other approvers, so this is not a failure of this approver's.
		fmt.Fprintf(out, "%s: approval by %s recorded: %s\n", id, approver, display.Line(ref.Detail))
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
