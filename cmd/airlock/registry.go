package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
)

// loadBaseRegistry loads the base registry with its Go implementations (no layers, no probes).
func loadBaseRegistry() (*registry.Registry, error) {
	c := cfg
	c.Layers = nil
	return workers.LoadRegistry(c, nil, nil)
}

func newRegistryCmd() *cobra.Command {
	var layers []string
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Check the capability registry, list what the model is offered and what each worker serves",
		Long: `Load the capability registry exactly as a worker does (base registry and its policy sidecar plus
layers and theirs), binding every implementation, and print each entry with its side-effect
class, network reach and confirmation class from the policy. Then list the revision each
worker under AIRLOCK_HOME serves (workers report it on start and on every reload, with the
diagnostic of a refused reload). Exits non-zero with the full diagnostic when the registry
would stop a worker from serving. Layers (--layers or AIRLOCK_REGISTRY_LAYERS): ` + fmt.Sprint(registry.LayerNames()),
		Example: "  airlock registry\n  airlock registry --layers agentdojo-banking\n  airlock registry check --file my-registry.json --policy my-policy.json\n  airlock registry doc",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := cfg
			if cmd.Flags().Changed("layers") {
				c.Layers = layers
			}
			reg, err := workers.LoadRegistry(c, nil, nil)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "registry %s: %d capabilities\n", reg.Revision(), len(reg.Capabilities()))
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CAPABILITY\tTOOL NAME\tSTATUS\tSIDE EFFECT\tNETWORK\tCAP/TURN\tCONFIRMATION\tDESTINATION")
			for _, e := range reg.Capabilities() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.Key(), e.Airlock.ToolName, e.Status, e.Airlock.SideEffect, e.Airlock.Network, e.Airlock.PerTurnCap, confirmationClass(reg, e), destinationText(e.DestinationOf()))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return printWorkerRevisions(cmd, reg.Revision())
		},
	}
	cmd.Flags().StringSliceVar(&layers, "layers", cfg.Layers, "registry layers to load on top of the base registry")
	cmd.AddCommand(newRegistryCheckCmd(), newRegistryDocCmd(), newRegistryPolicyCmd())
	return cmd
}

// destinationText is a destination on one line: "host api.example.com (sends title, body)".
func destinationText(d registry.Destination) string {
	s := string(d.Kind)
	if d.Name != "" {
		s += " " + display.Line(d.Name)
	}
	if len(d.Fields) > 0 {
		s += " (sends " + display.Line(strings.Join(d.Fields, ", ")) + ")"
	}
	return s
}

// confirmationClass is the policy's verdict for any principal the "*" entry covers.
func confirmationClass(reg *registry.Registry, c *registry.Capability) string {
	pe, ok := reg.Policy().Entry(c.Key())
	switch {
	case c.Status == registry.StatusReserved || !c.Flags.Dispatchable:
		return "never"
	case !ok:
		return "denied (no policy)"
	case pe.Autonomy == registry.AutonomyDeny:
		return "deny"
	case pe.Autonomy == registry.AutonomyAutomatic && c.Automatic():
		return "automatic"
	case pe.Autonomy == registry.AutonomyAutomaticWhenUserProvided:
		return "automatic when user-provided"
	case pe.DistinctApprover:
		return "required (four-eyes)"
	}
	return "required"
}

