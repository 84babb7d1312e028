package workers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/capabilities"
	"github.com/airlock-dev/airlock/internal/config"
)

// devUIOffset is where `temporal server start-dev` puts its Web UI by default: the
// frontend's port + 1000 (7233 → 8233).
const devUIOffset = 1000

// resolveTimeout bounds the DNS lookups of protected services' hostnames at start.
const resolveTimeout = 10 * time.Second

// Names of the services web.fetch must never reach, as they appear in its errors.
const (
	ServiceTemporalFrontend = "Temporal frontend"
	// ServiceTemporalHTTP is the frontend's HTTP API, by default on the gRPC port + 10 (7243
	// beside 7233 in Temporal's server configuration). The dev server picks a random HTTP
	// port unless started with --http-port; see docs/operators.md, "Configuration".
	ServiceTemporalHTTP = "Temporal HTTP API"
	// ServiceTemporalUI is AIRLOCK_TEMPORAL_UI, and the dev server's default UI port (the
	// frontend's port + 1000, on the frontend's host).
	ServiceTemporalUI = "Temporal UI"
	ServiceApprover   = "approver page"
	ServiceStore      = "store"
	// ServiceStream is the client-stream endpoint (airlock stream serve, AIRLOCK_STREAM_ADDR,
	// default 127.0.0.1:8091): it serves turns' events, approver cards included.
	ServiceStream = "stream endpoint"
	// ServiceAPI is the application API (airlock api serve, AIRLOCK_API_ADDR, default
	// DefaultAPIAddr): it starts turns and decides confirmations for its callers.
	ServiceAPI = "application API"
	// ServiceMetrics is the /metrics and /healthz listener (AIRLOCK_METRICS_ADDR) of the
	// worker and the approver page.
	ServiceMetrics = "metrics and health endpoint"
	// ServiceCodec is the codec server (airlock codec-server, AIRLOCK_CODEC_ADDR, default
	// DefaultCodecAddr), whose sign-in opens payloads.
	ServiceCodec = "codec server"
)

// Default listen addresses of Airlock's own listeners, denied to web.fetch whether or not
// they are running (issue 32, item 5).
const (
	DefaultAPIAddr   = "127.0.0.1:8092"
	DefaultCodecAddr = "127.0.0.1:8781"
)

// FetchConfig builds web.fetch's configuration from cfg: the private allow-list from
// cfg.FetchAllow, and the deny-list from ProtectedServices, resolved to addresses now (ctx
// bounds the DNS lookups; see capabilities.ResolveProtected for which addresses each service
// closes). It fails, and the worker must not start, when the removed
// AIRLOCK_FETCH_ALLOW_PRIVATE is set (config.ErrFetchAllowPrivateRemoved), when an allow-list
// entry does not parse (capabilities.ErrAllowList), or when a protected service cannot be
// placed (capabilities.ErrProtectedService, or an error naming the variable to fix). No error
// carries a password.
func FetchConfig(ctx context.Context, cfg config.Config) (capabilities.FetchConfig, error) {
	if cfg.RetiredFetchAllowPrivate {
		return capabilities.FetchConfig{}, config.ErrFetchAllowPrivateRemoved
	}
	allow, err := capabilities.ParseAllowList(cfg.FetchAllow)
	if err != nil {
		return capabilities.FetchConfig{}, fmt.Errorf("AIRLOCK_FETCH_ALLOW: %w", err)
	}
	services, err := ProtectedServices(cfg)
	if err != nil {
		return capabilities.FetchConfig{}, err
	}
	protected, err := capabilities.ResolveProtected(ctx, services)
	if err != nil {
		return capabilities.FetchConfig{}, fmt.Errorf("web.fetch deny-list: %w", err)
	}
	return capabilities.FetchConfig{Allow: allow, Protected: protected}, nil
}

