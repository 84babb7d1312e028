package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/clients"
)

// `airlock mcp token` prints a bearer token the clients file accepts for the principal, and
// refuses to print one for a principal the credential may not speak for.
func TestMCPTokenCommand(t *testing.T) {
	home := t.TempDir()
	saved := cfg
	t.Cleanup(func() { cfg = saved })
	cfg.ClientsFile = ""
	if _, err := run(t, "", "--home", home, "clients", "add", "cc", "--principal", "alice"); err != nil {
		t.Fatal(err)
	}
	cfg.ClientCredential = filepath.Join(home, "credentials", "client-cc.json")
	out, err := run(t, "", "--home", home, "mcp", "token", "--principal", "alice", "--ttl", "1h")
	if err != nil {
		t.Fatal(err)
	}
	set, err := clients.Load(filepath.Join(home, "clients.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := set.VerifyBearer(strings.TrimSpace(out), time.Now())
	if err != nil || b.Client != "cc" || b.Principal != "alice" || b.Expires.Sub(b.Issued) != time.Hour {
		t.Fatalf("token %q: %+v, %v", out, b, err)
	}
	if out, err := run(t, "", "--home", home, "mcp", "token", "--principal", "mallory"); err == nil || !strings.Contains(err.Error(), clients.RefusalOutOfScope) || strings.Contains(out, clients.BearerPrefix) {
		t.Fatalf("a token for an out-of-scope principal: %q, %v", out, err)
	}
}
