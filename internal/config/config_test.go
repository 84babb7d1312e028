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
	if c.Home != ".airlock" || c.StoreURL() != "sqlite:.airlock/airlock.db" || c.KeyFile() != ".airlock/approver.key" || c.TaskQueue != "airlock-turns" {
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
