package approvers_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/approvers"
)

func TestAuthenticateChecksThePasswordAndHidesWhichPartWasWrong(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvers.json")
	hash, err := approvers.HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if err := approvers.Add(path, approvers.Approver{Name: "alice", PasswordBcrypt: hash}); err != nil {
		t.Fatal(err)
	}
	if err := approvers.Add(path, approvers.Approver{Name: "cli-only"}); err != nil {
		t.Fatal(err)
	}
	set, err := approvers.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if name, err := set.Authenticate("alice", "correct horse battery"); err != nil || name != "alice" {
		t.Fatalf("Authenticate(alice, right) = %q, %v", name, err)
	}
	for _, c := range [][2]string{{"alice", "wrong password!"}, {"bob", "correct horse battery"}, {"cli-only", ""}, {"", ""}} {
		if _, err := set.Authenticate(c[0], c[1]); !errors.Is(err, approvers.ErrBadCredentials) {
			t.Errorf("Authenticate(%q, %q) = %v, want ErrBadCredentials", c[0], c[1], err)
		}
	}
	if _, err := approvers.HashPassword("short"); err == nil {
		t.Error("a 5-character password was accepted")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("approvers file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}

func TestVerifyAcceptsOnlyTheApproversOwnKeyOrASurface(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "approvers.json")
	alice, _ := approvers.NewCredential("approver:alice")
	bob, _ := approvers.NewCredential("approver:bob")
	web, _ := approvers.NewCredential("surface:web")
	rogue, _ := approvers.NewCredential("surface:rogue")
	for _, a := range []approvers.Approver{{Name: "alice", PublicKey: alice.Public()}, {Name: "bob", PublicKey: bob.Public()}} {
		if err := approvers.Add(path, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := approvers.AddSurface(path, approvers.Surface{Name: "web", PublicKey: web.Public()}); err != nil {
		t.Fatal(err)
	}
	set, err := approvers.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	const id, mac = "cf-1", "mac-of-the-decision"
	if err := set.Verify("alice", id, mac, alice.Attest(id, mac)); err != nil {
		t.Errorf("alice's own attestation: %v", err)
	}
	if err := set.Verify("alice", id, mac, web.Attest(id, mac)); err != nil {
		t.Errorf("the web surface vouching for alice: %v", err)
	}
	bad := map[string]struct {
		approver string
		att      approvers.Attestation
	}{
		"bob's key for alice":     {"alice", bob.Attest(id, mac)},
		"unlisted surface":        {"alice", rogue.Attest(id, mac)},
		"no attestation":          {"alice", approvers.Attestation{}},
		"another MAC":             {"alice", alice.Attest(id, "another-mac")},
		"another confirmation":    {"alice", alice.Attest("cf-2", mac)},
		"approver not in file":    {"mallory", web.Attest(id, mac)},
		"signer renamed to alice": {"alice", approvers.Attestation{Signer: "approver:alice", Signature: bob.Attest(id, mac).Signature}},
	}
	for name, c := range bad {
		if err := set.Verify(c.approver, id, mac, c.att); !errors.Is(err, approvers.ErrUnauthenticated) {
			t.Errorf("%s: Verify = %v, want ErrUnauthenticated", name, err)
		}
	}
}

func TestCredentialFilesAreOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "creds", "alice.json")
	c, _ := approvers.NewCredential("approver:alice")
	if err := approvers.SaveCredential(path, c); err != nil {
		t.Fatal(err)
	}
	if err := approvers.SaveCredential(path, c); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwriting a credential: %v, want fs.ErrExist", err)
	}
	got, err := approvers.LoadCredential(path)
	if err != nil || got.Public() != c.Public() || got.Signer != "approver:alice" {
		t.Fatalf("LoadCredential = %+v, %v", got.Signer, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := approvers.LoadCredential(path); !errors.Is(err, approvers.ErrCredentialMode) {
		t.Fatalf("a world-readable credential loaded: %v", err)
	}
}

func TestParseRefusesMalformedFiles(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":    `{"approvers":[{"name":"alice","role":"admin"}]}`,
		"bidi in name":     `{"approvers":[{"name":"ali\u202ece"}]}`,
		"duplicate":        `{"approvers":[{"name":"alice"},{"name":"alice"}]}`,
		"bad key":          `{"approvers":[{"name":"alice","public_key":"AAAA"}]}`,
		"bad hash":         `{"approvers":[{"name":"alice","password_bcrypt":"plaintext"}]}`,
		"surface sans key": `{"approvers":[],"surfaces":[{"name":"web"}]}`,
	} {
		if _, err := approvers.Parse([]byte(doc)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	_, err := approvers.Load(filepath.Join(t.TempDir(), "missing.json"))
	if !errors.Is(err, approvers.ErrNoFile) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "airlock approvers add") {
		t.Fatalf("missing file: %v", err)
	}
}

// A Source re-reads the file when it changes: an approver added while a worker runs counts
// at once, and a removed one stops counting.
func TestSourceSeesChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvers.json")
	src := approvers.NewSource(path)
	if _, err := src.Current(); !errors.Is(err, approvers.ErrNoFile) {
		t.Fatalf("before the file exists: %v", err)
	}
	if err := approvers.Add(path, approvers.Approver{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	set, err := src.Current()
	if err != nil || !set.Has("alice") {
		t.Fatalf("after add: %v", err)
	}
	if err := approvers.Add(path, approvers.Approver{Name: "bob"}); err != nil {
		t.Fatal(err)
	}
	if set, err := src.Current(); err != nil || !set.Has("bob") {
		t.Fatalf("after the second add: %v", err)
	}
}

// A rotated key has the same length, so the new file has the same size; the kernel's file
// times are coarse, so it can have the same mtime too. The Source still sees the new file
// (it was renamed over the old one): the old credential stops attesting at once.
func TestSourceSeesARotationWithTheSameSizeAndTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvers.json")
	old, err := approvers.NewCredential("approver:alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := approvers.Add(path, approvers.Approver{Name: "alice", PublicKey: old.Public()}); err != nil {
		t.Fatal(err)
	}
	src := approvers.NewSource(path)
	if _, err := src.Current(); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := approvers.NewCredential("approver:alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := approvers.Update(path, approvers.Approver{Name: "alice", PublicKey: rotated.Public()}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(path); after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the test needs the same size and mtime: %v %v / %v %v", before.Size(), before.ModTime(), after.Size(), after.ModTime())
	}
	set, err := src.Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Verify("alice", "cf-1", "mac", old.Attest("cf-1", "mac")); !errors.Is(err, approvers.ErrUnauthenticated) {
		t.Fatalf("the rotated-out credential still attests alice: %v", err)
	}
	if err := set.Verify("alice", "cf-1", "mac", rotated.Attest("cf-1", "mac")); err != nil {
		t.Fatalf("the new credential does not attest alice: %v", err)
	}
}

// Whoever may write the approvers file may make themselves an approver: a file writable by
// group or others authenticates nobody until it is chmod 600 (readable is allowed).
func TestLoadRefusesAnApproversFileOthersMayWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvers.json")
	if err := approvers.Add(path, approvers.Approver{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o666, 0o620, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := approvers.Load(path); !errors.Is(err, approvers.ErrFileMode) || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %v: Load = %v, want ErrFileMode saying chmod 600", mode, err)
		}
		if _, err := approvers.NewSource(path).Current(); !errors.Is(err, approvers.ErrFileMode) {
			t.Errorf("mode %v: Source.Current = %v, want ErrFileMode", mode, err)
		}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := approvers.Load(path); err != nil {
		t.Fatalf("mode 0644: %v", err)
	}
}

// Remove takes an approver out: their credential no longer attests, other approvers stay.
func TestRemoveEndsAnApproversAuthority(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvers.json")
	set, creds, err := approvers.Ephemeral("alice", "bob")
	if err != nil || set == nil {
		t.Fatal(err)
	}
	for _, n := range []string{"alice", "bob"} {
		if err := approvers.Add(path, approvers.Approver{Name: n, PublicKey: creds[n].Public()}); err != nil {
			t.Fatal(err)
		}
	}
	src := approvers.NewSource(path)
	if _, err := src.Current(); err != nil {
		t.Fatal(err)
	}
	if err := approvers.Remove(path, "bob"); err != nil {
		t.Fatal(err)
	}
	cur, err := src.Current()
	if err != nil {
		t.Fatal(err)
	}
	if cur.Has("bob") || cur.Verify("bob", "cf-1", "mac", creds["bob"].Attest("cf-1", "mac")) == nil {
		t.Fatal("bob still decides after Remove")
	}
	if err := cur.Verify("alice", "cf-1", "mac", creds["alice"].Attest("cf-1", "mac")); err != nil {
		t.Fatalf("alice lost her authority: %v", err)
	}
	if err := approvers.Remove(path, "bob"); !errors.Is(err, approvers.ErrBadCredentials) {
		t.Fatalf("removing an absent approver = %v", err)
	}
}

// Four-eyes rules and quorums compare names without regard to case, so the approvers file may
// not hold two approvers whose names differ only in case; groups are names too.
func TestNamesDifferingOnlyInCaseAreRefused(t *testing.T) {
	for _, bad := range []string{
		`{"approvers":[{"name":"alice"},{"name":"Alice"}]}`,
		`{"approvers":[{"name":"alice","groups":["pay ments"]}]}`,
		// A repeated member: a reader sees alice in payments, the decoder keeps no group.
		`{"approvers":[{"name":"alice","groups":["payments"],"groups":[]}]}`,
		`{"approvers":[{"name":"alice"}],"approvers":[{"name":"mallory"}]}`,
		`{"approvers":[{"name":"alice"}]} {"approvers":[]}`,
	} {
		if _, err := approvers.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse accepted %s", bad)
		}
	}
	set, err := approvers.Parse([]byte(`{"approvers":[{"name":"alice","groups":["payments"]},{"name":"bob"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !set.Eligible("alice", []string{"payments"}) || set.Eligible("bob", []string{"payments"}) || !set.Eligible("bob", nil) || set.Eligible("nobody", nil) {
		t.Fatal("Eligible does not follow the groups")
	}
	if got := set.EligibleNames([]string{"payments"}); len(got) != 1 || got[0] != "alice" {
		t.Fatalf("EligibleNames = %v", got)
	}
}

// Provider accounts (issue 33): approvers.UpsertProvider records one with its subject and validity,
// replaces it only for the same person, never takes a file approver's name or another
// person's; an entry past its valid_until is no approver (Has, Eligible); approvers.RemoveProvider leaves
// file approvers alone. A principal listed by two approvers, or naming another approver, is
// refused: one name, one person.
func TestProviderAccountsAndPersons(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvers.json")
	if err := approvers.Add(path, approvers.Approver{Name: "bob", Principals: []string{"user:bob@corp"}}); err != nil {
		t.Fatal(err)
	}
	soon := time.Now().Add(time.Hour)
	alice := approvers.Approver{Name: "alice", Subject: "https://idp.example#u-1", Groups: []string{"payments"}, ValidUntil: &soon}
	if err := approvers.UpsertProvider(path, alice); err != nil {
		t.Fatal(err)
	}
	if err := approvers.UpsertProvider(path, approvers.Approver{Name: "Alice", Subject: "https://idp.example#u-2", ValidUntil: &soon}); !errors.Is(err, approvers.ErrNotProvider) {
		t.Fatalf("another person's alice: %v", err)
	}
	if err := approvers.UpsertProvider(path, approvers.Approver{Name: "bob", Subject: "https://idp.example#u-3", ValidUntil: &soon}); !errors.Is(err, approvers.ErrNotProvider) {
		t.Fatalf("the provider's bob over the file's bob: %v", err)
	}
	set, err := approvers.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !set.Has("alice") || !set.Eligible("alice", []string{"payments"}) || !set.SamePerson("bob", "user:bob@corp") || set.SamePerson("alice", "user:bob@corp") {
		t.Fatal("recorded provider account or person mapping wrong")
	}
	past := time.Now().Add(-time.Second)
	alice.ValidUntil = &past
	if err := approvers.UpsertProvider(path, alice); err != nil {
		t.Fatal(err)
	}
	if set, _ = approvers.Load(path); set.Has("alice") || set.Eligible("alice", nil) {
		t.Fatal("an account past its valid_until still counts")
	}
	if ok, err := approvers.RemoveProvider(path, "bob", ""); ok || err != nil {
		t.Fatalf("approvers.RemoveProvider removed a file approver: %v %v", ok, err)
	}
	if ok, err := approvers.RemoveProvider(path, "alice", alice.Subject); !ok || err != nil {
		t.Fatalf("approvers.RemoveProvider(alice) = %v %v", ok, err)
	}
	for _, bad := range []string{
		`{"approvers":[{"name":"a","principals":["user:x"]},{"name":"b","principals":["USER:X"]}]}`,
		`{"approvers":[{"name":"a","principals":["b"]},{"name":"b"}]}`,
		`{"approvers":[{"name":"a","valid_until":"2030-01-01T00:00:00Z"}]}`,
		`{"approvers":[{"name":"a","oidc_subject":"https://i#1"},{"name":"b","oidc_subject":"https://i#1"}]}`,
	} {
		if _, err := approvers.Parse([]byte(bad)); err == nil {
			t.Errorf("approvers.Parse(%s) accepted", bad)
		}
	}
}
