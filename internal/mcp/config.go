package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/registry"
)

// ServersSchemaVersion is the "schema/v" of the MCP servers file (AIRLOCK_MCP_SERVERS).
const ServersSchemaVersion = "airlock-mcp-servers.v1"

// EnvServers names the environment variable holding the path of the MCP servers file.
const EnvServers = "AIRLOCK_MCP_SERVERS"

// ErrConfig is wrapped by every error of a servers file that cannot be used.
var ErrConfig = errors.New("mcp: invalid MCP servers file")

// Servers is an MCP servers file: where each MCP server named in the registry runs and how
// Airlock reaches it. It holds no secret: secrets are named (an environment variable or a
// file) and read when the server is connected, never written to a log or a registry layer.
//
//	{"schema/v": "airlock-mcp-servers.v1",
//	 "servers": [
//	   {"name": "files", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]},
//	   {"name": "tickets", "url": "https://tickets.example/mcp",
//	    "headers": [{"name": "Authorization", "prefix": "Bearer ", "secret": {"env": "TICKETS_TOKEN"}}]}]}
type Servers struct {
	SchemaV string         `json:"schema/v"`
	Servers []ServerConfig `json:"servers"`
}

// ServerConfig is one MCP server: exactly one of Command (stdio: Airlock starts the process
// and speaks MCP over its stdin and stdout) and URL (streamable HTTP).
type ServerConfig struct {
	// Name is the server's name in the registry (registry.MCPServerNamePattern).
	Name string `json:"name"`

	// Command is the program to start (a path, or a name looked up in PATH); a relative path
	// with a slash is relative to the servers file. Args are passed as they are.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Dir is the process's working directory (relative to the servers file; default: the
	// servers file's directory).
	Dir string `json:"dir,omitempty"`
	// Env is the process's whole environment besides PATH and HOME (which it inherits): a
	// stdio server never inherits the worker's environment (its database URL, its keys).
	// Values are literal; EnvSecrets adds values read from secrets.
	Env        map[string]string `json:"env,omitempty"`
	EnvSecrets map[string]Secret `json:"env/secrets,omitempty"`

	// URL is the streamable HTTP endpoint (http or https).
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request, their values read from secrets.
	Headers []Header `json:"headers,omitempty"`

	// ConnectTimeout bounds starting or reaching the server and its MCP initialization
	// (Go duration, default 10s).
	ConnectTimeout string `json:"timeout/connect,omitempty"`
	// Refresh is how often a connected server's tool list is read again, and how long a
	// server that is down waits before Airlock tries it again (default 30s). Tool list
	// change notifications are followed at once.
	Refresh string `json:"refresh,omitempty"`
	// VerifyMaxAge is how old the tool list a call is checked against may be (default 0s:
	// every call lists the server's tools first and is made only if its live definition
	// still has the pinned digest).
	VerifyMaxAge string `json:"verify/max-age,omitempty"`
}

// Header is one HTTP header whose value is Prefix followed by a secret.
type Header struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix,omitempty"`
	Secret Secret `json:"secret"`
}

// Secret names where a secret value is read: exactly one of an environment variable of the
// worker and a file (its content, one trailing newline removed).
type Secret struct {
	Env  string `json:"env,omitempty"`
	File string `json:"file,omitempty"`
}

// Read returns the secret's value. An unset variable, an empty value or an unreadable file is
// an error that names where it looked, never the value.
func (s Secret) Read() (string, error) {
	switch {
	case s.Env != "" && s.File == "":
		v := os.Getenv(s.Env)
		if v == "" {
			return "", fmt.Errorf("secret: environment variable %s is not set", s.Env)
		}
		return v, nil
	case s.File != "" && s.Env == "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("secret: %w", err)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return "", fmt.Errorf("secret: file %s is empty", s.File)
		}
		return v, nil
	}
	return "", errors.New("secret: name exactly one of env and file")
}

var reHeaderName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Defaults of the per-server timings.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultRefresh        = 30 * time.Second
)

// Timings are a server's parsed durations (validated by LoadServers).
func (s ServerConfig) Timings() (connect, refresh, maxAge time.Duration) {
	connect, refresh = DefaultConnectTimeout, DefaultRefresh
	if d, err := time.ParseDuration(s.ConnectTimeout); err == nil && d > 0 {
		connect = d
	}
	if d, err := time.ParseDuration(s.Refresh); err == nil && d > 0 {
		refresh = d
	}
	if d, err := time.ParseDuration(s.VerifyMaxAge); err == nil && d > 0 {
		maxAge = d
	}
	return connect, refresh, maxAge
}

