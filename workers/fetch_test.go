package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlock-dev/airlock/internal/capabilities"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/registry"
)

// isolateTemporalEnv makes config.TemporalOptions read only what the test sets.
func isolateTemporalEnv(t *testing.T, address string) {
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
	t.Setenv("TEMPORAL_PROFILE", "")
	t.Setenv("TEMPORAL_ADDRESS", address)
}

func TestProtectedServicesFromConfig(t *testing.T) {
	isolateTemporalEnv(t, "temporal.internal:7300")
	t.Setenv("PGHOST", "")
	t.Setenv("PGPORT", "")
	t.Setenv("AIRLOCK_STREAM_ADDR", "stream.internal:8091")
	// Every listener Airlock opens is protected (issue 32, item 5): the API, the metrics and
	// health listener, the codec server.
	t.Setenv("AIRLOCK_API_ADDR", "api.internal:9092")
	t.Setenv("AIRLOCK_METRICS_ADDR", ":9464")
	t.Setenv("AIRLOCK_CODEC_ADDR", "")
	cfg := config.Config{
		TemporalUI:  "https://ui.internal/",
		WebAddr:     ":8790",
		DatabaseURL: "postgres://airlock:hunter2@db.internal:6543/airlock?sslmode=disable",
	}
	got, err := ProtectedServices(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []capabilities.Service{
		{Name: ServiceTemporalFrontend, Host: "temporal.internal", Port: 7300},
		{Name: ServiceTemporalHTTP, Host: "temporal.internal", Port: 7310},
		{Name: ServiceTemporalUI, Host: "temporal.internal", Port: 8300},
		{Name: ServiceTemporalUI, Host: "ui.internal", Port: 443},
		{Name: ServiceApprover, Host: "", Port: 8790},
		{Name: ServiceStream, Host: "stream.internal", Port: 8091},
		{Name: ServiceAPI, Host: "api.internal", Port: 9092},
		{Name: ServiceMetrics, Host: "", Port: 9464},
		{Name: ServiceCodec, Host: "127.0.0.1", Port: 8781}, // its default: closed even when not running
		{Name: ServiceStore, Host: "db.internal", Port: 6543},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("services =\n%v\nwant\n%v", got, want)
	}

	for _, tt := range []struct{ url, host string }{
		{"postgres:///airlock?host=/var/run/postgresql", "localhost:5432"},
		{"postgresql://u@[::1]/db", "::1:5432"},
		{"postgres://u@10.1.2.3/db?port=6000", "10.1.2.3:6000"},
	} {
		cfg := config.Config{DatabaseURL: tt.url}
		got, err := ProtectedServices(cfg)
		if err != nil {
			t.Fatal(err)
		}
		store := got[len(got)-1]
		if store.Name != ServiceStore || fmt.Sprintf("%s:%d", store.Host, store.Port) != tt.host {
			t.Errorf("%s: store = %+v, want %s", tt.url, store, tt.host)
		}
	}

	// Settings that do not parse name the variable, never the database password.
	for name, c := range map[string]config.Config{
		"AIRLOCK_DATABASE_URL": {DatabaseURL: "postgres://airlock:hunter2@db:port/x"},
		"AIRLOCK_WEB_ADDR":     {WebAddr: "127.0.0.1"},
		"AIRLOCK_TEMPORAL_UI":  {TemporalUI: "localhost:8233"},
	} {
		_, err := ProtectedServices(c)
		if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error = %v", name, err)
		}
	}
}

