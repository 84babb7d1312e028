package clients

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestVerifyBearerLifetime: a token signed with the client's own key but declaring a lifetime
// MintBearer would refuse (never expiring, or expiring before it is issued) is refused by
// VerifyBearer too (found by an attack helper: the 90-day cap held only when minting).
func TestVerifyBearerLifetime(t *testing.T) {
	set, cred, err := Ephemeral("claude-code", "alice")
	if err != nil {
		t.Fatal(err)
	}
	sign := func(issued, expires time.Time) string {
		claims, _ := json.Marshal(BearerClaims{Client: cred.Name, Principal: "alice", Issued: issued, Expires: expires})
		sig := ed25519.Sign(cred.key, append([]byte(bearerLabel), claims...))
		return BearerPrefix + base64.RawURLEncoding.EncodeToString(claims) + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	for name, tok := range map[string]string{
		"never expires":        sign(time.Time{}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)),
		"over the cap":         sign(now, now.Add(MaxBearerTTL+time.Hour)),
		"expires before issue": sign(now, now.Add(-time.Hour)),
	} {
		var ref *RefusedError
		if _, err := set.VerifyBearer(tok, now.Add(time.Minute)); !errors.As(err, &ref) || ref.Code != RefusalExpired {
			t.Errorf("%s: VerifyBearer = %v, want refusal %s", name, err, RefusalExpired)
		}
	}
	if _, err := set.VerifyBearer(sign(now, now.Add(MaxBearerTTL)), now.Add(time.Minute)); err != nil {
		t.Errorf("a token at the cap: %v", err)
	}
}