// Transport is "stdio" or "http".
func (s ServerConfig) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// LoadServers reads and validates a servers file (strict: an unknown member, a server
// named twice, a server with both or neither of command and url, a bad URL, header or
// duration is an error naming the server). Relative paths are resolved against the file's
// directory.
func LoadServers(path string) (*Servers, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return ParseServers(b, filepath.Dir(path), path)
}

// ParseServers is LoadServers on bytes; base resolves relative paths and name names the
// document in errors.
func ParseServers(b []byte, base, name string) (*Servers, error) {
	fail := func(format string, a ...any) (*Servers, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrConfig, name, fmt.Sprintf(format, a...))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Servers
	if err := dec.Decode(&s); err != nil {
		return fail("%v", err)
	}
	if dec.More() {
		return fail("trailing data after the document")
	}
	// A repeated member (a second "command" or "env") means what a reader of the file does
	// not see: the decoder keeps the last.
	if _, err := canonical.Canonicalize(b); errors.Is(err, canonical.ErrDuplicateKey) {
		return fail("%v", err)
	}
	if s.SchemaV != ServersSchemaVersion {
		return fail("schema/v is %q, want %q", s.SchemaV, ServersSchemaVersion)
	}
	seen := map[string]bool{}
	for i := range s.Servers {
		sv := &s.Servers[i]
		if !registry.MCPServerNamePattern.MatchString(sv.Name) {
			return fail("server %d: name %q does not match %s", i+1, sv.Name, registry.MCPServerNamePattern)
		}
		if seen[sv.Name] {
			return fail("server %q is declared twice", sv.Name)
		}
		seen[sv.Name] = true
		bad := func(format string, a ...any) (*Servers, error) {
			return fail("server %q: %s", sv.Name, fmt.Sprintf(format, a...))
		}
		switch {
		case (sv.Command == "") == (sv.URL == ""):
			return bad("give exactly one of command (stdio) and url (streamable HTTP)")
		case sv.URL != "":
			u, err := url.Parse(sv.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				return bad("url %q is not an http(s) URL without credentials (put secrets in headers)", sv.URL)
			}
			if len(sv.Args) > 0 || sv.Dir != "" || len(sv.Env) > 0 || len(sv.EnvSecrets) > 0 {
				return bad("args, dir, env and env/secrets are for stdio servers")
			}
		default:
			if len(sv.Headers) > 0 {
				return bad("headers are for HTTP servers")
			}
			if strings.Contains(sv.Command, "/") && !filepath.IsAbs(sv.Command) {
				sv.Command = filepath.Join(base, sv.Command)
			}
			switch {
			case sv.Dir == "":
				sv.Dir = base
			case !filepath.IsAbs(sv.Dir):
				sv.Dir = filepath.Join(base, sv.Dir)
			}
			for k := range sv.Env {
				if k == "" || strings.ContainsAny(k, "=\x00") {
					return bad("env name %q is not a variable name", k)
				}
			}
			for k, sec := range sv.EnvSecrets {
				if k == "" || strings.ContainsAny(k, "=\x00") {
					return bad("env/secrets name %q is not a variable name", k)
				}
				if (sec.Env == "") == (sec.File == "") {
					return bad("env/secrets %s: name exactly one of env and file", k)
				}
			}
		}
		for _, h := range sv.Headers {
			if !reHeaderName.MatchString(h.Name) {
				return bad("header name %q is not a header name", h.Name)
			}
			if (h.Secret.Env == "") == (h.Secret.File == "") {
				return bad("header %s: name exactly one of secret env and secret file", h.Name)
			}
			if strings.ContainsAny(h.Prefix, "\r\n") {
				return bad("header %s: prefix holds a line break", h.Name)
			}
		}
		for what, v := range map[string]string{"timeout/connect": sv.ConnectTimeout, "refresh": sv.Refresh, "verify/max-age": sv.VerifyMaxAge} {
			if v == "" {
				continue
			}
			if d, err := time.ParseDuration(v); err != nil || d < 0 || (d == 0 && what != "verify/max-age") {
				return bad("%s %q is not a positive duration", what, v)
			}
		}
	}
	return &s, nil
}

// Server returns the configuration of the server called name.
func (s *Servers) Server(name string) (ServerConfig, bool) {
	if s == nil {
		return ServerConfig{}, false
	}
	i := slices.IndexFunc(s.Servers, func(c ServerConfig) bool { return c.Name == name })
	if i < 0 {
		return ServerConfig{}, false
	}
	return s.Servers[i], true
}

// Names lists the configured servers' names in file order.
func (s *Servers) Names() []string {
	var out []string
	if s != nil {
		for _, c := range s.Servers {
			out = append(out, c.Name)
		}
	}
	return out
}
