package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/identity"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/telemetry"
	"github.com/airlock-dev/airlock/internal/web"
	"github.com/airlock-dev/airlock/workers"
)

func newWebCmd() *cobra.Command {
	var addr, certFile, keyFile string
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Serve the approver page: pending decisions across turns, approve / deny / edit, history",
		Long: `Serve the approver page until interrupted.

Approvers sign in with the name and password the approvers file lists (AIRLOCK_APPROVERS,
default $AIRLOCK_HOME/approvers.json; add one with: airlock approvers add NAME). The page shows
every pending confirmation across turns, newest first (filter by conversation or capability):
the capability and tool, who asked, the literal arguments with hidden characters made visible,
what leaves the machine, the time left, the turn's earlier outcomes and its Temporal UI link.
A decision is sent as the turn's decide update, so the page shows at once whether it was
accepted or why not (expired, decided by someone else, four-eyes, stale arguments).
The Proposals page lists pending agent proposals (memory changes, self-corrections, focus
declarations) with Accept, Reject and Edit (the replacement is the textarea's exact text),
recorded and applied as "airlock proposals decide" does; it shows whether the decision was
recorded, converged with the same one, or conflicts with a first, different one (which stands).

The signed-in approver is the one recorded; the page attests each decision with its own key
($AIRLOCK_HOME/keys/surface-web.json or AIRLOCK_SURFACE_KEY_FILE, created and registered in the approvers file on
first start). Every POST needs the session's CSRF token and a same-origin Origin header;
failed sign-ins are limited to 5 a minute per name and per client address (answered 429).
Sessions live in the store (AIRLOCK_DATABASE_URL): every instance on the same store shares
them and a restart keeps them; one ends 30 minutes after its last request or 12 hours after
sign-in. They use Secure cookies:
browsers keep them on http://127.0.0.1 and http://localhost only, so serve any other address
with --tls-cert/--tls-key or behind a TLS proxy.

Passkeys: a signed-in approver registers passkeys under Passkeys; a capability whose policy
says "approval/passkey": true is then decided only with one (the authenticator signs the
decision's MAC, the worker verifies it). The relying party id is AIRLOCK_PASSKEY_RP_ID
(default: the first host name of AIRLOCK_WEB_HOSTS that is not an IP address, else
localhost) and the page's origins AIRLOCK_PASSKEY_ORIGINS (comma list, default https://<RP
id>; for localhost, http(s)://localhost on AIRLOCK_WEB_ADDR's port only: another local web app
is another origin); workers must read the same values. "http://localhost:*" allows any local
port for development; the page refuses to start with it on a non-loopback --addr.
Browsers refuse IP addresses as relying parties: open the page as http://localhost:PORT, not
http://127.0.0.1:PORT, to use passkeys on loopback.`,
		Example: `  airlock approvers add alice && airlock web
  airlock web --addr 127.0.0.1:9000
  airlock web --addr 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWeb(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), addr, certFile, keyFile, nil)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", cfg.WebAddr, "listen address host:port (AIRLOCK_WEB_ADDR)")
	cmd.Flags().StringVar(&certFile, "tls-cert", "", "serve HTTPS with this certificate (PEM), with --tls-key")
	cmd.Flags().StringVar(&keyFile, "tls-key", "", "private key (PEM) of --tls-cert")
	return cmd
}

// surfaceCredentialPath is where the approver page keeps its surface key.
//
// It is a key that decides for any approver the page signs in, so it lives apart from
// people's credentials (issue 21, item 4): AIRLOCK_SURFACE_KEY_FILE, else
// $AIRLOCK_HOME/keys/surface-web.json; a key an older version left under the credentials
// folder is used where it is until it is moved (airlock doctor says so).
func surfaceCredentialPath() string {
	if p := os.Getenv("AIRLOCK_SURFACE_KEY_FILE"); p != "" {
		return p
	}
	path := filepath.Join(cfg.Home, "keys", "surface-web.json")
	if _, err := os.Stat(path); err != nil {
		if _, err := os.Stat(legacySurfacePath()); err == nil {
			return legacySurfacePath()
		}
	}
	return path
}

// legacySurfacePath is where the surface key lived before issue 21: beside people's
// credentials.
func legacySurfacePath() string { return filepath.Join(cfg.CredentialsDir(), "surface-web.json") }

// runWeb serves the approver page on addr until ctx ends. ready, if set, receives the page's
// URL once it listens.
func runWeb(ctx context.Context, out, errOut io.Writer, addr, certFile, keyFile string, ready chan<- string) error {
	if (certFile == "") != (keyFile == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	// Passkey origins are exact outside local development (issue 33, item 4): checked before
	// anything is opened.
	if pk, err := passkey.FromEnv(); err != nil {
		return err
	} else if host, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	} else if err := pk.CheckServing(host); err != nil {
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
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		return err
	}
	cred, created, err := web.EnsureSurface(surfaceCredentialPath(), cfg.ApproversPath())
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(errOut, "approver page: surface key %s registered as surface %q in %s\n", surfaceCredentialPath(), web.SurfaceName, cfg.ApproversPath())
	}
	src := approvers.NewSource(cfg.ApproversPath())
	opts, _ := config.TemporalOptions()
	slack, err := slackInteractions()
	if err != nil {
		return err
	}
	pk, err := passkey.FromEnv()
	if err != nil {
		return err
	}
	oidcOpts, err := oidcFromEnv(ctx, errOut)
	if err != nil {
		return err
	}
	srv, err := web.New(web.Options{Store: st, Temporal: c, Approvers: web.FileApprovers(src),
		Decide:         web.Decider(c, st, key, cred),
		Challenge:      web.Challenger(st, key, cred),
		Passkeys:       pk,
		DecideProposal: web.ProposalDecider(c, st, cred, src, cfg.TaskQueue),
		WorkflowURL:    func(id string) string { return cfg.WorkflowURL(opts.Namespace, id) },
		Hosts:          webHosts(addr),
		Slack:          slack,
		OIDC:           oidcOpts})
	if err != nil {
		return err
	}
	if oidcOpts != nil {
		// Every signed-in person is checked with the provider again, idle or not (issue 33).
		go func() {
			every := oidcOpts.Recheck
			if every <= 0 {
				every = web.DefaultOIDCRecheck
			}
			t := time.NewTicker(every / 2)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					srv.RecheckIdentities(ctx, false)
				}
			}
		}()
	}
	if maddr := os.Getenv("AIRLOCK_METRICS_ADDR"); maddr != "" {
		// The page's own /metrics (process and Go runtime; confirmations pending) and /healthz
		// (Temporal and the store answer), on a separate listener.
		m, err := telemetry.NewMetrics(telemetry.PendingFromStore(st))
		if err != nil {
			return err
		}
		probe := func(ctx context.Context) error {
			_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}
		h := telemetry.Handler(m.Handler(), telemetry.Check{Name: "temporal", Probe: probe}, telemetry.Check{Name: "store", Probe: st.Ping})
		go func() {
			if err := telemetry.Serve(ctx, maddr, h, nil); err != nil {
				fmt.Fprintf(errOut, "approver page: metrics: %v\n", err)
			}
		}()
	}
	return serveWeb(ctx, out, srv, addr, certFile, keyFile, ready)
}

// serveWeb serves h on addr (HTTPS with certFile and keyFile) until ctx ends, then shuts down
// gracefully; ready, if set, receives the URL once it listens.
func serveWeb(ctx context.Context, out io.Writer, h http.Handler, addr, certFile, keyFile string, ready chan<- string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("approver page: listen on %s: %w", addr, err)
	}
	scheme := "http"
	if certFile != "" {
		scheme = "https"
	}
	url := scheme + "://" + ln.Addr().String() + "/"
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); scheme == "http" && !isLoopback(host) {
		fmt.Fprintf(out, "approver page: WARNING plain HTTP on %s: browsers keep the Secure session cookie only on loopback; use --tls-cert/--tls-key\n", addr)
	}
	fmt.Fprintf(out, "approver page: %s (sign in as an approver from %s; add one with: %s approvers add NAME)\n", url, cfg.ApproversPath(), self())
	if ready != nil {
		ready <- url
	}
	errc := make(chan error, 1)
	go func() {
		if certFile != "" {
			errc <- hs.ServeTLS(ln, certFile, keyFile)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("approver page: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("approver page: shut down: %w", err)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// webHosts are the host names the approver page answers: AIRLOCK_WEB_HOSTS (a comma list),
// else the loopback names and the listen address's host (web.DefaultHosts).
func webHosts(addr string) []string {
	if h := config.SplitList(os.Getenv("AIRLOCK_WEB_HOSTS")); len(h) > 0 {
		return h
	}
	return web.DefaultHosts(addr)
}

// oidcFromEnv is the page's identity provider sign-in (issue 33), from AIRLOCK_OIDC_*; nil
// when AIRLOCK_OIDC_ISSUER is unset. The provider is discovered now: a page configured for a
// provider it cannot reach does not start.
func oidcFromEnv(ctx context.Context, errOut io.Writer) (*web.OIDCOptions, error) {
	c, set, ok, err := identity.ConfigFromEnv()
	if err != nil || !ok {
		return nil, err
	}
	rp, err := identity.New(ctx, c)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(errOut, "approver page: sign-in through %s (client %s; %d group mapping(s))\n", c.Issuer, c.ClientID, len(c.GroupMap))
	return &web.OIDCOptions{RP: rp, ApproversPath: cfg.ApproversPath(), Recheck: set.Recheck, Label: set.Label}, nil
}
