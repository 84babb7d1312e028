package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/airlock-dev/airlock/internal/privfile"
	"github.com/airlock-dev/airlock/internal/redact"
)

// The configuration file (airlock.yaml): one place for the settings every Airlock process
// reads, so a fresh shell, the worker, the page, the API and every CLI command agree. Its keys
// are Settings' keys; a value in the environment overrides the file, and a flag overrides both.
// The file is applied by setting each variable the environment does not set, before anything
// reads it: every reader of the environment (including the Temporal SDK's envconfig) sees the
// file's values without knowing about it.

// DefaultFile is the configuration file read when neither --config nor AIRLOCK_CONFIG names
// one: airlock.yaml in the working directory, when it exists.
const DefaultFile = "airlock.yaml"

// ConfigEnv names the configuration file (overridden by --config).
const ConfigEnv = "AIRLOCK_CONFIG"

// ErrConfigFile: a configuration file that cannot be used (unknown key, wrong type, a secret
// in a file others may read). The message names the file and the key.
var ErrConfigFile = errors.New("config: configuration file")

// Source says where a setting's effective value came from.
type Source string

// The sources of a value, in the order that wins: flag over environment over file.
const (
	SourceFlag    Source = "flag"
	SourceEnv     Source = "env"
	SourceFile    Source = "file"
	SourceDefault Source = "default"
)

// Applied is what ApplyFile did: the file it read ("" when none) and the keys it set.
type Applied struct {
	Path string
	Set  map[string]bool
}

// applied is the process's ApplyFile result, for `airlock config show`.
var applied Applied

// AppliedFile is what the process's ApplyFile read and set.
func AppliedFile() Applied { return applied }

// FilePath is the configuration file to read: the value of --config in args (--config F or
// --config=F, before a "--"), else AIRLOCK_CONFIG, else DefaultFile when it exists, else "".
// explicit reports that it was named (a named file that does not exist is an error).
func FilePath(args []string) (path string, explicit bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v, true
		}
		if a == "--config" && i+1 < len(args) {
			return args[i+1], true
		}
	}
	if p := os.Getenv(ConfigEnv); p != "" {
		return p, true
	}
	if _, err := os.Stat(DefaultFile); err == nil {
		return DefaultFile, false
	}
	return "", false
}

// ParseFile reads a configuration file's values: a YAML mapping of Settings keys to scalars
// (a list for List settings). Errors wrap ErrConfigFile and name the key: an unknown key (with
// the nearest known one), a mapping value, a list for a setting that is no list, a repeated key.
func ParseFile(b []byte) (map[string]string, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string]string{}, nil
		}
		return nil, fmt.Errorf("%w: %w", ErrConfigFile, err)
	}
	out := map[string]string{}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, fmt.Errorf("%w: line %d: a second YAML document: put every setting in one", ErrConfigFile, more.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %w", ErrConfigFile, err)
	}
	if len(doc.Content) == 0 {
		return out, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: the file must be a mapping of setting keys to values (line %d)", ErrConfigFile, root.Line)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		s, ok := SettingByKey(k.Value)
		if !ok {
			return nil, fmt.Errorf("%w: line %d: unknown key %q%s (airlock config show lists every key)", ErrConfigFile, k.Line, k.Value, nearest(k.Value))
		}
		if _, dup := out[s.Key]; dup {
			return nil, fmt.Errorf("%w: line %d: key %q given twice", ErrConfigFile, k.Line, s.Key)
		}
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag == "!!null" {
				continue
			}
			out[s.Key] = v.Value
		case yaml.SequenceNode:
			if !s.List {
				return nil, fmt.Errorf("%w: line %d: %s takes one value, not a list", ErrConfigFile, k.Line, s.Key)
			}
			var items []string
			for _, it := range v.Content {
				if it.Kind != yaml.ScalarNode || strings.Contains(it.Value, ",") {
					return nil, fmt.Errorf("%w: line %d: every item of %s must be a single value without commas", ErrConfigFile, it.Line, s.Key)
				}
				items = append(items, it.Value)
			}
			out[s.Key] = strings.Join(items, ",")
		default:
			return nil, fmt.Errorf("%w: line %d: %s must be a value%s", ErrConfigFile, k.Line, s.Key, map[bool]string{true: " or a list", false: ""}[s.List])
		}
	}
	return out, nil
}

