package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/proposals"
)

func newExportCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "export", Short: "Export data sets from the store"}
	var output string
	var ack bool
	pt := &cobra.Command{Use: "private-training --output FILE --acknowledge-sensitive-private-training",
		Short: "Export human-authorized judgments with their complete provenance chain (sensitive)",
		Long: `Write every judgment whose complete provenance chain verifies (judgment, the human
decision it projects, the proposal and proposer turn, the context snapshot and its binding,
the corrected output) to FILE, one JSON record a line, and a manifest beside it
(FILE.manifest.json: counts, the export's SHA-256, each excluded judgment with a reason code).
A judgment with any link missing is excluded, never guessed. Both files are owner-only (0600)
and written atomically. The export holds private conversation text: it is never written to
standard output, and the command refuses to run without --acknowledge-sensitive-private-training.
Prints counts and file names only.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !ack {
				return errors.New("export private-training: the export holds private conversation text; pass --acknowledge-sensitive-private-training")
			}
			if output == "" {
				return errors.New("export private-training: --output FILE is required (never standard output)")
			}
			set, err := approvers.Load(cfg.ApproversPath())
			if err != nil {
				return fmt.Errorf("export private-training: approvers file (decisions are verified against it): %w", err)
			}
			st, err := openExistingStore(c.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			data, m, err := proposals.BuildPrivateTraining(c.Context(), st, set, time.Now())
			if err != nil {
				return err
			}
			if err := proposals.WritePrivateTraining(output, data, m); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "exported %d of %d judgments to %s (sha256 %s); excluded %d; manifest %s\n",
				m.Included, m.Judgments, output, m.SHA256, m.Excluded, proposals.ManifestPath(output))
			return nil
		}}
	pt.Flags().StringVar(&output, "output", "", "export file (never standard output); the manifest is FILE.manifest.json")
	pt.Flags().BoolVar(&ack, "acknowledge-sensitive-private-training", false, "acknowledge the export holds private conversation text")
	cmd.AddCommand(pt)
	return cmd
}