// The worker's web.fetch, as LoadRegistry binds it, refuses the configured Temporal frontend,
// Temporal UI, approver page and store even though the allow-list opens all of loopback, and
// reaches an allowed server; redirects into a protected service are refused as well.
func TestLoadRegistryWebFetchRefusesAirlockServices(t *testing.T) {
	var protectedHits atomic.Int64
	service := func() *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			protectedHits.Add(1)
			fmt.Fprint(w, "secret history")
		}))
		t.Cleanup(s.Close)
		return s
	}
	frontend, ui, approver, db := service(), service(), service(), service()
	// Every other listener Airlock opens (issue 32, item 5), reached through the variables
	// that place them: the application API, the metrics and health listener, the codec
	// server, the stream endpoint.
	api, metrics, codecSrv, streamSrv := service(), service(), service(), service()
	var location string
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, location, http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "public page")
	}))
	t.Cleanup(page.Close)
	hp := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

	isolateTemporalEnv(t, hp(frontend))
	t.Setenv("AIRLOCK_API_ADDR", hp(api))
	t.Setenv("AIRLOCK_METRICS_ADDR", hp(metrics))
	t.Setenv("AIRLOCK_CODEC_ADDR", hp(codecSrv))
	t.Setenv("AIRLOCK_STREAM_ADDR", hp(streamSrv))
	cfg := config.Config{
		TemporalUI:  ui.URL,
		WebAddr:     hp(approver),
		DatabaseURL: "postgres://airlock:hunter2@" + hp(db) + "/airlock",
		FetchAllow:  []string{"127.0.0.0/8", "::1/128", "0.0.0.0/0", "::/0"}, // whatever the allow-list says
	}
	reg, err := LoadRegistry(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fetch, ok := reg.ByToolName("web_fetch")
	if !ok {
		t.Fatal("web_fetch not bound")
	}
	invoke := func(u string) registry.Output {
		t.Helper()
		args, _ := json.Marshal(capabilities.FetchArgs{URL: u})
		out, err := fetch.Impl.Invoke(context.Background(), registry.Invocation{Arguments: args, Decoded: &capabilities.FetchArgs{URL: u}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := invoke(page.URL + "/"); out.Error != "" || !strings.Contains(string(out.Data), "public page") {
		t.Fatalf("allowed server: %+v", out)
	}
	for name, s := range map[string]*httptest.Server{
		ServiceTemporalFrontend: frontend, ServiceTemporalUI: ui, ServiceApprover: approver, ServiceStore: db,
		ServiceAPI: api, ServiceMetrics: metrics, ServiceCodec: codecSrv, ServiceStream: streamSrv,
	} {
		for _, u := range []string{s.URL + "/", "http://" + strings.Replace(hp(s), "127.0.0.1", "localhost", 1) + "/"} {
			out := invoke(u)
			if !strings.Contains(out.Error, "protected Airlock service: "+name) || strings.Contains(out.Error, "hunter2") {
				t.Errorf("%s via %s: error = %q", name, u, out.Error)
			}
			location = u
			out = invoke(page.URL + "/redirect")
			if !strings.Contains(out.Error, "protected Airlock service: "+name) {
				t.Errorf("redirect to %s via %s: error = %q", name, u, out.Error)
			}
		}
	}
	if n := protectedHits.Load(); n != 0 {
		t.Errorf("protected services saw %d requests, want 0", n)
	}
}

func TestLoadRegistryRefusesFetchMisconfiguration(t *testing.T) {
	isolateTemporalEnv(t, "127.0.0.1:7233")
	t.Setenv("AIRLOCK_FETCH_ALLOW_PRIVATE", "1")
	_, err := LoadRegistry(config.FromEnv(), nil, nil)
	if !errors.Is(err, config.ErrFetchAllowPrivateRemoved) || !strings.Contains(err.Error(), "AIRLOCK_FETCH_ALLOW,") && !strings.Contains(err.Error(), "AIRLOCK_FETCH_ALLOW ") {
		t.Fatalf("the removed AIRLOCK_FETCH_ALLOW_PRIVATE must refuse start and name its replacement: %v", err)
	}
	t.Setenv("AIRLOCK_FETCH_ALLOW_PRIVATE", "")
	t.Setenv("AIRLOCK_FETCH_ALLOW", "10.0.0.0/8, 127.0.0.1:99999")
	_, err = LoadRegistry(config.FromEnv(), nil, nil)
	if !errors.Is(err, capabilities.ErrAllowList) || !strings.Contains(err.Error(), `AIRLOCK_FETCH_ALLOW: `) || !strings.Contains(err.Error(), `"127.0.0.1:99999"`) {
		t.Fatalf("a bad allow-list entry must refuse start and be named: %v", err)
	}
	t.Setenv("AIRLOCK_FETCH_ALLOW", "10.0.0.0/8,127.0.0.1:8080")
	if _, err := LoadRegistry(config.FromEnv(), nil, nil); err != nil {
		t.Fatalf("a valid allow-list: %v", err)
	}
}