// nearest suggests the known key closest to an unknown one (", did you mean …?"), or "".
func nearest(key string) string {
	best, bestD := "", 4
	for _, s := range Settings {
		if d := distance(key, s.Key); d < bestD {
			best, bestD = s.Key, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(", did you mean %q?", best)
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// ApplyFile reads the configuration file at path (nothing when path is "") and sets, for each
// of its values, the setting's environment variable when the environment does not set it. A
// file holding a secret must be readable by its owner only (privfile). It records what it did
// for AppliedFile. Errors wrap ErrConfigFile, or fs.ErrNotExist for a missing file.
func ApplyFile(path string) (Applied, error) {
	res := Applied{Path: path, Set: map[string]bool{}}
	if path == "" {
		applied = res
		return res, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return res, fmt.Errorf("config: read %s: %w", path, err)
	}
	vals, err := ParseFile(b)
	if err != nil {
		return res, fmt.Errorf("%s: %w", path, err)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s, _ := SettingByKey(k); s.Secret {
			if _, err := privfile.ReadOwnerOnly(path); err != nil {
				return res, fmt.Errorf("%w: %s holds the secret %s but others may read it (chmod 600, or move the secret to a file of its own): %w", ErrConfigFile, path, k, err)
			}
		}
	}
	for _, k := range keys {
		s, _ := SettingByKey(k)
		if _, set := os.LookupEnv(s.Env); set {
			continue
		}
		if err := os.Setenv(s.Env, vals[k]); err != nil {
			return res, fmt.Errorf("config: set %s from %s: %w", s.Env, path, err)
		}
		res.Set[k] = true
	}
	applied = res
	return res, nil
}

// Effective is one setting's effective value and where it came from; Value is "" for a secret
// (Set says whether it has one).
type Effective struct {
	Setting
	Value  string `json:"value,omitempty"`
	IsSet  bool   `json:"set"`
	Source Source `json:"source"`
	// From names the file a file value came from.
	From string `json:"from,omitempty"`
}

// EffectiveSettings is every setting's effective value as this process sees it: from a flag
// (flagged reports which keys a command's flags set), from the environment, from the file
// ApplyFile applied, or the default (with the value c resolves it to, where c resolves it:
// paths under Home, the Temporal UI, the task queue).
func EffectiveSettings(c Config, flagged func(key string) (string, bool)) []Effective {
	resolved := map[string]string{"home": c.Home, "corpus": c.CorpusDir, "task_queue": c.TaskQueue, "temporal_ui": c.TemporalUI,
		"approvers": c.ApproversPath(), "approver_key_file": c.KeyFile(), "clients": c.ClientsPath(), "credential": c.CredentialPath(),
		"client_credential": c.ClientCredentialPath(), "secrets_dir": c.SecretsPath(), "web_addr": c.WebAddr}
	if c.DatabaseURL == "" {
		resolved["database_url"] = c.StoreURL()
	}
	out := make([]Effective, 0, len(Settings))
	for _, s := range Settings {
		e := Effective{Setting: s, Source: SourceDefault}
		if flagged != nil {
			if v, ok := flagged(s.Key); ok {
				e.Value, e.IsSet, e.Source = v, true, SourceFlag
			}
		}
		if e.Source == SourceDefault {
			if v, ok := os.LookupEnv(s.Env); ok {
				e.Value, e.IsSet, e.Source = v, true, SourceEnv
				if applied.Set[s.Key] {
					e.Source, e.From = SourceFile, applied.Path
				}
			}
		}
		if e.Source == SourceDefault {
			e.Value = resolved[s.Key]
		}
		if s.Secret && e.Source != SourceDefault {
			e.Value = ""
		} else {
			e.Value = maskURLs(e.Value)
		}
		out = append(out, e)
	}
	return out
}

// maskURLs is v with the secrets of each http(s) URL in it masked (redact.URL), v being one
// value or a comma-separated list: a base URL's ?api-key=, a witness URL's ?token= never show
// in `config show`. Anything else is kept as it is.
func maskURLs(v string) string {
	parts := strings.Split(v, ",")
	for i, p := range parts {
		if t := strings.TrimSpace(p); strings.HasPrefix(t, "http://") || strings.HasPrefix(t, "https://") {
			parts[i] = strings.Replace(p, t, redact.URL(t), 1)
		}
	}
	return strings.Join(parts, ",")
}

// quoteValue shows a value for `config show`: quoted (Go syntax: control characters escaped)
// when it has spaces, quotes, control or non-ASCII characters or is empty, so a value from a
// file or the environment never writes raw escapes or extra lines to a terminal.
func quoteValue(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\"'#") || strconv.QuoteToASCII(v) != `"`+v+`"` {
		return strconv.QuoteToASCII(v)
	}
	return v
}

// ShowLine is a setting's line in `airlock config show`: key, value (or "(secret, set)"),
// source.
func ShowLine(e Effective) string {
	v := quoteValue(e.Value)
	switch {
	case e.Secret && e.IsSet:
		v = "(secret, set)"
	case e.Value != "":
	case !e.IsSet && e.Default != "":
		v = "(" + e.Default + ")"
	case !e.IsSet:
		v = "(unset)"
	}
	src := string(e.Source)
	if e.From != "" {
		src += " " + e.From
	}
	return fmt.Sprintf("%-26s %-44s %s", e.Key, v, src)
}

// Reference is docs/configuration.md: every setting by group, with its file key, environment
// variable, default and meaning (generated from Settings; `make check` holds it equal).
func Reference() string {
	var b strings.Builder
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("Generated from `internal/config/settings.go` by `airlock config doc`; `make check` fails when it drifts.\n\n")
	b.WriteString("Every Airlock process (worker, approver page, API, MCP server, every CLI command) reads one configuration file,\n")
	b.WriteString("`airlock.yaml` in the working directory, or the file `--config` or `AIRLOCK_CONFIG` names. An environment variable\n")
	b.WriteString("overrides the file and a flag overrides both; `airlock config show` prints each effective value and where it came from\n")
	b.WriteString("(secrets never). A file that holds a secret must be readable by its owner only. Lists may be YAML lists or comma lists.\n")
	group := ""
	for _, s := range Settings {
		if s.Group != group {
			group = s.Group
			fmt.Fprintf(&b, "\n## %s\n\n| key | environment | default | meaning |\n|---|---|---|---|\n", group)
		}
		doc := s.Doc
		if s.Secret {
			doc += " (secret)"
		}
		if s.List {
			doc += " (list)"
		}
		def := s.Default
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", s.Key, s.Env, def, strings.ReplaceAll(doc, "|", "\\|"))
	}
	return b.String()
}
