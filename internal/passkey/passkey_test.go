package passkey

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/internal/passkey/passkeytest"
)

// authenticator wraps passkeytest's software authenticator for these tests.
type authenticator struct{ *passkeytest.Authenticator }

func newAuthenticator(t *testing.T) *authenticator {
	t.Helper()
	a, err := passkeytest.New()
	if err != nil {
		t.Fatal(err)
	}
	return &authenticator{a}
}

// made is what the browser and the authenticator put in.
type made struct {
	typ, origin, rpID string
	challenge         []byte
	flags             byte
	counter           uint32
	crossOrigin       bool
}

func (a *authenticator) assert(t *testing.T, m made) []byte {
	t.Helper()
	out, err := a.Assert(passkeytest.Assertion{Type: m.typ, Origin: m.origin, RPID: m.rpID, Challenge: m.challenge, Flags: m.flags, Counter: m.counter, CrossOrigin: m.crossOrigin})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const flagsUPUV = 0x01 | 0x04

func mac() []byte {
	m := make([]byte, 32)
	_, _ = rand.Read(m)
	return m
}

// TestVerifyAcceptsExactlyTheDecisionsAssertion: an assertion over this MAC, on the page's
// origin, for its RP id, user present and verified, counter up, verifies; every single thing
// changed is refused with its own error, and the counter rule holds (up, or both 0).
func TestVerifyAcceptsExactlyTheDecisionsAssertion(t *testing.T) {
	a := newAuthenticator(t)
	other := newAuthenticator(t)
	cfg := Config{RPID: "airlock.example.com", Origins: []string{"https://airlock.example.com"}}
	ch := mac()
	good := made{origin: "https://airlock.example.com", rpID: "airlock.example.com", challenge: ch, flags: flagsUPUV, counter: 7}
	cred := Credential{PublicKey: a.PublicKey(), SignCount: 6}

	verify := func(raw []byte, c Credential, challenge []byte) (Verified, error) {
		as, err := Parse(raw)
		if err != nil {
			return Verified{}, err
		}
		return Verify(cfg, as, c, challenge)
	}
	v, err := verify(a.assert(t, good), cred, ch)
	if err != nil || v.SignCount != 7 || !v.UserVerified {
		t.Fatalf("the decision's own assertion: %+v, %v", v, err)
	}
	as, _ := Parse(a.assert(t, good))
	if as.CredentialID != a.ID() {
		t.Fatalf("credential id = %q", as.CredentialID)
	}

	cases := []struct {
		name string
		m    func(made) made
		cred Credential
		ch   []byte
		want error
	}{
		{"another decision's MAC", func(m made) made { return m }, cred, mac(), ErrChallenge},
		{"another origin", func(m made) made { m.origin = "https://evil.example"; return m }, cred, ch, ErrOrigin},
		{"plain http on the RP host", func(m made) made { m.origin = "http://airlock.example.com"; return m }, cred, ch, ErrOrigin},
		{"cross-origin iframe", func(m made) made { m.crossOrigin = true; return m }, cred, ch, ErrOrigin},
		{"a registration, not an assertion", func(m made) made { m.typ = "webauthn.create"; return m }, cred, ch, ErrOrigin},
		{"another relying party", func(m made) made { m.rpID = "example.com"; return m }, cred, ch, ErrRPID},
		{"user not verified", func(m made) made { m.flags = 0x01; return m }, cred, ch, ErrUser},
		{"user not present", func(m made) made { m.flags = 0x04; return m }, cred, ch, ErrUser},
		{"another authenticator's key", func(m made) made { return m }, Credential{PublicKey: other.PublicKey(), SignCount: 6}, ch, ErrSignature},
		{"counter not increasing", func(m made) made { return m }, Credential{PublicKey: a.PublicKey(), SignCount: 7}, ch, ErrCounter},
		{"counter going back", func(m made) made { m.counter = 3; return m }, cred, ch, ErrCounter},
		{"counter 0 after a counting authenticator", func(m made) made { m.counter = 0; return m }, cred, ch, ErrCounter},
	}
	for _, c := range cases {
		_, err := verify(a.assert(t, c.m(good)), c.cred, c.ch)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}

	// A bad signature: the signature bytes of another assertion.
	var x, y map[string]any
	_ = json.Unmarshal(a.assert(t, good), &x)
	_ = json.Unmarshal(a.assert(t, made{origin: good.origin, rpID: good.rpID, challenge: mac(), flags: flagsUPUV, counter: 7}), &y)
	x["response"].(map[string]any)["signature"] = y["response"].(map[string]any)["signature"]
	forged, _ := json.Marshal(x)
	if _, err := verify(forged, cred, ch); !errors.Is(err, ErrSignature) {
		t.Errorf("a swapped signature: %v, want ErrSignature", err)
	}
	// An authenticator without a counter (always 0) verifies while the stored one is 0.
	zero := good
	zero.counter = 0
	if _, err := verify(a.assert(t, zero), Credential{PublicKey: a.PublicKey()}, ch); err != nil {
		t.Errorf("a counterless authenticator: %v", err)
	}
	// Not an assertion at all, or too big.
	for _, raw := range [][]byte{nil, []byte(`{}`), []byte(`not json`), make([]byte, MaxAssertionBytes+1)} {
		if _, err := Parse(raw); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%.20q) = %v, want ErrMalformed", raw, err)
		}
	}
}

