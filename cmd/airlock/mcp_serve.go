package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/identity"
	"github.com/airlock-dev/airlock/internal/mcpserver"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
)

func newMCPServeCmd() *cobra.Command {
	var (
		addr, principal, gatewayPath string
		audience, resource           string
		stdio                        bool
		ttl                          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the registry's tools over MCP (streamable HTTP or stdio), every tools/call through the executor",
		Long: `Serve Airlock as an MCP server for agents Airlock does not run (Claude Code, Cursor, an
OpenAI Agents SDK app). Its tools are the registry's catalog as the authorization policy lets the
caller's principal use it, under the registry's names, descriptions and schemas; a tool the
principal may not use is neither listed nor callable. Every tools/call is a durable call workflow
on Temporal (task queue airlock-turns: a worker must run): resolve, validate, policy, confirm,
execute at most once, record. A call that needs a human waits on the approver page and in
"airlock pending" while the MCP request stays open with progress notifications.

Streamable HTTP (default, --addr, path /mcp): every request carries
"Authorization: Bearer <token>" minted by "airlock mcp token" with a registered client
credential (airlock clients add). The server attests each call it starts with its gateway
credential (--gateway-credential; register it once with
"airlock clients add mcp-gateway --gateway --principal 'user:*'"): the worker checks that
attestation, bound to that one call, and bearer tokens never enter Temporal history.
Stdio (--stdio): the caller is the process that starts the server: its client credential
(AIRLOCK_CLIENT_CREDENTIAL) and --principal.

A retry of the same call attaches to the same workflow and never runs twice: send
_meta {"airlock/idempotency-key": "..."} with tools/call, or the same progress token in the same
session.`,
		Example: `  airlock mcp serve --addr 127.0.0.1:8790
  airlock mcp serve --stdio --principal alice`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			reg, err := workers.LoadRegistry(cfg, nil, nil)
			if err != nil {
				return fmt.Errorf("load the registry: %w", err)
			}
			c, err := config.DialTemporal(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			opt := mcpserver.Options{Registry: func() *registry.Registry { return reg }, Temporal: c, TaskQueue: cfg.TaskQueue,
				Clients: clients.NewSource(cfg.ClientsPath()).Current, ConfirmationTTL: ttl, Logger: log}
			if !stdio {
				if gatewayPath == "" {
					gatewayPath = filepath.Join(cfg.CredentialsDir(), "client-mcp-gateway.json")
				}
				if opt.Gateway, err = loadGateway(gatewayPath); err != nil {
					return err
				}
				if iss := os.Getenv("AIRLOCK_OIDC_ISSUER"); iss != "" && audience != "" {
					// The identity provider's access tokens too (issue 33): the MCP
					// authorization specification's OAuth flow, discovered through RFC 9728.
					if opt.Access, err = identity.NewAccessVerifier(ctx, identity.AccessConfig{Issuer: iss, Audience: audience,
						SubjectClaim: os.Getenv("AIRLOCK_OIDC_SUBJECT_CLAIM"), PrincipalClaim: os.Getenv("AIRLOCK_MCP_PRINCIPAL_CLAIM")}); err != nil {
						return err
					}
					opt.AuthorizationServers = []string{iss}
					opt.Resource = resource
					if opt.Resource == "" {
						opt.Resource = "http://" + addr + "/mcp"
					}
				}
			}
			srv := mcpserver.New(opt)
			if stdio {
				cred, err := clients.LoadCredential(cfg.ClientCredentialPath())
				if errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("no client credential at %s: register one with `airlock clients add NAME --principal %s` and set AIRLOCK_CLIENT_CREDENTIAL", cfg.ClientCredentialPath(), principal)
				} else if err != nil {
					return err
				}
				if principal == "" {
					return errors.New("--principal is required with --stdio")
				}
				return srv.ServeStdio(ctx, mcpserver.CredentialCaller(cred, principal))
			}
			return serveMCPHTTP(ctx, cmd, addr, srv)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", envOr("AIRLOCK_MCP_ADDR", "127.0.0.1:8790"), "streamable HTTP listen address (AIRLOCK_MCP_ADDR); the endpoint is /mcp")
	f.BoolVar(&stdio, "stdio", false, "serve over stdin/stdout for the process that starts this one")
	f.StringVar(&principal, "principal", os.Getenv("USER"), "with --stdio: the principal the calls act for (the credential must be allowed to speak for it)")
	f.DurationVar(&ttl, "confirmation-ttl", 5*time.Minute, "how long a call's confirmation stays valid")
	f.StringVar(&audience, "audience", os.Getenv("AIRLOCK_MCP_AUDIENCE"), "accept the identity provider's access tokens (AIRLOCK_OIDC_ISSUER) for this audience too (AIRLOCK_MCP_AUDIENCE); callers are oidc:<claim> principals")
	f.StringVar(&resource, "resource", os.Getenv("AIRLOCK_MCP_RESOURCE"), "this server's public URL, .../mcp, named in its RFC 9728 metadata (AIRLOCK_MCP_RESOURCE; default http://ADDR/mcp)")
	f.StringVar(&gatewayPath, "gateway-credential", os.Getenv("AIRLOCK_MCP_GATEWAY_CREDENTIAL"),
		"over HTTP: the gateway credential that attests each call (AIRLOCK_MCP_GATEWAY_CREDENTIAL; default $AIRLOCK_HOME/credentials/client-mcp-gateway.json)")
	return cmd
}

// loadGateway reads the gateway credential at path and checks that the clients file (where
// readable here) registers it as a gateway: a server whose attestations every worker refuses
// is an error at start, not at the first call.
func loadGateway(path string) (clients.Credential, error) {
	cred, err := clients.LoadCredential(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cred, fmt.Errorf("no gateway credential at %s: register one with `airlock clients add mcp-gateway --gateway --principal 'user:*'` "+
			"(its scopes bound whom it may vouch for) and point --gateway-credential or AIRLOCK_MCP_GATEWAY_CREDENTIAL at the file it writes", path)
	} else if err != nil {
		return cred, fmt.Errorf("the gateway credential: %w", err)
	}
	if set, lerr := clients.Load(cfg.ClientsPath()); lerr == nil {
		if c, ok := set.Get(cred.Name); !ok || !c.Gateway || c.PublicKey != cred.Public() {
			return cred, fmt.Errorf("the clients file %s does not register %s (%s) as a gateway with this key: workers would refuse every call (airlock clients add %s --gateway --principal 'user:*')",
				cfg.ClientsPath(), path, cred.Name, cred.Name)
		}
	}
	return cred, nil
}

// serveMCPHTTP serves srv's streamable HTTP handler on addr at /mcp until ctx ends.
func serveMCPHTTP(ctx context.Context, cmd *cobra.Command, addr string, srv *mcpserver.Server) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	if h := srv.MetadataHandler(); h != nil {
		mux.Handle(mcpserver.MetadataPath+"/mcp", h)
		mux.Handle(mcpserver.MetadataPath, h)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.OutOrStdout(), "airlock MCP server on http://%s/mcp (bearer tokens: airlock mcp token)\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve MCP: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			return fmt.Errorf("shut down the MCP server: %w", err)
		}
		return nil
	}
}