// printWorkerRevisions lists the workers' reports under AIRLOCK_HOME.
func printWorkerRevisions(cmd *cobra.Command, local string) error {
	reports, err := workers.ReadServeReports(cfg.Home)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if len(reports) == 0 {
		fmt.Fprintf(out, "\nno worker reports under %s\n", filepath.Join(cfg.Home, workers.ServeReportDir))
		return nil
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tSTATE\tREVISION SERVED\tLOADED\tRELOADS\tLAST REFUSED RELOAD")
	for _, r := range reports {
		state := "running"
		if !r.Alive {
			state = "gone"
		}
		rev := r.Revision
		if rev != local {
			rev += " (differs from the files here)"
		}
		refused := "—"
		if r.LastError != "" {
			refused = r.LastErrorAt.Format(time.RFC3339) + ": " + firstLine(r.LastError)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", r.Worker, state, rev, r.LoadedAt.Format(time.RFC3339), r.Reloads, refused)
	}
	return tw.Flush()
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func newRegistryCheckCmd() *cobra.Command {
	var file, policy string
	var layers []string
	var goBound bool
	cmd := &cobra.Command{
		Use:   "check [--file F] [--policy P] [--layers L,...] [--go-bound]",
		Short: "Validate a registry file, a layer file and their policy sidecars as a worker would, printing every diagnostic",
		Long: `Load the registry (--file, default AIRLOCK_REGISTRY or the embedded one) and its policy sidecar
(--policy, default AIRLOCK_POLICY or the embedded one) with the layers (--layers, default
AIRLOCK_REGISTRY_LAYERS: embedded names or layer files, LAYER.json with its policy beside it as
LAYER.policy.json, or LAYER.json=POLICY.json) and every implementation bound, exactly as a worker
does before serving or swapping in a reload: HTTP capabilities are bound from their
declarations (their secrets must be set), destinations are checked. Exits 0 and prints the
revision when it would load; otherwise exits non-zero with every diagnostic, each naming the
document, the entry and the rule (docs/CAPABILITY-REGISTRY.md lists the rules).

A layer whose capabilities are Go code in your own worker binary (the airlockworker package)
cannot be bound here: --go-bound checks those entries under every other rule as if code bound
them, and lists them. The worker binary itself binds them for real at start.`,
		Example: "  airlock registry check --file registry.json --policy policy.json\n  airlock registry check --layers ./tickets.v1.json\n  airlock registry check --layers ./tickets.v1.json=./tickets-policy.json --go-bound",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := cfg
			if file != "" {
				c.RegistryFile = file
			}
			if policy != "" {
				c.PolicyFile = policy
			}
			if cmd.Flags().Changed("layers") {
				c.Layers = layers
			}
			var placeholders []registry.Implementation
			if goBound {
				var err error
				if placeholders, err = goBoundPlaceholders(c.Layers); err != nil {
					return err
				}
				for _, im := range placeholders {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s@%d: checked as bound by Go code (not bound here)\n", im.ID, im.Version)
				}
			}
			start := time.Now()
			reg, err := workers.LoadRegistryWith(c, nil, nil, nil, placeholders)
			if err != nil {
				var le *registry.LoadError
				if errors.As(err, &le) {
					for _, d := range le.Diagnostics {
						fmt.Fprintln(cmd.ErrOrStderr(), d.String())
					}
					return fmt.Errorf("registry check: %d problems", len(le.Diagnostics))
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: registry %s, %d capabilities, loaded and bound in %s\n", reg.Revision(), len(reg.Capabilities()), time.Since(start).Round(time.Microsecond))
			return nil
		},
	}
	cmd.Flags().BoolVar(&goBound, "go-bound", false, "check layer-file entries that are neither HTTP nor built in as if Go code bound them")
	cmd.Flags().StringVar(&file, "file", "", "registry file (capability-registry.v1) to check instead of AIRLOCK_REGISTRY or the embedded one")
	cmd.Flags().StringVar(&policy, "policy", "", "policy sidecar (capability-authorization-policy.v1) to check instead of AIRLOCK_POLICY or the embedded one")
	cmd.Flags().StringSliceVar(&layers, "layers", cfg.Layers, "registry layers to load on top of the base registry")
	return cmd
}

// goBoundPlaceholders are stand-in implementations (an open argument schema) for the entries of
// layer files that only a team's own worker binary binds: neither HTTP (bound from the
// declaration), MCP tools (bound by the worker's MCP bridge, which the load binds itself:
// a placeholder beside it read "implementation bound twice") nor agent proposals (bound by
// the registry).
func goBoundPlaceholders(layers []string) ([]registry.Implementation, error) {
	var out []registry.Implementation
	for _, l := range layers {
		if !registry.IsLayerFile(l) {
			continue
		}
		src, _, err := registry.LayerFile(l)
		if err != nil {
			return nil, err
		}
		entries, err := registry.Entries(src)
		if err != nil {
			continue // the check reports it
		}
		for _, e := range entries {
			if e.Airlock.HTTP != nil || e.Airlock.MCP != nil || e.Airlock.Kind == registry.KindProposal || !e.Flags.Dispatchable || e.Status == registry.StatusReserved {
				continue
			}
			out = append(out, registry.Implementation{ID: e.ID, Version: e.Version, Schema: []byte(`{"type":"object"}`),
				Invoke: func(context.Context, registry.Invocation) (registry.Output, error) {
					return registry.Output{}, errors.New("placeholder: never invoked")
				}})
		}
	}
	return out, nil
}

func newRegistryPolicyCmd() *cobra.Command {
	var out, revision string
	var fourEyes bool
	cmd := &cobra.Command{
		Use:   "policy LAYER.json [--out LAYER.policy.json] [--four-eyes]",
		Short: "Write a policy sidecar stub for a layer file: automatic only where read-only and local (or an internal read), confirm otherwise",
		Long: `Write the structural policy sidecar (capability-authorization-policy.v1) of a layer file: every
principal may call every capability; a capability runs automatically only where the registry
declares it local and read-only, every other one waits for a human; with --four-eyes, every
capability with a side effect needs an approver other than the requester. Review it (grants,
principals, four-eyes) before deploying, then check both with airlock registry check --layers.
--out defaults to LAYER.policy.json beside the layer (where workers look for it); an existing
file is never overwritten.`,
		Example: "  airlock registry policy ./tickets.v1.json --four-eyes\n  airlock registry check --layers ./tickets.v1.json --go-bound",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := registry.FileSource(args[0])
			if err != nil {
				return err
			}
			if _, err := registry.Entries(src); err != nil {
				return err
			}
			if out == "" {
				_, out = registry.LayerFilePaths(args[0])
			}
			if revision == "" {
				revision = "policy." + time.Now().UTC().Format("2006-01-02") + ".1"
			}
			var distinct func(registry.Entry) bool
			if fourEyes {
				distinct = func(e registry.Entry) bool { return !e.ReadOnly() }
			}
			pol := registry.StructuralPolicy(out, revision, distinct, src)
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return fmt.Errorf("registry policy: %w (an existing policy is never overwritten)", err)
			}
			if _, err := f.Write(pol.Data); err != nil {
				f.Close()
				return fmt.Errorf("registry policy: %w", err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("registry policy: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: review it, then airlock registry check --layers %s\n", out, args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to write the policy (default: LAYER.policy.json beside the layer)")
	cmd.Flags().StringVar(&revision, "revision", "", "the policy's revision (default policy.<today>.1)")
	cmd.Flags().BoolVar(&fourEyes, "four-eyes", false, "every capability with a side effect needs an approver other than the requester")
	return cmd
}

func newRegistryDocCmd() *cobra.Command {
	var out string
	var check bool
	cmd := &cobra.Command{
		Use:   "doc [--out FILE] [--check]",
		Short: "Generate docs/CAPABILITY-REGISTRY.md from the checked-in registry and policy sidecars",
		Long: `Write the human projection of the checked-in registry (base and embedded layers) and their
policy sidecars: capability, version, status, removal deadline, surfaces, wire name, tool name,
side effect, network, confirmation class and grants, then the load-time rules. The document is
generated, never edited; with --check, exit non-zero when FILE differs (make check runs the same comparison as a test).`,
		Example: "  airlock registry doc\n  airlock registry doc --check",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sets, err := registry.EmbeddedProjectionSets()
			if err != nil {
				return err
			}
			doc, err := registry.Projection(sets)
			if err != nil {
				return err
			}
			if check {
				got, err := os.ReadFile(out)
				if err != nil {
					return fmt.Errorf("registry doc --check: %w", err)
				}
				if !bytes.Equal(got, doc) {
					return fmt.Errorf("registry doc --check: %s differs from the registry; run `airlock registry doc`", out)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s is current\n", out)
				return nil
			}
			if out == "-" {
				_, err := cmd.OutOrStdout().Write(doc)
				return err
			}
			if err := os.WriteFile(out, doc, 0o644); err != nil {
				return fmt.Errorf("registry doc: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", registry.DocPath, "where to write the document (- for stdout)")
	cmd.Flags().BoolVar(&check, "check", false, "compare instead of writing; exit non-zero on drift")
	return cmd
}
