package clients

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// The checks of a call attestation that the workflow tests cannot reach with the test
// environment's clock: the signing window, a bearer token that expired before the call
// started, a gateway vouching outside its scopes or without naming a token.
func TestVerifyCallWindowsAndScopes(t *testing.T) {
	gw, _ := NewCredential("gw")
	app, _ := NewCredential("app")
	b, _ := json.Marshal(File{Clients: []Client{
		{Name: gw.Name, PublicKey: gw.Public(), Principals: []string{"user:*"}, Gateway: true},
		{Name: app.Name, PublicKey: app.Public(), Principals: []string{"user:*", "ops"}},
	}})
	set, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	claims := func(principal string) CallClaims {
		c := CallClaims{Client: app.Name, Principal: principal, TokenID: "t1", TokenExpires: now.Add(time.Hour),
			KeyDigest: KeyDigest("k"), Tool: "web_fetch", ArgsDigest: "d1"}
		c.WorkflowID = CallID("mcp/", c.Client, c.Principal, c.KeyDigest, c.Tool, c.ArgsDigest)
		return c
	}
	verify := func(signer Credential, c CallClaims, signed, started time.Time) error {
		att, err := signer.AttestCall(c, signed)
		if err != nil {
			t.Fatal(err)
		}
		_, err = set.VerifyCall("mcp/", c.WorkflowID, c.Tool, c.ArgsDigest, att, started)
		return err
	}
	code := func(err error) string {
		var r *RefusedError
		if errors.As(err, &r) {
			return r.Code
		}
		return ""
	}
	if err := verify(gw, claims("user:ann"), now, now); err != nil {
		t.Fatalf("a gateway's attestation in time: %v", err)
	}
	if err := verify(app, claims("ops"), now, now); err != nil {
		t.Fatalf("the client's own attestation: %v", err)
	}
	for _, tc := range []struct {
		name            string
		signer          Credential
		c               CallClaims
		signed, started time.Time
		want            string
	}{
		{"signed too long before the start", gw, claims("user:ann"), now, now.Add(MaxAge + time.Second), RefusalExpired},
		{"signed after the start", gw, claims("user:ann"), now.Add(MaxSkew + time.Second), now, RefusalExpired},
		{"token expired before the start", gw, func() CallClaims { c := claims("user:ann"); c.TokenExpires = now.Add(-time.Second); return c }(), now, now, RefusalExpired},
		{"gateway outside its scopes", gw, claims("ops"), now, now, RefusalOutOfScope},
		{"gateway naming no token", gw, func() CallClaims { c := claims("user:ann"); c.TokenID = ""; return c }(), now, now, RefusalMisattested},
		{"client outside its scopes", app, claims("root"), now, now, RefusalOutOfScope},
	} {
		if got := code(verify(tc.signer, tc.c, tc.signed, tc.started)); got != tc.want {
			t.Errorf("%s: refusal %q, want %q", tc.name, got, tc.want)
		}
	}
	if _, err := set.VerifyCall("mcp/", "mcp/app/x", "web_fetch", "d1", nil, now); code(err) != RefusalUnattested {
		t.Errorf("no attestation: %v", err)
	}
}

// One signature has one spelling: a line break in it, or another last character that decodes
// to the same bytes, is refused, so a replay check keyed on the string cannot be walked around.
func TestVerifyCallRefusesOtherSpellingsOfTheSignature(t *testing.T) {
	gw, _ := NewCredential("gw")
	b, _ := json.Marshal(File{Clients: []Client{{Name: gw.Name, PublicKey: gw.Public(), Principals: []string{"ops"}}}})
	set, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := CallClaims{Client: gw.Name, Principal: "ops", KeyDigest: KeyDigest("k"), Tool: "t", ArgsDigest: "d"}
	c.WorkflowID = CallID("mcp/", c.Client, c.Principal, c.KeyDigest, c.Tool, c.ArgsDigest)
	att, err := gw.AttestCall(c, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.VerifyCall("mcp/", c.WorkflowID, "t", "d", att, now); err != nil {
		t.Fatalf("the canonical signature: %v", err)
	}
	sig := att.Signature
	last := sig[len(sig)-1:]
	var other string
	for _, ch := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" {
		if string(ch) != last {
			if dec, err := base64.RawURLEncoding.DecodeString(sig[:len(sig)-1] + string(ch)); err == nil && string(dec) == string(mustDecode(t, sig)) {
				other = sig[:len(sig)-1] + string(ch)
				break
			}
		}
	}
	for _, s := range []string{sig + "\n", "\r" + sig, sig[:10] + "\n" + sig[10:], other} {
		if s == "" {
			continue
		}
		a := *att
		a.Signature = s
		if _, err := set.VerifyCall("mcp/", c.WorkflowID, "t", "d", &a, now); err == nil {
			t.Errorf("another spelling of the signature verified: %q", s)
		}
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
