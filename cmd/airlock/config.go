package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/redact"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the configuration in effect (airlock.yaml, environment, flags) and write its reference",
		Long: `Every Airlock process reads one configuration file: airlock.yaml in the working directory, or
the file --config or AIRLOCK_CONFIG names. Its keys are the settings docs/configuration.md
lists (snake_case: database_url, task_queue, registry_layers, ...). An environment variable
overrides the file and a flag overrides both. A file that holds a secret (database_url, API
keys, tokens) must be readable by its owner only.`,
		Example: `  cat > airlock.yaml <<'YAML'
  database_url: postgres://airlock@db.internal/airlock
  temporal_address: temporal.internal:7233
  task_queue: airlock-prod
  registry_layers: [/etc/airlock/tickets.v1.json]
  YAML
  chmod 600 airlock.yaml
  airlock config show`,
	}
	cmd.AddCommand(newConfigShowCmd(), newConfigDocCmd())
	return cmd
}

// rootFlagKeys maps the root's persistent flags to the settings they set.
var rootFlagKeys = map[string]string{"home": "home", "database-url": "database_url", "corpus": "corpus"}

func newConfigShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print every setting's effective value and where it came from (flag, env, file, default); secrets never",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flagged := func(key string) (string, bool) {
				for flag, k := range rootFlagKeys {
					if k == key && cmd.Flags().Changed(flag) {
						v, _ := cmd.Flags().GetString(flag)
						if key == "database_url" {
							return redact.URL(v), true // its password never shows
						}
						return v, true
					}
				}
				return "", false
			}
			eff := config.EffectiveSettings(cfg, flagged)
			applied := config.AppliedFile()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					File     string             `json:"file"`
					Settings []config.Effective `json:"settings"`
				}{applied.Path, eff})
			}
			file := applied.Path
			if file == "" {
				file = "none (no ./airlock.yaml, no --config, no AIRLOCK_CONFIG)"
			} else if abs, err := filepath.Abs(file); err == nil {
				file = abs
			}
			fmt.Fprintf(cmd.OutOrStdout(), "configuration file: %s\n\n", file)
			group := ""
			for _, e := range eff {
				if e.Group != group {
					group = e.Group
					fmt.Fprintf(cmd.OutOrStdout(), "[%s]\n", group)
				}
				fmt.Fprintln(cmd.OutOrStdout(), config.ShowLine(e))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (snake_case keys; secrets as set: true, never their value)")
	return cmd
}

func newConfigDocCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "doc",
		Short: "Write the configuration reference (docs/configuration.md) from the settings table",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "-" {
				_, err := fmt.Fprint(cmd.OutOrStdout(), config.Reference())
				return err
			}
			if err := os.WriteFile(out, []byte(config.Reference()), 0o644); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "docs/configuration.md", "where to write it (- for stdout)")
	return cmd
}