func newMCPTokenCmd() *cobra.Command {
	var (
		principal string
		ttl       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "token --principal P",
		Short: "Mint a bearer token for an MCP client of airlock mcp serve, signed with your client credential",
		Long: `Print a bearer token that proves "client C acts for principal P until T", signed with the
client credential AIRLOCK_CLIENT_CREDENTIAL names (airlock clients add). Put it in the MCP client's
configuration as the header "Authorization: Bearer <token>". Whoever holds the token can make calls
as P until it expires: keep its lifetime short and the file holding it private.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cred, err := clients.LoadCredential(cfg.ClientCredentialPath())
			if err != nil {
				return fmt.Errorf("the client credential: %w", err)
			}
			now := time.Now()
			tok, err := cred.MintBearer(principal, now, ttl)
			if err != nil {
				return err
			}
			// Where the clients file is readable here, a token it would refuse is not printed.
			if set, lerr := clients.Load(cfg.ClientsPath()); lerr == nil {
				if _, verr := set.VerifyBearer(tok, now); verr != nil {
					return fmt.Errorf("the clients file %s refuses this token: %w", cfg.ClientsPath(), verr)
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	cmd.Flags().StringVar(&principal, "principal", os.Getenv("USER"), "the principal the token's calls act for")
	cmd.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, fmt.Sprintf("how long the token is valid (at most %s)", clients.MaxBearerTTL))
	return cmd
}
