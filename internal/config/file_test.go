package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/configuration.md is generated from Settings (airlock config doc): it must not drift.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != Reference() {
		t.Fatal("docs/configuration.md is stale: run `go run ./cmd/airlock config doc` (or bin/airlock config doc)")
	}
}

// Every setting has a key in snake_case, an environment variable, a group and a meaning, and
// no two share a key or a variable.
func TestSettingsTable(t *testing.T) {
	keys, envs := map[string]bool{}, map[string]bool{}
	for _, s := range Settings {
		if s.Key == "" || strings.ToLower(s.Key) != s.Key || strings.ContainsAny(s.Key, "-. ") || s.Env == "" || s.Group == "" || s.Doc == "" {
			t.Errorf("incomplete setting %+v", s)
		}
		if keys[s.Key] || envs[s.Env] {
			t.Errorf("%s / %s listed twice", s.Key, s.Env)
		}
		keys[s.Key], envs[s.Env] = true, true
	}
}

// The file's values reach the environment only where the environment has none; bad files are
// refused whole, naming the line and the key.
func TestApplyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("AIRLOCK_TASK_QUEUE", "from-env")
	os.Unsetenv("AIRLOCK_TASK_QUEUE")
	t.Setenv("AIRLOCK_WEB_ADDR", "127.0.0.1:1")
	t.Setenv("AIRLOCK_REGISTRY_LAYERS", "")
	os.Unsetenv("AIRLOCK_REGISTRY_LAYERS")
	p := write("ok.yaml", "# a deployment\ntask_queue: prod\nweb_addr: 0.0.0.0:80\nregistry_layers: [a.json, b.json]\nmetrics_addr: ~\n", 0o644)
	got, err := ApplyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("AIRLOCK_TASK_QUEUE") != "prod" || os.Getenv("AIRLOCK_WEB_ADDR") != "127.0.0.1:1" || os.Getenv("AIRLOCK_REGISTRY_LAYERS") != "a.json,b.json" {
		t.Fatalf("environment after the file: queue %q, web %q, layers %q", os.Getenv("AIRLOCK_TASK_QUEUE"), os.Getenv("AIRLOCK_WEB_ADDR"), os.Getenv("AIRLOCK_REGISTRY_LAYERS"))
	}
	if !got.Set["task_queue"] || got.Set["web_addr"] || got.Set["metrics_addr"] {
		t.Fatalf("applied = %+v", got.Set)
	}
	c := FromEnv()
	byKey := map[string]Effective{}
	for _, e := range EffectiveSettings(c, nil) {
		byKey[e.Key] = e
	}
	if e := byKey["task_queue"]; e.Source != SourceFile || e.From != p || e.Value != "prod" {
		t.Fatalf("task_queue = %+v", e)
	}
	if e := byKey["web_addr"]; e.Source != SourceEnv || e.Value != "127.0.0.1:1" {
		t.Fatalf("web_addr = %+v", e)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"unknown", "task_queu: x\n", `unknown key "task_queu", did you mean "task_queue"?`},
		{"twice", "task_queue: a\ntask_queue: b\n", `line 2: key "task_queue" given twice`},
		{"list for scalar", "task_queue: [a, b]\n", "takes one value, not a list"},
		{"mapping", "temporal_address:\n  host: x\n", "temporal_address must be a value"},
		{"comma item", "fetch_allow: ['10.0.0.0/8,1.2.3.4']\n", "without commas"},
		{"not a mapping", "- a\n- b\n", "must be a mapping"},
		{"secret readable by others", "database_url: postgres://u:pw@db/x\n", "holds the secret database_url but others may read it"},
	} {
		_, err := ApplyFile(write(tc.name+".yaml", tc.body, 0o644))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if err != nil && tc.name != "secret readable by others" && !errors.Is(err, ErrConfigFile) {
			t.Errorf("%s: %v does not wrap ErrConfigFile", tc.name, err)
		}
	}
	// The same secret in an owner-only file is applied, and never shown.
	os.Unsetenv("AIRLOCK_DATABASE_URL")
	t.Setenv("AIRLOCK_DATABASE_URL", "")
	os.Unsetenv("AIRLOCK_DATABASE_URL")
	if _, err := ApplyFile(write("secret.yaml", "database_url: postgres://u:pw@db/x\n", 0o600)); err != nil {
		t.Fatal(err)
	}
	for _, e := range EffectiveSettings(FromEnv(), nil) {
		if strings.Contains(ShowLine(e), "pw") || strings.Contains(e.Value, "pw") {
			t.Fatalf("a secret shown: %s", ShowLine(e))
		}
		if e.Key == "database_url" && (!e.IsSet || e.Source != SourceFile) {
			t.Fatalf("database_url = %+v", e)
		}
	}
	if _, err := ApplyFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}

