package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/mcp"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
)

func newMCPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Bring MCP servers' tools under the registry: import them pinned, check their live definitions",
		Long: `MCP servers (stdio or streamable HTTP) are configured in a servers file named by
AIRLOCK_MCP_SERVERS (or --servers), schema/v "airlock-mcp-servers.v1":

  {"schema/v": "airlock-mcp-servers.v1",
   "servers": [
     {"name": "files", "command": "mcp-server-filesystem", "args": ["/srv/docs"]},
     {"name": "tickets", "url": "https://tickets.example/mcp",
      "headers": [{"name": "Authorization", "prefix": "Bearer ", "secret": {"env": "TICKETS_TOKEN"}}]}]}

A stdio server gets only PATH, HOME and the env (and env/secrets) the file gives it, never the
worker's environment. Optional per server: timeout/connect (10s), refresh (30s: how often its
tool list is read again and a server that is down retried), verify/max-age (0s: every call
reads the tool list first).

"airlock mcp import SERVER" writes a registry layer and a policy stub, one entry per tool with
its definition pinned by digest; review them, then load them as registry layers. At run time
a tool is offered and called only while its live definition has the pinned digest.`,
	}
	cmd.AddCommand(newMCPImportCmd(), newMCPStatusCmd(), newMCPServeCmd(), newMCPTokenCmd())
	return cmd
}

func serversPath(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if p := os.Getenv(mcp.EnvServers); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("no MCP servers file: pass --servers FILE or set %s", mcp.EnvServers)
}

