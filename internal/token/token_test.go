package token

import (
	"errors"
	"path/filepath"
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