// TestOriginsAndRelyingParty: localhost accepts any loopback port (the page's random test
// port), a named RP only https on itself unless origins are listed, and Validate refuses IP
// addresses and origins off the RP.
func TestOriginsAndRelyingParty(t *testing.T) {
	local := Config{RPID: "localhost"}
	for o, want := range map[string]bool{"http://localhost:8780": true, "https://localhost:8780": true, "https://localhost": false, "http://127.0.0.1:8780": false,
		"http://localhost:3000": false, "http://localhost.evil.example": false, "ftp://localhost": false, "http://localhost:8780/path": false} {
		if got := local.OriginAllowed(o); got != want {
			t.Errorf("localhost: OriginAllowed(%q) = %v", o, got)
		}
	}
	dev := Config{RPID: "localhost", Origins: []string{"http://localhost:*"}}
	if err := dev.Validate(); err != nil || !dev.OriginAllowed("http://localhost:3000") || dev.OriginAllowed("https://localhost:3000") || dev.OriginAllowed("http://127.0.0.1:3000") {
		t.Errorf("the local-development wildcard: %v", err)
	}
	named := Config{RPID: "airlock.example.com"}
	if !named.OriginAllowed("https://airlock.example.com") || named.OriginAllowed("http://airlock.example.com") || named.OriginAllowed("https://airlock.example.com:8443") {
		t.Error("a named RP without origins allows exactly https://RPID")
	}
	listed := Config{RPID: "example.com", Origins: []string{"https://approve.example.com:8443"}}
	if err := listed.Validate(); err != nil || !listed.OriginAllowed("https://APPROVE.example.com:8443") || listed.OriginAllowed("https://example.com") {
		t.Errorf("listed origins: %v", err)
	}
	for _, bad := range []Config{{RPID: "127.0.0.1"}, {RPID: ""}, {RPID: "Example.com"}, {RPID: "example.com", Origins: []string{"https://evil.example"}},
		{RPID: "example.com", Origins: []string{"https://example.com/path"}}, {RPID: "example.com:443"}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
	t.Setenv(EnvRPID, "")
	t.Setenv(EnvOrigins, "")
	t.Setenv("AIRLOCK_WEB_HOSTS", "10.0.0.5,Approve.Example.com")
	if c, err := FromEnv(); err != nil || c.RPID != "approve.example.com" {
		t.Errorf("FromEnv with web hosts = %+v, %v", c, err)
	}
	t.Setenv("AIRLOCK_WEB_HOSTS", "approve.example.com:8443,[::1]")
	if c, err := FromEnv(); err != nil || c.RPID != "localhost" {
		t.Errorf("FromEnv with no plain host name = %+v, %v (a bad web host must not stop a worker)", c, err)
	}
	t.Setenv(EnvRPID, "127.0.0.1")
	if _, err := FromEnv(); err == nil {
		t.Error("FromEnv accepted an IP address as RP id")
	}
}

// TestChallengeIsTheMACBytes: the challenge is the 32 bytes of the base64url MAC.
func TestChallengeIsTheMACBytes(t *testing.T) {
	m := mac()
	got, err := Challenge(base64.RawURLEncoding.EncodeToString(m))
	if err != nil || string(got) != string(m) {
		t.Fatalf("Challenge = %x, %v", got, err)
	}
	if _, err := Challenge("not a mac"); err == nil {
		t.Fatal("Challenge accepted a non-MAC")
	}
}

// BenchmarkVerify is the worker's cost of one passkey decision: parse the browser's assertion
// JSON and verify it (client data, RP id hash, flags, counter, the ES256 signature).
func BenchmarkVerify(b *testing.B) {
	a, err := passkeytest.New()
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{RPID: "airlock.example.com", Origins: []string{"https://airlock.example.com"}}
	ch := mac()
	raw, err := a.Assert(passkeytest.Assertion{Origin: "https://airlock.example.com", RPID: "airlock.example.com", Challenge: ch, Flags: flagsUPUV, Counter: 7})
	if err != nil {
		b.Fatal(err)
	}
	cred := Credential{PublicKey: a.PublicKey(), SignCount: 6}
	b.ReportAllocs()
	for b.Loop() {
		as, err := Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Verify(cfg, as, cred, ch); err != nil {
			b.Fatal(err)
		}
	}
}

// Passkey origins are exact outside local development (issue 33, item 4): by default on
// localhost only the page's own port (AIRLOCK_WEB_ADDR's) is an origin, so an assertion
// another local web app made on another port is refused; the explicit wildcard is for
// loopback only, refused off localhost and by a page listening on a non-loopback address.
func TestOriginsExactOutsideLocalDevelopment(t *testing.T) {
	t.Setenv(EnvRPID, "")
	t.Setenv(EnvOrigins, "")
	t.Setenv("AIRLOCK_WEB_HOSTS", "")
	t.Setenv("AIRLOCK_WEB_ADDR", "127.0.0.1:9000")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if !c.OriginAllowed("http://localhost:9000") || c.OriginAllowed("http://localhost:3000") || c.OriginAllowed("http://localhost:8780") {
		t.Fatalf("default localhost origins %v accept another local port", c.Origins)
	}
	if err := c.CheckServing("0.0.0.0"); err != nil {
		t.Fatalf("exact origins refused on a non-loopback page: %v", err)
	}
	t.Setenv(EnvOrigins, "http://localhost:*")
	dev, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		if err := dev.CheckServing(host); err != nil {
			t.Errorf("the wildcard refused on loopback %s: %v", host, err)
		}
	}
	for _, host := range []string{"0.0.0.0", "", "10.0.0.5", "approve.example.com"} {
		if err := dev.CheckServing(host); !errors.Is(err, ErrWildcardOrigin) {
			t.Errorf("a page on %q with a wildcard origin: %v, want ErrWildcardOrigin", host, err)
		}
	}
	for _, bad := range []Config{{RPID: "example.com", Origins: []string{"http://localhost:*"}}, {RPID: "example.com", Origins: []string{"https://*.example.com"}}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}
