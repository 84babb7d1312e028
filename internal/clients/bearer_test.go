package clients

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A bearer token proves its client and principal only while valid, only under its own
// signature, and only for a principal its client may speak for.
func TestVerifyBearer(t *testing.T) {
	set, cred, err := Ephemeral("claude-code", "alice", "user:*")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := Ephemeral("claude-code", "alice")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	mint := func(c Credential, principal string) string {
		t.Helper()
		tok, err := c.MintBearer(principal, at, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := mint(cred, "alice")
	b, err := set.VerifyBearer(good, at.Add(time.Minute))
	if err != nil || b.Client != "claude-code" || b.Principal != "alice" || b.Signature == "" {
		t.Fatalf("VerifyBearer(good) = %+v, %v", b, err)
	}
	if _, err := set.VerifyBearer(mint(cred, "user:bob"), at); err != nil {
		t.Fatalf("a prefix-scoped principal: %v", err)
	}
	body, sig, _ := strings.Cut(strings.TrimPrefix(good, BearerPrefix), ".")
	flip := "A"
	if sig[0] == 'A' {
		flip = "B"
	}
	forged := BearerPrefix + body + "." + flip + sig[1:]
	for _, tc := range []struct {
		name, token string
		at          time.Time
		code        string
	}{
		{"empty", "", at, RefusalUnattested},
		{"not ours", "eyJhbGciOi.x.y", at, RefusalMisattested},
		{"no signature", BearerPrefix + body, at, RefusalMisattested},
		{"forged signature", forged, at, RefusalMisattested},
		{"another key of the same name", mint(other, "alice"), at, RefusalMisattested},
		{"expired", good, at.Add(time.Hour + time.Second), RefusalExpired},
		{"before issue", good, at.Add(-2 * MaxSkew), RefusalExpired},
		{"out of scope", mint(cred, "mallory"), at, RefusalOutOfScope},
	} {
		_, err := set.VerifyBearer(tc.token, tc.at)
		var ref *RefusedError
		if !errors.As(err, &ref) || ref.Code != tc.code {
			t.Errorf("%s: VerifyBearer = %v, want refusal %s", tc.name, err, tc.code)
		}
	}
	if _, err := cred.MintBearer("alice", at, MaxBearerTTL+time.Second); err == nil {
		t.Error("MintBearer accepted a lifetime over MaxBearerTTL")
	}
	if _, err := cred.MintBearer("", at, time.Hour); err == nil {
		t.Error("MintBearer accepted an empty principal")
	}
}
