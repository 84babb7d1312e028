package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/store"
)

// `airlock approvers add` writes a bcrypt hash and a public key into the approvers file and the
// private credential owner-only; the password given on stdin signs in, and a second add of the
// same name is refused.
func TestApproversAddCreatesAnOwnerOnlyCredential(t *testing.T) {
	old := cfg
	t.Cleanup(func() { cfg = old })
	home := t.TempDir()
	t.Setenv("AIRLOCK_APPROVERS", "")
	t.Setenv("AIRLOCK_CREDENTIAL", "")
	cfg.Home, cfg.ApproversFile, cfg.Credential = home, "", ""
	out, err := run(t, "a long enough password\n", "approvers", "add", "alice", "--password-stdin")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	credPath := filepath.Join(home, "credentials", "alice.json")
	if !strings.Contains(out, credPath) || strings.Contains(out, "a long enough password") {
		t.Fatalf("output = %s", out)
	}
	fi, err := os.Stat(credPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credential mode = %v, %v", fi.Mode().Perm(), err)
	}
	set, err := approvers.Load(filepath.Join(home, "approvers.json"))
	if err != nil {
		t.Fatal(err)
	}
	if name, err := set.Authenticate("alice", "a long enough password"); err != nil || name != "alice" {
		t.Fatalf("sign-in with the stdin password: %q %v", name, err)
	}
	cred, err := approvers.LoadCredential(credPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Verify("alice", "cf-1", "mac", cred.Attest("cf-1", "mac")); err != nil {
		t.Fatalf("the new credential does not attest alice: %v", err)
	}
	if _, err := run(t, "", "approvers", "add", "alice", "--no-password"); err == nil || !strings.Contains(err.Error(), "already lists") {
		t.Fatalf("second add: %v", err)
	}
	if _, err := run(t, "", "approvers", "add", "ali\u202ece", "--no-password"); err == nil {
		t.Fatal("a name with a bidi control was accepted")
	}
}

// approve and deny decide as the credential's owner: a typed --approver name is refused with
// what to do instead, and a missing credential says how to get one.
func TestApproveRefusesATypedApproverName(t *testing.T) {
	old := cfg
	t.Cleanup(func() { cfg = old })
	cfg.Home, cfg.Credential = t.TempDir(), filepath.Join(t.TempDir(), "none.json")
	if _, err := run(t, "", "approve", "cf-x", "--approver", "alice"); err == nil || !strings.Contains(err.Error(), "--approver was removed") {
		t.Fatalf("approve --approver: %v", err)
	}
	if _, _, err := loadCredential(""); err == nil || !strings.Contains(err.Error(), "airlock approvers add") {
		t.Fatalf("approve without a credential: %v", err)
	}
}

// `airlock approvers remove` takes an approver out of the file; removing one that is not there
// says so.
func TestApproversRemove(t *testing.T) {
	old := cfg
	t.Cleanup(func() { cfg = old })
	home := t.TempDir()
	t.Setenv("AIRLOCK_APPROVERS", "")
	cfg.Home, cfg.ApproversFile = home, ""
	for _, n := range []string{"alice", "bob"} {
		if out, err := run(t, "", "approvers", "add", n, "--no-password"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	// Page sessions live in the store (issue 21, item 4): remove ends bob's there at once.
	cfg.DatabaseURL = ""
	st, err := store.Open(context.Background(), cfg.StoreURL())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, p := range []store.PageSession{{IDHash: "h-bob-1", Approver: "bob"}, {IDHash: "h-bob-2", Approver: "bob"}, {IDHash: "h-alice", Approver: "alice"}} {
		if err := st.CreatePageSession(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(t, "", "approvers", "remove", "bob"); err != nil || !strings.Contains(out, "removed approver bob") ||
		!strings.Contains(out, "ended 2 approver page session(s) of bob") {
		t.Fatalf("remove bob: %v\n%s", err, out)
	}
	for h, want := range map[string]bool{"h-bob-1": false, "h-bob-2": false, "h-alice": true} {
		if _, err := st.GetPageSession(context.Background(), h); (err == nil) != want {
			t.Errorf("page session %s after removing bob: err %v, want kept=%v", h, err, want)
		}
	}
	set, err := approvers.Load(filepath.Join(home, "approvers.json"))
	if err != nil || set.Has("bob") || !set.Has("alice") {
		t.Fatalf("after remove: %v, names %v", err, set.Names())
	}
	if _, err := run(t, "", "approvers", "remove", "bob"); err == nil || !strings.Contains(err.Error(), "has no approver") {
		t.Fatalf("second remove: %v", err)
	}
	// alice's passkeys go with her: an approver added again as alice does not inherit them.
	if err := st.AddPasskey(context.Background(), store.Passkey{CredentialID: "k1", Approver: "alice", PublicKey: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "", "approvers", "remove", "alice"); err != nil || !strings.Contains(out, "removed 1 passkey(s) of alice") {
		t.Fatalf("remove alice: %v\n%s", err, out)
	}
	if l, _ := st.ListPasskeys(context.Background(), "alice"); len(l) != 0 {
		t.Fatalf("alice's passkeys after her removal: %+v", l)
	}
}

// A refused account change writes no file (issue 33, item 5): `airlock approvers add Bob`
// beside an existing "bob" is refused, and leaves neither credentials/Bob.json nor a temporary
// file behind; the approvers file is unchanged.
func TestApproversAddRefusedLeavesNothingBehind(t *testing.T) {
	old := cfg
	t.Cleanup(func() { cfg = old })
	home := t.TempDir()
	t.Setenv("AIRLOCK_APPROVERS", "")
	t.Setenv("AIRLOCK_CREDENTIAL", "")
	cfg.Home, cfg.ApproversFile, cfg.Credential = home, "", ""
	if out, err := run(t, "", "approvers", "add", "bob", "--no-password"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	before, err := os.ReadFile(filepath.Join(home, "approvers.json"))
	if err != nil {
		t.Fatal(err)
	}
	list := func() []string {
		var names []string
		_ = filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				names = append(names, strings.TrimPrefix(p, home))
			}
			return nil
		})
		return names
	}
	files := list()
	for _, extra := range [][]string{{"Bob"}, {"BOB", "--credential-out", filepath.Join(home, "elsewhere", "BOB.json")}} {
		_, err := run(t, "", append([]string{"approvers", "add", "--no-password"}, extra...)...)
		if err == nil {
			t.Fatalf("add %v beside bob was accepted", extra)
		}
		if got := list(); strings.Join(got, ",") != strings.Join(files, ",") {
			t.Fatalf("a refused add %v left files behind: before %v, after %v (%v)", extra, files, got, err)
		}
		if _, err := os.Stat(filepath.Join(home, "elsewhere")); err == nil {
			t.Fatal("a refused add created the credential's folder")
		}
		after, _ := os.ReadFile(filepath.Join(home, "approvers.json"))
		if string(after) != string(before) {
			t.Fatal("a refused add changed the approvers file")
		}
	}
}

// `airlock web` on a non-loopback address refuses to start with a wildcard passkey origin
// (issue 33, item 4), before it opens anything.
func TestWebRefusesWildcardOriginsOffLoopback(t *testing.T) {
	t.Setenv("AIRLOCK_PASSKEY_RP_ID", "")
	t.Setenv("AIRLOCK_WEB_HOSTS", "")
	t.Setenv("AIRLOCK_PASSKEY_ORIGINS", "http://localhost:*")
	err := runWeb(context.Background(), io.Discard, io.Discard, "0.0.0.0:8443", "", "", nil)
	if !errors.Is(err, passkey.ErrWildcardOrigin) {
		t.Fatalf("runWeb on 0.0.0.0 with a wildcard origin: %v", err)
	}
}
