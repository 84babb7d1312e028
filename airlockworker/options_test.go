package airlockworker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/registry"
)

// Every setting of the worker's configuration has its public option: a Config with every field
// set survives the trip through Options unchanged, so a field added to the configuration
// without its option fails here (the drift a team once copied by hand).
func TestOptionsCarryEveryConfigField(t *testing.T) {
	var c config.Config
	v := reflect.ValueOf(&c).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x-" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"x-" + v.Type().Field(i).Name}))
		default:
			t.Fatalf("config field %s has kind %s: map it in options.go and here", v.Type().Field(i).Name, f.Kind())
		}
	}
	if got := fromConfig(c).config(); !reflect.DeepEqual(got, c) {
		t.Fatalf("lost in Options:\n got %+v\nwant %+v", got, c)
	}
}

// OptionsFromEnv reads what `airlock worker` reads, with its defaults.
func TestOptionsFromEnvMatchTheWorkerEnvironment(t *testing.T) {
	t.Setenv("AIRLOCK_HOME", "/tmp/h")
	t.Setenv("AIRLOCK_REGISTRY_LAYERS", "a.json, agentdojo-banking")
	t.Setenv("AIRLOCK_METRICS_ADDR", "127.0.0.1:0")
	t.Setenv("AIRLOCK_TASK_QUEUE", "")
	o := OptionsFromEnv()
	if o.Home != "/tmp/h" || o.TaskQueue != "airlock-turns" || len(o.Layers) != 2 || o.Layers[0] != "a.json" || o.MetricsAddr != "127.0.0.1:0" {
		t.Fatalf("%+v", o)
	}
	if !reflect.DeepEqual(o.config(), config.FromEnv()) {
		t.Fatalf("OptionsFromEnv differs from the worker's configuration:\n%+v\n%+v", o.config(), config.FromEnv())
	}
}

// A worker binary's "check" prints every diagnostic and fails, or lists what it serves.
func TestMainCheck(t *testing.T) {
	dir := t.TempDir()
	layer := filepath.Join(dir, "t.v1.json")
	doc := `{"schema/v":"capability-registry.v1","revision":"t.1","entries":[
 {"capability/id":"team.echo","version":1,"owner":"team","surfaces":["host-local"],"wire/name":"app/team.echo","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":"team_echo","description":"Echo.","side-effect":"none","network":"local","per-turn/cap":2,"timeout":"5s","model-visible":true,
   "destination":{"kind":"none"}}}]}`
	if err := os.WriteFile(layer, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := registry.StructuralPolicy("t policy", "t.1", nil, registry.Source{Name: layer, Data: []byte(doc)})
	if err := os.WriteFile(filepath.Join(dir, "t.v1.policy.json"), pol.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AIRLOCK_HOME", dir)
	t.Setenv("AIRLOCK_REGISTRY_LAYERS", layer)
	var out, errOut bytes.Buffer
	if code := main([]string{"check"}, &out, &errOut, nil); code != 1 || !strings.Contains(errOut.String(), "team.echo@1: [implementation-bound]") {
		t.Fatalf("check without the implementation: %d\n%s", code, errOut.String())
	}
	type echoArgs struct {
		Text string `json:"text"`
	}
	echo := registry.Typed("team.echo", 1, func(_ context.Context, a *echoArgs, _ registry.Invocation) (registry.Output, error) {
		return registry.Output{}, nil
	})
	out.Reset()
	if code := main([]string{"check"}, &out, &errOut, []registry.Implementation{echo}); code != 0 || !strings.Contains(out.String(), "team.echo@1 (tool team_echo): side effect none, network local, destination none") {
		t.Fatalf("check: %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if code := main([]string{"bogus"}, &out, &errOut, nil); code != 2 {
		t.Fatalf("unknown command: %d", code)
	}
}