func newMCPImportCmd() *cobra.Command {
	var (
		servers, out, prefix, timeout, revision string
		only, sideEffects, networks, accept     []string
		automatic                               []string
		asJSON, acceptAll                       bool
	)
	cmd := &cobra.Command{
		Use:   "import SERVER",
		Short: "Connect to a configured MCP server and write a registry layer and policy stub pinning its tools",
		Long: `Connect to SERVER (from the servers file), list its tools and write, into --out:
  mcp-SERVER.v1.json         a capability-registry.v1 layer: one entry per tool, capability
                             id mcp.SERVER.TOOL, its definition (name, title, description,
                             input and output schema, annotations) pinned with its sha256
                             digest, its destination the server and the tool's arguments
  mcp-SERVER.v1.policy.json  its policy stub: grant mcp.SERVER for every principal; autonomy
                             automatic only for local read-only tools, confirm otherwise

Every new tool is confirmed until an operator sets it automatic (--automatic TOOL, or in the
policy), whatever its annotations claim.

Run again against a layer that exists, it reviews instead of overwriting: each tool whose
upstream definition changed (a unified diff of the pinned definition), each new tool and each
tool the server no longer lists is shown, and changes the layer only when accepted by name
(--accept TOOL, repeatable; --accept-all after reading every diff). A changed tool not accepted
keeps its old pin and stays unoffered. Unchanged entries and the policy file keep every edit
the operator made: only accepted new tools are added to it (confirm) and accepted removed ones
taken out. Exit status 1 while a change waits for acceptance.

The side effect and network class are the registry's decision. They are only SUGGESTED from the
server's annotations, which are untrusted claims: side-effect none only where the server claims
readOnlyHint, network local only for a stdio server claiming openWorldHint false, never
idempotent. Review every entry (and the notes printed here: hidden characters in descriptions,
the claims each suggestion came from) before loading the layer. A tool whose name cannot be a
model tool name or whose schema cannot be enforced is skipped with a note.`,
		Example: `  airlock mcp import files --servers mcp-servers.json --out registry/
  airlock mcp import files --side-effect write_file=local-write --network local
  airlock mcp import tickets --prefix tickets_ --only get_ticket,create_ticket
  airlock mcp import files --out registry/ --accept read_file   # after reading its diff`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := serversPath(servers)
			if err != nil {
				return err
			}
			cfgs, err := mcp.LoadServers(path)
			if err != nil {
				return err
			}
			sc, ok := cfgs.Server(args[0])
			if !ok {
				return fmt.Errorf("mcp import: %s configures no server %q (it has: %s)", path, args[0], strings.Join(cfgs.Names(), ", "))
			}
			opts := mcp.ImportOptions{Prefix: prefix, Only: only, Timeout: timeout, Revision: revision, Automatic: automatic,
				SideEffect: map[string]registry.SideEffect{}, Network: map[string]registry.Network{}}
			for _, kv := range sideEffects {
				k, v, ok := strings.Cut(kv, "=")
				se := registry.SideEffect(v)
				if !ok || !slices.Contains([]registry.SideEffect{registry.SideEffectNone, registry.SideEffectLocalWrite, registry.SideEffectExternalWrite}, se) {
					return fmt.Errorf("--side-effect %q: want TOOL=none|local-write|external-write", kv)
				}
				opts.SideEffect[k] = se
			}
			for _, kv := range networks {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					k, v = "", kv
				}
				n := registry.Network(v)
				if n != registry.NetworkLocal && n != registry.NetworkExternal {
					return fmt.Errorf("--network %q: want local|external or TOOL=local|external", kv)
				}
				if k == "" {
					opts.NetworkAll = n
				} else {
					opts.Network[k] = n
				}
			}
			if timeout != "" {
				if d, err := time.ParseDuration(timeout); err != nil || d <= 0 {
					return fmt.Errorf("--timeout %q is not a positive duration", timeout)
				}
			}
			connect, _, _ := sc.Timings()
			ctx, cancel := context.WithTimeout(cmd.Context(), connect+5*time.Second)
			defer cancel()
			tools, init, err := mcp.ListTools(ctx, sc)
			if err != nil {
				return err
			}
			imp, err := mcp.Import(sc, tools, opts)
			if imp != nil {
				printNotes(cmd, imp.Notes)
			}
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			layer := filepath.Join(out, "mcp-"+sc.Name+".v1.json")
			policy := filepath.Join(out, "mcp-"+sc.Name+".v1.policy.json")
			if oldLayer, lerr := os.ReadFile(layer); lerr == nil {
				oldPolicy, perr := os.ReadFile(policy)
				if perr != nil {
					return fmt.Errorf("%s exists but its policy %s cannot be read (%w): restore it, or move the layer away to import afresh", layer, policy, perr)
				}
				return reviewImport(cmd, imp, oldLayer, oldPolicy, layer, policy, accept, acceptAll, asJSON)
			}
			if err := os.WriteFile(layer, imp.Layer, 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(policy, imp.Policy, 0o644); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"layer": layer, "policy": policy,
					"entries": len(imp.Entries), "notes": imp.Notes})
			}
			srvName := ""
			if init != nil && init.ServerInfo != nil {
				srvName = fmt.Sprintf(" (%s %s)", display.Visible(init.ServerInfo.Name), display.Visible(init.ServerInfo.Version))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %d of %d tools of MCP server %s%s\n  layer  %s\n  policy %s\nreview both, then load the layer: AIRLOCK_REGISTRY_LAYERS=%s\n",
				len(imp.Entries), len(tools), sc.Name, srvName, layer, policy, layer)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&servers, "servers", "", "MCP servers file (default $"+mcp.EnvServers+")")
	f.StringVar(&out, "out", ".", "folder to write the layer and its policy stub into")
	f.StringVar(&prefix, "prefix", "", "put this before every model-facing tool name (keeps two servers' names apart)")
	f.StringSliceVar(&only, "only", nil, "import only these tools (MCP names, comma separated)")
	f.StringArrayVar(&sideEffects, "side-effect", nil, "TOOL=none|local-write|external-write: the operator's class for a tool (repeatable)")
	f.StringArrayVar(&networks, "network", nil, "local|external for every tool, or TOOL=local|external (repeatable)")
	f.StringVar(&timeout, "timeout", "30s", "execute timeout of each entry")
	f.StringVar(&revision, "revision", "", "layer revision (default mcp-SERVER.<digest of the pinned tools>)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.StringArrayVar(&automatic, "automatic", nil, "let this tool (MCP name) run without a human: only a local tool without side effects (repeatable; default: every tool confirmed)")
	f.StringArrayVar(&accept, "accept", nil, "re-import: accept the change of this tool (MCP name; repeatable)")
	f.BoolVar(&acceptAll, "accept-all", false, "re-import: accept every change shown")
	return cmd
}

