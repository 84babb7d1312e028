package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/display"
)

func newAuditCmd() *cobra.Command {
	var turn string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "audit [--turn TURN-ID]",
		Short:   "Print the audit log: one append-only row per proposal outcome and per refused confirmation",
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
				enc := json.NewEncoder(out)
				for _, r := range rows {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tTURN\t#\tOUTCOME\tCAPABILITY\tSTAGE\tREASON\tAPPROVER\tDETAIL")
			for _, r := range rows {
				capKey := ""
				if r.CapabilityID != "" {
					capKey = fmt.Sprintf("%s@%d", r.CapabilityID, r.Version)
				}
				detail := display.Visible(strings.Join(strings.Fields(r.Detail), " "))
				if r := []rune(detail); len(r) > 60 {
					detail = string(r[:57]) + "..."
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.At.Local().Format("15:04:05"), display.Visible(r.WorkflowID), r.Seq, display.Visible(r.Outcome),
					display.Visible(capKey), r.Stage, display.Visible(r.Reason), display.Visible(r.Approver), detail)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&turn, "turn", "", "only this turn's rows (a workflow id such as turn/demo/1)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per row")
	return cmd
}
