package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/appapi"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/identity"
	"github.com/airlock-dev/airlock/internal/web"
	"github.com/airlock-dev/airlock/workers"
)

func newAPICmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api",
		Short: "The application HTTP API: start, follow and decide turns (and AG-UI) without Temporal, the store or the approver key",
		Long: `"airlock api serve" serves the application API (internal/appapi/openapi.yaml, also served at
/v1/openapi.yaml): POST /v1/turns, GET /v1/conversations/{c}/turns/{seq}[/events],
GET /v1/confirmations, POST /v1/confirmations/{id}/decision and the AG-UI endpoint POST /v1/agui.
Callers are listed in the API keys file (AIRLOCK_API_KEYS, default $AIRLOCK_HOME/api-keys.json);
"airlock api key NAME --principal P | --approver A" mints a key and adds it there.`,
	}
	cmd.AddCommand(newAPIServeCmd(), newAPIKeyCmd())
	return cmd
}

// apiKeysPath is the API keys file: AIRLOCK_API_KEYS, else $AIRLOCK_HOME/api-keys.json.
func apiKeysPath() string {
	if p := os.Getenv("AIRLOCK_API_KEYS"); p != "" {
		return p
	}
	return cfg.Home + "/api-keys.json"
}

func newAPIKeyCmd() *cobra.Command {
	var principal, approver string
	cmd := &cobra.Command{
		Use:   "key NAME",
		Short: "Mint an API key (256 bits) for a caller and add its SHA-256 to the API keys file; prints the key once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, sum, err := appapi.NewKey()
			if err != nil {
				return err
			}
			if err := appapi.AddCaller(apiKeysPath(), appapi.Caller{Name: args[0], Principal: principal, Approver: approver, KeySHA256: sum}); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), key)
			return nil
		},
	}
	cmd.Flags().StringVar(&principal, "principal", "", "the principal the caller's turns act for (a requester)")
	cmd.Flags().StringVar(&approver, "approver", "", "the approver (in the approvers file) the caller decides as")
	return cmd
}

func newAPIServeCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the application API until interrupted",
		Example: `  airlock api key app --principal alice      # prints a key for the app's backend
  airlock api serve --addr 127.0.0.1:8092`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPIServe(cmd.Context(), cmd.ErrOrStderr(), addr, nil)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", envOr("AIRLOCK_API_ADDR", workers.DefaultAPIAddr), "listen address host:port (AIRLOCK_API_ADDR)")
	return cmd
}

// runAPIServe serves the API on addr until ctx ends; ready, if set, receives the base URL.
func runAPIServe(ctx context.Context, errOut io.Writer, addr string, ready chan<- string) error {
	keys, err := appapi.LoadKeys(apiKeysPath())
	if err != nil {
		return err
	}
	st, err := openExistingStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := config.DialTemporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	starter, err := clients.LoadCredential(cfg.ClientCredentialPath())
	if err != nil {
		return fmt.Errorf("the API attests the turns it starts with a client credential (%s; airlock clients add): %w", cfg.ClientCredentialPath(), err)
	}
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		return err
	}
	surface, _, err := web.EnsureSurface(surfaceCredentialPath(), cfg.ApproversPath())
	if err != nil {
		return err
	}
	var access *identity.AccessVerifier
	if iss, aud := os.Getenv("AIRLOCK_OIDC_ISSUER"), os.Getenv("AIRLOCK_API_AUDIENCE"); iss != "" && aud != "" {
		// Requesters may present the identity provider's access tokens (issue 33, item 2).
		if access, err = identity.NewAccessVerifier(ctx, identity.AccessConfig{Issuer: iss, Audience: aud,
			SubjectClaim: os.Getenv("AIRLOCK_OIDC_SUBJECT_CLAIM"), PrincipalClaim: os.Getenv("AIRLOCK_API_PRINCIPAL_CLAIM")}); err != nil {
			return err
		}
	}
	srv, err := appapi.New(appapi.Options{Store: st, Temporal: c, TaskQueue: cfg.TaskQueue, Keys: keys, Starter: starter,
		ApproverKey: key, Surface: surface, Approvers: approvers.NewSource(cfg.ApproversPath()).Current, Access: access})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(errOut, "airlock api: serving %s (OpenAPI at %s/v1/openapi.yaml)\n", url, url)
	if ready != nil {
		ready <- url
	}
	return serveUntil(ctx, hs, ln)
}

// serveUntil serves hs on ln until ctx ends, then shuts it down (2 s for requests in flight).
// It returns Serve's error, or nil when the shutdown ended it. Every listener a command opens
// (api, stream) serves through it.
func serveUntil(ctx context.Context, hs *http.Server, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