// reviewImport merges a re-import into the existing layer and policy (mcp.Review), prints each
// tool's change with its diff, writes the accepted changes, and fails while any waits.
func reviewImport(cmd *cobra.Command, imp *mcp.Imported, oldLayer, oldPolicy []byte, layer, policy string, accept []string, acceptAll, asJSON bool) error {
	rv, err := mcp.Review(oldLayer, oldPolicy, imp, func(tool string) bool { return acceptAll || slices.Contains(accept, tool) })
	if err != nil {
		return err
	}
	for _, a := range accept {
		if !slices.ContainsFunc(rv.Changes, func(c mcp.ToolChange) bool { return c.Tool == display.Visible(a) && c.Kind != mcp.ChangeUnchanged }) {
			return fmt.Errorf("--accept %q: no change of that tool to accept (tools with changes: %s)", display.Visible(a), strings.Join(rv.Pending(), ", "))
		}
	}
	if !bytes.Equal(rv.Layer, oldLayer) {
		if err := os.WriteFile(layer, rv.Layer, 0o644); err != nil {
			return err
		}
	}
	if !bytes.Equal(rv.Policy, oldPolicy) {
		if err := os.WriteFile(policy, rv.Policy, 0o644); err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	if asJSON {
		if err := json.NewEncoder(w).Encode(map[string]any{"layer": layer, "policy": policy, "changes": rv.Changes, "pending": rv.Pending()}); err != nil {
			return err
		}
	} else {
		for _, c := range rv.Changes {
			if c.Kind == mcp.ChangeUnchanged {
				continue
			}
			state := "NOT accepted: the layer keeps it as it was (--accept " + c.Tool + ")"
			if c.Accepted {
				state = "accepted"
			}
			fmt.Fprintf(w, "tool %s: %s", c.Tool, c.Kind)
			if len(c.Members) > 0 {
				fmt.Fprintf(w, " (%s)", strings.Join(c.Members, ", "))
			}
			fmt.Fprintf(w, ", %s\n", state)
			if c.Diff != "" {
				fmt.Fprintln(w, indent(c.Diff, "    "))
			}
		}
		unchanged := 0
		for _, c := range rv.Changes {
			if c.Kind == mcp.ChangeUnchanged {
				unchanged++
			}
		}
		fmt.Fprintf(w, "%d tool(s) unchanged; layer %s, policy %s (your policy edits kept)\n", unchanged, layer, policy)
	}
	if p := rv.Pending(); len(p) > 0 {
		return fmt.Errorf("%d change(s) wait for review: read each diff above, then accept with --accept TOOL (%s)", len(p), strings.Join(p, ", "))
	}
	return nil
}

// indent puts prefix before every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

func printNotes(cmd *cobra.Command, notes []mcp.Note) {
	w := cmd.ErrOrStderr()
	for _, n := range notes {
		mark := "  "
		if n.Skipped {
			mark = "! "
		}
		fmt.Fprintf(w, "%s%s: %s\n", mark, n.Tool, display.Visible(n.Text))
	}
}

func newMCPStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Connect to every MCP server the registry names and compare each pinned tool with its live definition",
		Long: `Load the registry as a worker does (base, layers, AIRLOCK_MCP_SERVERS), connect to each MCP
server its entries name, and print per tool the pinned and live digest and, when the tool is
not available, why (server down, tool missing, definition changed and in which members).
Exit status 1 when a pinned tool is not available.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := workers.LoadRegistry(cfg, nil, nil); err != nil {
				return err
			}
			defer workers.CloseMCP()
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			st := workers.MCPBridge().Status(ctx, true)
			if len(st) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "the registry names no MCP server")
				return nil
			}
			bad := printMCPStatus(cmd, st)
			if bad > 0 {
				return fmt.Errorf("mcp status: %d pinned tools are not available", bad)
			}
			return nil
		},
	}
}

func printMCPStatus(cmd *cobra.Command, st []mcp.ServerStatus) int {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTOOL\tPINNED\tLIVE\tSTATE")
	bad := 0
	for _, s := range st {
		for _, t := range s.Tools {
			state := "ok"
			if t.Problem != "" {
				state, bad = display.Visible(t.Problem), bad+1
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, display.Visible(t.Tool), registry.MCPPinDigest(t.Pinned), registry.MCPPinDigest(t.Live), state)
		}
	}
	_ = tw.Flush()
	return bad
}

// doctorMCP checks every MCP server the registry names: connected, and each pinned tool's
// live definition still has its digest.
func doctorMCP(ctx context.Context) []doctorCheck {
	ctx, cancel := context.WithTimeout(ctx, 2*doctorTimeout)
	defer cancel()
	var out []doctorCheck
	for _, s := range workers.MCPBridge().Status(ctx, true) {
		var problems []string
		for _, t := range s.Tools {
			if t.Problem != "" {
				problems = append(problems, t.Problem)
			}
		}
		name := "mcp " + s.Name
		switch {
		case !s.Connected:
			out = append(out, doctorCheck{Name: name, Detail: display.Visible(s.Problem), Fix: "start the server or fix its entry in " + mcp.EnvServers + "; its tools are not offered meanwhile"})
		case len(problems) > 0:
			out = append(out, doctorCheck{Name: name, Detail: fmt.Sprintf("%d of %d pinned tools unavailable: %s", len(problems), len(s.Tools), display.Visible(strings.Join(problems, "; "))),
				Fix: "review the server's change, then airlock mcp import " + s.Name + " again (the other tools keep working)"})
		default:
			out = append(out, doctorCheck{Name: name, OK: true, Detail: fmt.Sprintf("%s: %d pinned tools match their live definitions", s.Transport, len(s.Tools))})
		}
	}
	return out
}