// --config F, --config=F, AIRLOCK_CONFIG, then ./airlock.yaml.
func TestFilePath(t *testing.T) {
	t.Setenv(ConfigEnv, "")
	if p, ex := FilePath([]string{"worker", "--config", "x.yaml"}); p != "x.yaml" || !ex {
		t.Fatal(p, ex)
	}
	if p, _ := FilePath([]string{"--config=y.yaml", "turn"}); p != "y.yaml" {
		t.Fatal(p)
	}
	if p, _ := FilePath([]string{"turn", "--", "--config", "z"}); p != "" && p != DefaultFile {
		t.Fatal(p)
	}
	t.Setenv(ConfigEnv, "env.yaml")
	if p, ex := FilePath(nil); p != "env.yaml" || !ex {
		t.Fatal(p, ex)
	}
}

// Each group's settings are listed together, so the reference has one section per group.
func TestSettingsGroupsAreContiguous(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for _, s := range Settings {
		if s.Group != prev && seen[s.Group] {
			t.Errorf("setting %s reopens group %s", s.Key, s.Group)
		}
		seen[s.Group], prev = true, s.Group
	}
}

// A second YAML document is refused, not silently ignored; config show never writes a value's
// control characters raw.
func TestFileRefusesSecondDocumentAndShowEscapes(t *testing.T) {
	if _, err := ParseFile([]byte("task_queue: a\n---\ndatabase_url: postgres://x\n")); err == nil || !strings.Contains(err.Error(), "second YAML document") {
		t.Fatalf("a second document: %v", err)
	}
	line := ShowLine(Effective{Setting: Setting{Key: "task_queue"}, Value: "\x1b[2Jevil\nfake_line", IsSet: true, Source: SourceEnv})
	if strings.ContainsAny(line, "\x1b\n") {
		t.Fatalf("a raw control character reaches the terminal: %q", line)
	}
}

// The small production deployment's airlock.yaml in docs/operators.md parses as written:
// every key is a setting (an unknown one would be refused with the nearest), none is
// repeated in another spelling.
func TestOperatorsExampleFileParses(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operators.md"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "```yaml\n# airlock.yaml of a small production deployment")
	ok := i >= 0
	block, _, closed := strings.Cut(string(b)[max(i, 0)+len("```yaml\n"):], "```")
	if !ok || !closed {
		t.Fatal("docs/operators.md has no small production airlock.yaml")
	}
	vals, err := ParseFile([]byte(block))
	if err != nil {
		t.Fatalf("docs/operators.md's airlock.yaml: %v", err)
	}
	for _, k := range []string{"database_url", "temporal_address", "temporal_ui", "registry_layers", "approvers", "passkey_origins", "anthropic_api_key_file"} {
		if _, ok := vals[k]; !ok {
			t.Errorf("the example lost %s: %v", k, vals)
		}
	}
}

// config show never shows a URL's key: a base URL's ?api-key=, a witness URL's ?token= in a
// list are masked; the rest of the value (a host, a file path) stays readable.
func TestEffectiveSettingsMaskURLSecrets(t *testing.T) {
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", "https://gw.example/v1?api-key=K3yInBaseURL")
	t.Setenv("AIRLOCK_RECEIPTS_PUBLISH", "/srv/ck.txt, https://w.example/ck?token=T0kInWitnessURL")
	seen := 0
	for _, e := range EffectiveSettings(Config{}, nil) {
		line := ShowLine(e)
		if strings.Contains(line, "K3yInBaseURL") || strings.Contains(line, "T0kInWitnessURL") {
			t.Errorf("a URL's key shown: %s", line)
		}
		switch e.Key {
		case "openai_base_url":
			seen++
			if !strings.Contains(e.Value, "gw.example/v1") {
				t.Errorf("openai_base_url = %q, want the host and path kept", e.Value)
			}
		case "receipts_publish":
			seen++
			if !strings.Contains(e.Value, "/srv/ck.txt") || !strings.Contains(e.Value, "w.example/ck") {
				t.Errorf("receipts_publish = %q, want the path and the host kept", e.Value)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("saw %d of the two settings", seen)
	}
}
