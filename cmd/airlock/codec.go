package main

import (
	"errors"
	"fmt"
	"github.com/airlock-dev/airlock/workers"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/codec"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/telemetry"
)

func newCodecServerCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "codec-server",
		Short: "Serve the payload codec to the Temporal UI and CLI (authenticated, CORS for the UI's origin)",
		Long: `Serve POST /encode and /decode (Temporal's codec server protocol) with the key ring of
AIRLOCK_PAYLOAD_KEYS_FILE, so operators allowed to read turn payloads see them decoded in the
Temporal UI or with temporal workflow show --codec-endpoint URL --codec-auth "Bearer TOKEN".

Every codec request needs Authorization: Bearer TOKEN, or (browsers) the cookie /login sets
after the operator typed the token there; point the UI at this server with "include
credentials" (UI server config codec.endpoint and codec.includeCredentials: true, or the UI's
codec setting). The token comes from AIRLOCK_CODEC_TOKEN_FILE (or AIRLOCK_CODEC_TOKEN); never a
flag. Browsers may call it only from the origins listed in
AIRLOCK_CODEC_CORS_ORIGINS (comma list; default the Temporal UI of make run and of make
cluster: http://localhost:8233,http://127.0.0.1:8233,http://127.0.0.1:18080). Serve it over TLS
(behind a proxy) anywhere but loopback.

Key ring: one "id hex64" a line, the first one encrypts; keep older lines to read older
histories (airlock codec-key ID prints a new line).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := codec.FromEnv()
			if err != nil {
				return err
			}
			if c == nil {
				return errors.New("codec-server: AIRLOCK_PAYLOAD_KEYS_FILE is not set")
			}
			token, err := secretFromEnv("AIRLOCK_CODEC_TOKEN")
			if err != nil {
				return err
			}
			if len(token) < 16 {
				return errors.New("codec-server: set AIRLOCK_CODEC_TOKEN_FILE (or AIRLOCK_CODEC_TOKEN) to a token of at least 16 characters")
			}
			origins := config.SplitList(envOr("AIRLOCK_CODEC_CORS_ORIGINS", "http://localhost:8233,http://127.0.0.1:8233,http://127.0.0.1:18080"))
			fmt.Fprintf(cmd.ErrOrStderr(), "codec server on http://%s (current key %s; browsers from %v)\n", addr, c.CurrentKeyID(), origins)
			return telemetry.Serve(cmd.Context(), addr, codec.Handler(c, token, origins), nil)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", envOr("AIRLOCK_CODEC_ADDR", workers.DefaultCodecAddr), "listen address host:port (AIRLOCK_CODEC_ADDR)")
	return cmd
}

func newCodecKeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "codec-key ID",
		Short: "Print a new payload key ring line (\"ID hex64\"); put it first in AIRLOCK_PAYLOAD_KEYS_FILE to rotate",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := codec.NewKey(args[0])
			if err != nil {
				return err
			}
			if _, err := codec.New([]codec.Key{k}); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), k.Line())
			return nil
		},
	}
}
