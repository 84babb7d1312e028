package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Check is one dependency probe of /healthz (Temporal, the store); it returns nil when the
// dependency answers. Name appears in the response body.
type Check struct {
	Name  string
	Probe func(ctx context.Context) error
}

// healthTimeout bounds one /healthz request.
const healthTimeout = 3 * time.Second

// Handler serves /metrics with metrics (nil: 404) and /healthz: HTTP 200 "ok" when every check
// passes, else 503 naming each failing dependency (never an error's text, which may carry a
// connection string).
func Handler(metrics http.Handler, checks ...Check) http.Handler {
	m := http.NewServeMux()
	if metrics != nil {
		m.Handle("GET /metrics", metrics)
	}
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var failed []string
		for _, c := range checks {
			if err := c.Probe(ctx); err != nil {
				failed = append(failed, c.Name)
			}
		}
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, n := range failed {
				fmt.Fprintf(w, "%s: unavailable\n", n)
			}
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return m
}

// Serve serves h on addr until ctx ends, then shuts down gracefully. ready, if set, receives
// the bound address (addr may use port 0).
func Serve(ctx context.Context, addr string, h http.Handler, ready chan<- string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("telemetry: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("telemetry: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
