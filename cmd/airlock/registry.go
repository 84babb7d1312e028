package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

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
		Short: "Check the capability registry and list what the model is offered",
		Long: `Load the capability registry exactly as a worker does (base registry plus layers), binding every
implementation, and print each entry with its side-effect class, network reach and whether it
runs automatically or needs a human confirmation. Exits non-zero with the full diagnostic when
the registry would stop a worker from serving. Layers (--layers or AIRLOCK_REGISTRY_LAYERS): ` + fmt.Sprint(registry.LayerNames()),
		Example: "  airlock registry\n  airlock registry --layers agentdojo-banking",
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
			fmt.Fprintln(tw, "CAPABILITY\tTOOL NAME\tSTATUS\tSIDE EFFECT\tNETWORK\tCAP/TURN\tCONFIRMATION")
			for _, e := range reg.Capabilities() {
				conf := "required"
				if e.Automatic() {
					conf = "automatic"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.Key(), e.Airlock.ToolName, e.Status, e.Airlock.SideEffect, e.Airlock.Network, e.Airlock.PerTurnCap, conf)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&layers, "layers", cfg.Layers, "registry layers to load on top of the base registry")
	return cmd
}
