package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
)

func TestFromEnvDefaultsAndOverrides(t *testing.T) {
	t.Setenv("AIRLOCK_HOME", "")
	t.Setenv("AIRLOCK_DATABASE_URL", "")
	t.Setenv("AIRLOCK_REGISTRY_LAYERS", " agentdojo-banking, ,agentdojo-workspace ")
	t.Setenv("AIRLOCK_TASK_QUEUE", "")
	c := FromEnv()
	if c.Home != ".airlock" || c.StoreURL() != "sqlite:.airlock/airlock.db" || c.KeyFile() != ".airlock/keys/approver.key" || c.TaskQueue != "airlock-turns" {
		t.Fatalf("defaults: %+v", c)
	}
	if len(c.Layers) != 2 || c.Layers[0] != "agentdojo-banking" || c.Layers[1] != "agentdojo-workspace" {
		t.Fatalf("layers = %q", c.Layers)
	}
	t.Setenv("AIRLOCK_DATABASE_URL", "postgres://u@h/db")
	if got := FromEnv().StoreURL(); got != "postgres://u@h/db" {
		t.Fatalf("store URL = %s", got)
	}
}

func TestWorkflowURLEscapesTheID(t *testing.T) {
	c := Config{TemporalUI: "http://localhost:8233/"}
	if got := c.WorkflowURL("default", "turn/c/1"); got != "http://localhost:8233/namespaces/default/workflows/turn%2Fc%2F1" {
		t.Fatalf("url = %s", got)
	}
}

func TestTuneForLoopbackOnlyTouchesLocalServers(t *testing.T) {
	for _, hp := range []string{"127.0.0.1:7233", "localhost:7233", "[::1]:7233"} {
		o := client.Options{HostPort: hp}
		TuneForLoopback(&o)
		if _, ok := o.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionNone); !ok {
			t.Errorf("%s: compression not disabled", hp)
		}
	}
	o := client.Options{HostPort: "my-ns.tmprl.cloud:7233"}
	TuneForLoopback(&o)
	if o.ConnectionOptions.GrpcCompression != nil {
		t.Error("a remote server keeps the SDK default (gzip)")
	}
}

// A Config printed or logged never shows the database password.
func TestConfigNeverPrintsTheDatabasePassword(t *testing.T) {
	c := Config{Home: ".airlock", DatabaseURL: "postgres://airlock:Hunter2secret@db:5432/airlock?sslpassword=K3ysecret", TaskQueue: "q"}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), logged.String()} {
		if strings.Contains(s, "secret") {
			t.Errorf("config shows a secret: %s", s)
		}
		if !strings.Contains(s, "postgres://airlock:xxxxx@db:5432/airlock") {
			t.Errorf("config hides the database location: %s", s)
		}
	}
}

func TestFromEnvFetchSettings(t *testing.T) {
	t.Setenv("AIRLOCK_FETCH_ALLOW", " 10.0.0.0/8, ,127.0.0.1:8080 ")
	t.Setenv("AIRLOCK_FETCH_ALLOW_PRIVATE", "")
	t.Setenv("AIRLOCK_WEB_ADDR", "")
	c := FromEnv()
	if len(c.FetchAllow) != 2 || c.FetchAllow[0] != "10.0.0.0/8" || c.FetchAllow[1] != "127.0.0.1:8080" {
		t.Fatalf("FetchAllow = %q", c.FetchAllow)
	}
	if c.WebAddr != "127.0.0.1:8780" || c.RetiredFetchAllowPrivate {
		t.Fatalf("defaults: WebAddr %q, retired %v", c.WebAddr, c.RetiredFetchAllowPrivate)
	}
	for _, v := range []string{"1", "0", "true"} { // any value: refuse rather than guess
		t.Setenv("AIRLOCK_FETCH_ALLOW_PRIVATE", v)
		if !FromEnv().RetiredFetchAllowPrivate {
			t.Errorf("AIRLOCK_FETCH_ALLOW_PRIVATE=%s not noticed", v)
		}
	}
}
