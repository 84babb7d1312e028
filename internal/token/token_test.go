package token

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMintSealOpen(t *testing.T) {
	a, ha, err := Mint()
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := Mint()
	if a == b || len(a) < 22 {
		t.Fatalf("tokens must be random and >= 128 bits: %q %q", a, b)
	}
	if !Equal(ha, Hash(a)) || Equal(ha, Hash(b)) {
		t.Fatal("hash mismatch")
	}
	k, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "k", "approver.key"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Seal(k, a, "conf-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Open(k, s, "conf-1"); err != nil || got != a {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := Open(k, s, "conf-2"); !errors.Is(err, ErrSealed) {
		t.Fatalf("a sealed token moved to another confirmation must not open: %v", err)
	}
	var other Key
	if _, err := Open(other, s, "conf-1"); !errors.Is(err, ErrSealed) {
		t.Fatalf("wrong key must not open: %v", err)
	}
}

func TestLoadOrCreateKeyIsStable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "approver.key")
	k1, err := LoadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateKey(p)
	if err != nil || k1 != k2 {
		t.Fatalf("second load must read the same key: %v", err)
	}
	if _, err := ParseKey("zz"); !errors.Is(err, ErrKey) {
		t.Fatal("bad key must fail")
	}
}

func TestDecisionMACBindsEveryField(t *testing.T) {
	plain, _, err := Mint()
	if err != nil {
		t.Fatal(err)
	}
	n1, _ := NewNonce()
	n2, _ := NewNonce()
	if n1 == n2 || len(n1) < 22 {
		t.Fatalf("nonces must be fresh 128-bit values: %q %q", n1, n2)
	}
	d := Decision{ConfirmationID: "cf-1", Decision: "approve", Approver: "alice", Reason: "", ArgsDigest: "ab12", Nonce: n1}
	mac := SignDecision(plain, d)
	if err := VerifyDecision(plain, d, mac); err != nil {
		t.Fatalf("own MAC must verify: %v", err)
	}
	if strings.Contains(mac, plain) {
		t.Fatal("the MAC must not contain the token")
	}
	other, _, _ := Mint()
	changed := []Decision{
		{ConfirmationID: "cf-2", Decision: "approve", Approver: "alice", ArgsDigest: "ab12", Nonce: n1},
		{ConfirmationID: "cf-1", Decision: "deny", Approver: "alice", ArgsDigest: "ab12", Nonce: n1},
		{ConfirmationID: "cf-1", Decision: "approve", Approver: "mallory", ArgsDigest: "ab12", Nonce: n1},
		{ConfirmationID: "cf-1", Decision: "approve", Approver: "alice", Reason: "x", ArgsDigest: "ab12", Nonce: n1},
		{ConfirmationID: "cf-1", Decision: "approve", Approver: "alice", ArgsDigest: "ab13", Nonce: n1},
		{ConfirmationID: "cf-1", Decision: "approve", Approver: "alice", ArgsDigest: "ab12", Nonce: n2},
		// An edit's MAC binds the edited arguments' digest: it cannot carry other arguments.
		{ConfirmationID: "cf-1", Decision: "approve", Approver: "alice", ArgsDigest: "ab12", Nonce: n1, EditedDigest: "cd34"},
		// Field boundaries are unambiguous: moving text between fields changes the MAC.
		{ConfirmationID: "cf-1a", Decision: "pprove", Approver: "alice", ArgsDigest: "ab12", Nonce: n1},
	}
	for i, c := range changed {
		if err := VerifyDecision(plain, c, mac); !errors.Is(err, ErrMAC) {
			t.Errorf("case %d: a MAC copied onto %+v must not verify: %v", i, c, err)
		}
	}
	edit := Decision{ConfirmationID: "cf-1", Decision: "edit", Approver: "alice", ArgsDigest: "ab12", Nonce: n1, EditedDigest: "cd34"}
	emac := SignDecision(plain, edit)
	if err := VerifyDecision(plain, edit, emac); err != nil {
		t.Fatalf("own edit MAC must verify: %v", err)
	}
	for _, digest := range []string{"cd35", ""} {
		moved := edit
		moved.EditedDigest = digest
		if err := VerifyDecision(plain, moved, emac); !errors.Is(err, ErrMAC) {
			t.Errorf("an edit MAC must not verify for edited digest %q: %v", digest, err)
		}
	}
	if err := VerifyDecision(other, d, mac); !errors.Is(err, ErrMAC) {
		t.Errorf("a MAC under another token must not verify: %v", err)
	}
	if SealAAD("cf-1", 0) != "cf-1" || SealAAD("cf-1", 2) != "cf-1/2" {
		t.Error("seal AAD")
	}
}

func TestLoadKeyNeverCreatesOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approver.key")
	if _, err := LoadKey(path); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadKey of a missing file = %v; want ErrNoKey naming %s", err, path)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadKey created %s", path)
	}
	k, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := LoadKey(path); err != nil || got != k {
		t.Fatalf("LoadKey after the worker created it = %v, %v", got, err)
	}
}

// A repeat grant's terms are bound by the MAC (issue 37, item 4): a MAC over an approval
// without a grant does not verify one with a grant, nor one grant another; RepeatTerms of no
// grant is "" (the MAC of a decision without a grant is unchanged).
func TestDecisionMACBindsTheRepeatGrant(t *testing.T) {
	d := Decision{ConfirmationID: "cf-1", Decision: "approve", Approver: "alice", ArgsDigest: "d", Nonce: "n"}
	plain := "token"
	mac := SignDecision(plain, d)
	if RepeatTerms(0, 0) != "" || RepeatTerms(3, 10) != "3/10m" {
		t.Fatalf("terms %q %q", RepeatTerms(0, 0), RepeatTerms(3, 10))
	}
	g := d
	g.Repeat = RepeatTerms(3, 10)
	if VerifyDecision(plain, g, mac) == nil {
		t.Fatal("a MAC without a grant verifies a decision with one")
	}
	gmac := SignDecision(plain, g)
	more := g
	more.Repeat = RepeatTerms(20, 60)
	if VerifyDecision(plain, more, gmac) == nil || VerifyDecision(plain, g, gmac) != nil {
		t.Fatal("a grant's MAC does not bind its terms")
	}
}
