package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"github.com/airlock-dev/airlock/internal/clients"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/workflows"
)

// doctorPG returns a PostgreSQL URL on a fresh schema (dropped after the test).
func doctorPG(t *testing.T) string {
	t.Helper()
	base := os.Getenv("AIRLOCK_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("AIRLOCK_TEST_DATABASE_URL is not set (make test sets it)")
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "doctor_" + hex.EncodeToString(b)
	db, err := sqlx.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if db, err := sqlx.Open("postgres", base); err == nil {
			db.Exec("DROP SCHEMA " + schema + " CASCADE")
			db.Close()
		}
	})
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// On a working setup (a real Temporal dev server with the namespace and search attributes, a
// real PostgreSQL store, an approvers file, a 0600 key) every check passes, and doctor says no
// worker polls the task queue. On a broken one (wrong store password, no approvers file, a
// world-readable key, an unknown namespace) each check fails or warns with what to do, exits
// 1, and never prints the password.
func TestDoctorChecksEachConnection(t *testing.T) {
	pg := doctorPG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	srv, err := stack.EnsureTemporal(ctx, stack.TemporalOptions{Dir: filepath.Join(tmp, "temporal"), UIPort: stack.Headless,
		Namespace: "doctor-ns", SearchAttributes: workflows.SearchAttributes()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	st, err := store.Open(ctx, pg) // a worker creates the store
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	home := filepath.Join(tmp, "home")
	if _, err := token.LoadOrCreateKey(filepath.Join(home, "keys", "approver.key")); err != nil {
		t.Fatal(err)
	}
	cred, _ := approvers.NewCredential("approver:alice")
	if err := approvers.Add(filepath.Join(home, "approvers.json"), approvers.Approver{Name: "alice", PublicKey: cred.Public()}); err != nil {
		t.Fatal(err)
	}
	starter, _ := clients.NewCredential("chat")
	if err := clients.Add(filepath.Join(home, "clients.json"), clients.Client{Name: "chat", PublicKey: starter.Public(), Principals: []string{"user:*"}}); err != nil {
		t.Fatal(err)
	}
	env := []string{"TEMPORAL_ADDRESS=" + srv.Address, "TEMPORAL_NAMESPACE=doctor-ns", "AIRLOCK_HOME=" + home, "AIRLOCK_DATABASE_URL=" + pg}

	out, err := cli(t, env, "doctor")
	if err != nil {
		t.Fatalf("doctor on a working setup: %v\n%s", err, out)
	}
	for _, want := range []string{"ok    temporal", "ok    attrs", "warn  workers", "no worker polled task queue airlock-turns",
		"ok    store", "ok    approvers", "1 approver(s)", "ok    clients", "1 client(s)", "ok    key", "ok    secrets", "ok    registry", "ok    deciders"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}

	u, _ := url.Parse(pg)
	u.User = url.UserPassword(u.User.Username(), "wrong-s3cret-pw")
	os.Remove(filepath.Join(home, "approvers.json"))
	os.Remove(filepath.Join(home, "clients.json"))
	if err := approvers.SaveCredential(filepath.Join(home, "credentials", "alice.json"), cred); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(home, "keys", "approver.key"), 0o644)
	bad := []string{"TEMPORAL_ADDRESS=" + srv.Address, "TEMPORAL_NAMESPACE=no-such-ns", "AIRLOCK_HOME=" + home, "AIRLOCK_DATABASE_URL=" + u.String()}
	out, err = cli(t, bad, "doctor")
	if err == nil {
		t.Fatalf("doctor on a broken setup exited 0:\n%s", out)
	}
	for _, want := range []string{"FAIL  temporal", "airlock cluster init", "FAIL  store", "check AIRLOCK_DATABASE_URL",
		"FAIL  approvers", "airlock approvers add NAME", "FAIL  clients", "every turn ends unattested", "warn  key", "chmod 600", "FAIL  secrets", "alice.json", "decides as them"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "wrong-s3cret-pw") {
		t.Errorf("doctor printed the store password:\n%s", out)
	}
}

// TestDoctorFlagsPasskeyCapabilityWithoutHolder: a capability whose policy requires a passkey
// fails doctor while no approver eligible for it has registered one in the store, and passes
// once one has; an IP address as relying party id fails too (issue 21, item 3).
func TestDoctorFlagsPasskeyCapabilityWithoutHolder(t *testing.T) {
	pg := doctorPG(t)
	home := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cred, _ := approvers.NewCredential("approver:alice")
	if err := approvers.Add(filepath.Join(home, "approvers.json"), approvers.Approver{Name: "alice", PublicKey: cred.Public()}); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	raw, err := os.ReadFile(filepath.Join("..", "..", "registry", "capability-authorization-policy.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc["capabilities"].([]any) {
		if e := c.(map[string]any); e["capability/id"] == "web.fetch" {
			e["approval/passkey"] = true
		}
	}
	policy := filepath.Join(home, "policy.json")
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(policy, b, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"AIRLOCK_HOME=" + home, "AIRLOCK_DATABASE_URL=" + pg, "AIRLOCK_POLICY=" + policy}
	out, _ := cli(t, env, "doctor")
	if !strings.Contains(out, "FAIL  passkeys") || !strings.Contains(out, "web.fetch@1 (0 eligible approver(s) with a passkey, needs 1)") || !strings.Contains(out, "registers a passkey under Passkeys") {
		t.Fatalf("doctor without a passkey holder:\n%s", out)
	}
	if err := st.AddPasskey(ctx, store.Passkey{CredentialID: "c1", Approver: "alice", PublicKey: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if out, _ := cli(t, env, "doctor"); !strings.Contains(out, "ok    passkeys") {
		t.Fatalf("doctor with alice's passkey:\n%s", out)
	}
	if out, _ := cli(t, append(env, "AIRLOCK_PASSKEY_RP_ID=127.0.0.1"), "doctor"); !strings.Contains(out, "FAIL  passkeys") || !strings.Contains(out, "not an IP address") {
		t.Fatalf("doctor with an IP address as RP id:\n%s", out)
	}
}

// doctor fails when one reader holds the keys that decide for any approver and people's
// credentials (issue 33, item 4): the approver key and surface key in $AIRLOCK_HOME/keys,
// alice's credential in $AIRLOCK_HOME/credentials, all owned by one user, FAIL; the same keys
// owned by the worker's own user (chown, as root) pass.
func TestDoctorFailsWhenOneReaderHoldsKeysAndCredentials(t *testing.T) {
	old := cfg
	t.Cleanup(func() { cfg = old })
	home := t.TempDir()
	t.Setenv("AIRLOCK_APPROVER_KEY", "")
	t.Setenv("AIRLOCK_APPROVER_KEY_FILE", "")
	t.Setenv("AIRLOCK_SURFACE_KEY_FILE", "")
	t.Setenv("AIRLOCK_CREDENTIAL", "")
	cfg.Home, cfg.ApproverKeyFile = home, ""
	if _, err := token.LoadOrCreateKey(cfg.KeyFile()); err != nil {
		t.Fatal(err)
	}
	if cfg.KeyFile() != filepath.Join(home, "keys", "approver.key") {
		t.Fatalf("the approver key defaults to %s, not the keys folder", cfg.KeyFile())
	}
	surface, _ := approvers.NewCredential("surface:web")
	alice, _ := approvers.NewCredential("approver:alice")
	for path, c := range map[string]approvers.Credential{surfaceCredentialPath(): surface, filepath.Join(home, "credentials", "alice.json"): alice} {
		if err := approvers.SaveCredential(path, c); err != nil {
			t.Fatal(err)
		}
	}
	c := doctorSecrets()
	if c.OK || !strings.Contains(c.Detail, "approver key") || !strings.Contains(c.Detail, "surface key") || !strings.Contains(c.Detail, "alice") {
		t.Fatalf("one owner of keys and credentials: %+v", c)
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give the keys to another user")
	}
	for _, p := range []string{cfg.KeyFile(), surfaceCredentialPath()} {
		if err := os.Chown(p, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	if c := doctorSecrets(); !c.OK || c.Warn {
		t.Fatalf("keys of their own user: %+v", c)
	}
}
