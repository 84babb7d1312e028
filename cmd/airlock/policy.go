package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/eval"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Cedar policies: print the schema, check a policy, convert the JSON policy, diff a candidate",
		Long: `Airlock's stage 3 may be decided by a Cedar policy (AIRLOCK_CEDAR_POLICY, a *.cedar file; issue 37):
permit runs a call without a human, forbid refuses it with the policy's @reason, no decision asks
(Airlock's argument-bound confirmation, decided by the groups and quorum the matching @ask rules
name). The JSON policy still decides who may call what (grants). A candidate policy runs in shadow
with AIRLOCK_CEDAR_SHADOW (*.shadow.cedar): its would-be decision on every call is recorded in the
audit (policy_shadow rows) and never acted on.`,
	}
	cmd.AddCommand(newPolicySchemaCmd(), newPolicyCheckCmd(), newPolicyConvertCmd(), newPolicyDiffCmd())
	return cmd
}

func newPolicySchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the Cedar schema generated from the registry a worker would load (layers included)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := cfg
			c.CedarFile, c.CedarShadowFile = "", ""
			reg, err := workers.LoadRegistry(c, nil, nil)
			if err != nil {
				return err
			}
			s, err := reg.CedarSchema()
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), s)
			return err
		},
	}
}

func newPolicyCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "check FILE.cedar",
		Short:   "Load a Cedar policy with the registry as a worker would; print every problem",
		Example: "  airlock policy check team.cedar\n  AIRLOCK_REGISTRY_LAYERS=agentdojo-banking airlock policy check registry/policies/agentdojo-banking.cedar",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := cfg
			c.CedarFile = args[0]
			reg, err := workers.LoadRegistry(c, nil, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d policies, groups %v, digest %s: loads\n", args[0], reg.Cedar().Len(), reg.Cedar().Groups(), reg.Cedar().Digest())
			return nil
		},
	}
}

func newPolicyConvertCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "convert [--out FILE.cedar]",
		Short: "Write the JSON authorization policy (AIRLOCK_POLICY and the layers') as the equivalent Cedar",
		Long: `Load the registry and its JSON policy as a worker would and write the Cedar policy that decides
as the JSON autonomy does: automatic is a permit, automatic-when-user-provided a permit when
every leaving value is the user's, confirm an @ask rule with the entry's groups and quorum, deny
a forbid. Grants stay in the JSON sidecar (it still gates who may call what).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := cfg
			c.CedarFile, c.CedarShadowFile = "", ""
			reg, err := workers.LoadRegistry(c, nil, nil)
			if err != nil {
				return err
			}
			text := registry.ConvertPolicy(reg.Policy(), reg.Capabilities())
			if out == "" {
				_, err = io.WriteString(cmd.OutOrStdout(), text)
				return err
			}
			return os.WriteFile(out, []byte(text), 0o644)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write to FILE (default stdout)")
	return cmd
}

func newPolicyDiffCmd() *cobra.Command {
	var candidate, live, suites string
	var fromAudit, fromCorpus, asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "diff --candidate FILE|DIR [--audit] [--corpus]",
		Short: "Replay past calls (the audit's shadow rows, the evaluation corpora) through a candidate policy and list what would change",
		Long: `--audit replays the calls recorded in the audit while a shadow policy ran (policy_shadow rows
hold each call's facts: arguments, provenance, destination, turn facts) through the candidate
and lists every call whose decision would change from the one the live policy made.

--corpus replays every recorded call of the AgentDojo corpus (AIRLOCK_CORPUS) statically: each
call's provenance is computed from the recording's context before it, and the live policy (the
suite's JSON policy, plus --live DIR's <suite>.cedar when given) and the candidate
(--candidate DIR/<suite>.cedar; "shipped" for registry/policies/agentdojo-<suite>.cedar) decide
it. Per suite it prints benign holds per task under both, and the consequential and injected
calls the candidate would run without a human.`,
		Example: "  airlock policy diff --corpus --candidate shipped\n  airlock policy diff --audit --candidate team-next.cedar",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if candidate == "" {
				return errors.New("policy diff: --candidate is required")
			}
			if !fromAudit && !fromCorpus {
				fromCorpus = true
			}
			out := cmd.OutOrStdout()
			if fromAudit {
				if err := diffAudit(cmd.Context(), out, candidate, limit); err != nil {
					return err
				}
			}
			if fromCorpus {
				return diffCorpus(out, candidate, live, suites, asJSON)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&candidate, "candidate", "", "candidate Cedar policy: a *.cedar file (--audit), a folder of <suite>.cedar or \"shipped\" (--corpus)")
	f.StringVar(&live, "live", "", "--corpus: a folder of <suite>.cedar live policies, or \"shipped\" (default: the suites' JSON policy alone)")
	f.StringVar(&suites, "suites", "", "--corpus: one suite (default all)")
	f.BoolVar(&fromAudit, "audit", false, "replay the audit's policy_shadow rows")
	f.BoolVar(&fromCorpus, "corpus", false, "replay the AgentDojo corpus (default when --audit is not given)")
	f.BoolVar(&asJSON, "json", false, "--corpus: print the report as JSON")
	f.IntVar(&limit, "limit", 10000, "--audit: the newest rows to replay")
	return cmd
}

// suitePolicy reads <suite>.cedar from dir, or the shipped policy for "shipped" ("": none).
func suitePolicy(dir string) eval.SuitePolicy {
	if dir == "" {
		return nil
	}
	return func(suite string) ([]byte, error) {
		if dir == "shipped" {
			src, ok := registry.LayerCedar("agentdojo-" + suite)
			if !ok {
				return nil, fmt.Errorf("policy diff: no shipped Cedar policy for suite %s", suite)
			}
			return src.Data, nil
		}
		for _, name := range []string{suite + ".cedar", "agentdojo-" + suite + ".cedar"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err == nil {
				return b, nil
			}
			if !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
		return nil, fmt.Errorf("policy diff: %s has no %s.cedar", dir, suite)
	}
}

func diffCorpus(out io.Writer, candidate, live, suites string, asJSON bool) error {
	if cfg.CorpusDir == "" {
		return errors.New("policy diff: no AgentDojo corpus (AIRLOCK_CORPUS or --corpus)")
	}
	cases, err := eval.LoadAgentDojo(cfg.CorpusDir, eval.Filter{Suite: suites})
	if err != nil {
		return err
	}
	rep, err := eval.PolicyDiff(eval.Corpus{AgentDojoDir: cfg.CorpusDir}, cases, suitePolicy(live), suitePolicy(candidate))
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUITE\tCALLS\tBENIGN RUNS\tLIVE HOLDS/TASK\tCANDIDATE HOLDS/TASK\tLIVE FORBIDS\tCANDIDATE FORBIDS\tCONSEQUENTIAL RUN BY RULE\tINJECTED RUN\tCHANGED")
	for _, s := range rep.Suites {
		per := func(n int) string {
			if s.BenignTraces == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", float64(n)/float64(s.BenignTraces))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", s.Suite, s.Calls, s.BenignTraces, per(s.LiveAsks), per(s.CandidateAsks),
			s.LiveForbids, s.CandidateForbids, s.ConsequentialPermitted, s.InjectedPermitted, s.Changed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\n(holds per task: benign calls held for a human per benign run, every recorded call counted as proposed)")
	for _, c := range rep.Changes {
		inj := ""
		if c.Injected != "" {
			inj = " INJECTED " + display.Visible(c.Injected)
		}
		fmt.Fprintf(out, "%s %s: %s -> %s %s(%s)%s\n", c.Suite, display.Visible(c.Path), c.Live, c.Candidate, display.Visible(c.Tool), display.Visible(c.Why), inj)
	}
	return nil
}

func diffAudit(ctx context.Context, out io.Writer, candidate string, limit int) error {
	text, err := os.ReadFile(candidate)
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	st, err := store.Open(ctx, cfg.StoreURL())
	if err != nil {
		return err
	}
	defer st.Close()
	reg, err := workers.LoadRegistry(cfg, nil, nil)
	if err != nil {
		return err
	}
	as, err := registry.CedarActions(reg.Capabilities())
	if err != nil {
		return err
	}
	set, err := cedarpolicy.Compile(candidate, text, as)
	if err != nil {
		return err
	}
	rows, err := st.ListAuditOutcome(ctx, activities.AuditPolicyShadow, limit)
	if err != nil {
		return err
	}
	changed := 0
	for _, r := range rows {
		var rec activities.ShadowRecord
		if err := json.Unmarshal([]byte(r.Detail), &rec); err != nil {
			fmt.Fprintf(out, "%s #%d: unreadable shadow row: %v\n", display.Visible(r.WorkflowID), r.Seq, err)
			continue
		}
		d := set.Decide(rec.Facts)
		if d.Outcome == rec.Live.Outcome {
			continue
		}
		changed++
		fmt.Fprintf(out, "%s #%d %s: %s -> %s (%s %s) args %s\n", display.Visible(r.WorkflowID), r.Seq, display.Visible(r.CapabilityID),
			rec.Live.Outcome, d.Outcome, strings.Join(d.Policies, ","), display.Visible(d.Reason), display.Visible(string(rec.Facts.Args)))
	}
	fmt.Fprintf(out, "audit: %d shadow rows replayed through %s, %d would change\n", len(rows), candidate, changed)
	return nil
}
