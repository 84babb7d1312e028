package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/display"
)

func newAuditCmd() *cobra.Command {
	var turn string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "audit [--turn TURN-ID]",
		Short:   "Print the audit log: one append-only row per proposal outcome, per confirmation put to people and per refused or counted decision",
		Example: "  airlock audit --turn turn/demo/1\n  airlock audit --json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			st, err := openExistingStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			rows, err := st.ListAudit(ctx, turn)
			if err != nil {
				return err
			}
			if asJSON {
				for _, r := range rows {
					b, err := json.Marshal(r)
					if err != nil {
						return err
					}
					if _, err := fmt.Fprintf(out, "%s\n", display.JSON(b)); err != nil {
						return err
					}
				}
				return nil
			}
			if turn != "" {
				// Who asked (issue 21): the requester the worker proved, or that none was.
				if rq, err := st.GetRequester(ctx, turn, ""); err == nil {
					fmt.Fprintf(out, "requester: %s, attested by client %s (turn started %s)\n", display.Visible(rq.Principal), display.Visible(rq.Client), rq.At.Local().Format(time.DateTime))
				} else {
					fmt.Fprintln(out, "requester: none attested")
				}
				if cs, err := st.ListTurnConfirmations(ctx, turn); err == nil {
					for _, c := range cs {
						if c.Decision != "" && c.Approver != "" {
							fmt.Fprintf(out, "decision:  %s %s by %s (%s)\n", display.Visible(c.ID), c.Decision, display.Visible(c.Approver), display.Visible(orNone(c.ApproverProof)))
						}
					}
				}
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tTURN\t#\tOUTCOME\tCAPABILITY\tSTAGE\tREASON\tAPPROVER\tDETAIL\tFLAGS")
			cut := false
			for _, r := range rows {
				capKey := ""
				if r.CapabilityID != "" {
					capKey = fmt.Sprintf("%s@%d", r.CapabilityID, r.Version)
				}
				// Every column a model, a recording or a decision sender could write is shown
				// visibly; FLAGS says which were altered to be shown or cut.
				var flags []display.Flag
				show := func(s string) string {
					flags = display.Union(flags, display.CharFlags(s))
					return display.Visible(s)
				}
				detail := display.OneLine(r.Detail)
				if dv := display.Show(detail, auditDetailLimit); dv.Has(display.FlagTruncated) {
					flags, cut = display.Union(flags, []display.Flag{display.FlagTruncated}), true
					show(detail)
					detail = display.Summary(detail, auditDetailLimit)
				} else {
					detail = show(detail)
				}
				line := fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s", r.At.Local().Format("15:04:05"), show(r.WorkflowID), r.Seq, show(r.Outcome),
					show(capKey), show(string(r.Stage)), show(r.Reason), show(r.Approver), detail)
				fmt.Fprintf(tw, "%s\t%s\n", line, flagNames(flags))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if cut {
				fmt.Fprintln(out, "(a truncated detail is shown in full by `airlock audit --json`)")
			}
			return nil
		},
	}
	addReceiptCmds(cmd)
	cmd.Flags().StringVar(&turn, "turn", "", "only this turn's rows (a workflow id such as turn/demo/1)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per row")
	return cmd
}

// auditDetailLimit bounds the DETAIL column of `airlock audit`, in runes.
const auditDetailLimit = 60

// flagNames is flags as a comma list ("" for none), for a table column.
func flagNames(flags []display.Flag) string {
	names := make([]string, len(flags))
	for i, f := range flags {
		names[i] = string(f)
	}
	return strings.Join(names, ",")
}

func orNone(s string) string {
	if s == "" {
		return "proof not recorded"
	}
	return s
}