// ProtectedServices lists where Airlock's own services listen, as cfg and the Temporal client
// configuration (config.TemporalOptions: TEMPORAL_ADDRESS, profiles) say:
//
//   - the Temporal frontend (its host:port), its HTTP API (same host, port + 10) and the dev
//     server's default Web UI (same host, port + 1000);
//   - the Temporal UI of cfg.TemporalUI (AIRLOCK_TEMPORAL_UI; port 80/443 by scheme when the
//     URL has none);
//   - the approver page, cfg.WebAddr (AIRLOCK_WEB_ADDR);
//   - the client-stream endpoint, AIRLOCK_STREAM_ADDR (default 127.0.0.1:8091);
//   - the application API, AIRLOCK_API_ADDR (default DefaultAPIAddr); the metrics and
//     health listener, AIRLOCK_METRICS_ADDR (when set); the codec server,
//     AIRLOCK_CODEC_ADDR (default DefaultCodecAddr);
//   - the store, when PostgreSQL: the host and port of cfg.DatabaseURL (the URL's, else its
//     host/port query parameters, else PGHOST/PGPORT, else localhost:5432, as lib/pq does; a
//     Unix socket directory counts as localhost). SQLite has no address.
//
// Empty settings are skipped. A setting that does not parse is an error naming the variable;
// the database URL itself is never repeated, since it may hold a password.
func ProtectedServices(cfg config.Config) ([]capabilities.Service, error) {
	var out []capabilities.Service
	add := func(name, host string, port int) {
		if port > 0 && port <= 65535 {
			out = append(out, capabilities.Service{Name: name, Host: host, Port: uint16(port)})
		}
	}
	opts, err := config.TemporalOptions()
	if err != nil {
		return nil, err
	}
	host, port, err := splitHostPort(opts.HostPort)
	if err != nil {
		return nil, fmt.Errorf("TEMPORAL_ADDRESS %q: %w", opts.HostPort, err)
	}
	add(ServiceTemporalFrontend, host, port)
	add(ServiceTemporalHTTP, host, port+10)
	add(ServiceTemporalUI, host, port+devUIOffset)

	if cfg.TemporalUI != "" {
		u, err := url.Parse(cfg.TemporalUI)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("AIRLOCK_TEMPORAL_UI %q: want a URL such as http://localhost:8233", cfg.TemporalUI)
		}
		port := 80
		if strings.EqualFold(u.Scheme, "https") {
			port = 443
		}
		if p := u.Port(); p != "" {
			if port, err = strconv.Atoi(p); err != nil {
				return nil, fmt.Errorf("AIRLOCK_TEMPORAL_UI %q: bad port", cfg.TemporalUI)
			}
		}
		add(ServiceTemporalUI, u.Hostname(), port)
	}

	if cfg.WebAddr != "" {
		host, port, err := splitHostPort(cfg.WebAddr)
		if err != nil {
			return nil, fmt.Errorf("AIRLOCK_WEB_ADDR %q: %w", cfg.WebAddr, err)
		}
		add(ServiceApprover, host, port)
	}

	streamAddr := os.Getenv("AIRLOCK_STREAM_ADDR")
	if streamAddr == "" {
		streamAddr = "127.0.0.1:8091"
	}
	if host, port, err := splitHostPort(streamAddr); err != nil {
		return nil, fmt.Errorf("AIRLOCK_STREAM_ADDR %q: %w", streamAddr, err)
	} else {
		add(ServiceStream, host, port)
	}

	// Every other listener Airlock opens: its variable's address, else its default.
	for _, l := range []struct{ name, env, def string }{
		{ServiceAPI, "AIRLOCK_API_ADDR", DefaultAPIAddr},
		{ServiceMetrics, "AIRLOCK_METRICS_ADDR", ""},
		{ServiceCodec, "AIRLOCK_CODEC_ADDR", DefaultCodecAddr},
	} {
		a := os.Getenv(l.env)
		if a == "" {
			a = l.def
		}
		if a == "" {
			continue
		}
		host, port, err := splitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", l.env, a, err)
		}
		add(l.name, host, port)
	}

	if db := cfg.DatabaseURL; strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		host, port, err := postgresHostPort(db)
		if err != nil {
			return nil, fmt.Errorf("AIRLOCK_DATABASE_URL: %w", err)
		}
		add(ServiceStore, host, port)
	}
	return out, nil
}

// splitHostPort splits "host:port", "[v6]:port" or ":port" (every interface).
func splitHostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, errors.New("want host:port")
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

// postgresHostPort finds the server lib/pq connects to for a postgres:// URL. Errors never
// repeat the URL.
func postgresHostPort(raw string) (string, int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", 0, errors.New("the URL does not parse (not shown: it may hold a password)")
	}
	q := u.Query()
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = q.Get("host")
	}
	if port == "" {
		port = q.Get("port")
	}
	if host == "" {
		host = os.Getenv("PGHOST")
	}
	if port == "" {
		port = os.Getenv("PGPORT")
	}
	if host == "" || strings.HasPrefix(host, "/") {
		host = "localhost" // default, or a Unix socket directory: a local server
	}
	if port == "" {
		port = "5432"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("bad port %q in the database URL", port)
	}
	return host, n, nil
}
