package clients

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Bearer tokens (issue 35): how an MCP client Airlock does not run (Claude Code, Cursor, an
// Agents SDK app) proves who it is to `airlock mcp serve`. A bearer token is a statement signed
// by a registered client credential: "client C speaks for principal P from Issued to Expires".
// The MCP server verifies it on every HTTP request (Authorization: Bearer …, the MCP
// authorization specification's header), and the worker verifies it again before a call runs,
// so whoever can start workflows without the credential still proves nobody.
//
// Token form: BearerPrefix, the base64url (no padding) JSON of BearerClaims, '.', the base64url
// ed25519 signature over bearerLabel and the claims' bytes. It carries no secret besides the
// signature; like any bearer token, whoever holds it may use it until it expires.

// BearerPrefix starts every Airlock bearer token.
const BearerPrefix = "alk1."

// MaxBearerTTL is the longest lifetime a bearer token may declare.
const MaxBearerTTL = 90 * 24 * time.Hour

// bearerLabel separates bearer-token signatures from turn attestations.
const bearerLabel = "airlock mcp bearer v1\x00"

// BearerClaims are what a bearer token states.
type BearerClaims struct {
	// Client is the registered client credential that signed the token.
	Client string `json:"client"`
	// Principal is whom its calls act for (the client must be allowed to speak for it).
	Principal string `json:"principal"`
	// Issued and Expires bound when the token may be used.
	Issued  time.Time `json:"iat"`
	Expires time.Time `json:"exp"`
}

// Bearer is a token that verified: its claims and its signature (which identifies the token in
// audits without being the token).
type Bearer struct {
	BearerClaims
	Signature string
}

// MintBearer signs a bearer token for principal, valid from at for ttl (at most MaxBearerTTL).
func (c Credential) MintBearer(principal string, at time.Time, ttl time.Duration) (string, error) {
	if !c.Valid() {
		return "", fmt.Errorf("clients: mint bearer token: the credential holds no key")
	}
	if !PrincipalPattern.MatchString(principal) {
		return "", fmt.Errorf("clients: mint bearer token: principal %q does not match %s", principal, PrincipalPattern)
	}
	if ttl <= 0 || ttl > MaxBearerTTL {
		return "", fmt.Errorf("clients: mint bearer token: lifetime %s is not in (0, %s]", ttl, MaxBearerTTL)
	}
	at = at.UTC().Truncate(time.Second)
	claims, err := json.Marshal(BearerClaims{Client: c.Name, Principal: principal, Issued: at, Expires: at.Add(ttl)})
	if err != nil {
		return "", fmt.Errorf("clients: mint bearer token: %w", err)
	}
	sig := ed25519.Sign(c.key, append([]byte(bearerLabel), claims...))
	return BearerPrefix + base64.RawURLEncoding.EncodeToString(claims) + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// MaxBearerBytes bounds a bearer token's length (a real one is about 300 bytes).
const MaxBearerBytes = 2048

// VerifyBearer checks that token was signed by a registered client that may speak for its
// principal, and that at lies in [Issued-MaxSkew, Expires]. Errors are *RefusedError with
// the turn refusal codes: RefusalUnattested (no token), RefusalMisattested (malformed, unknown
// client, bad signature), RefusalExpired, RefusalNoPrincipal, RefusalOutOfScope.
func (s *Set) VerifyBearer(token string, at time.Time) (Bearer, error) {
	if token == "" {
		return Bearer{}, refused(RefusalUnattested, "no bearer token")
	}
	if len(token) > MaxBearerBytes || !strings.HasPrefix(token, BearerPrefix) {
		return Bearer{}, refused(RefusalMisattested, "not an Airlock bearer token (mint one with `airlock mcp token`)")
	}
	body, sigPart, ok := strings.Cut(strings.TrimPrefix(token, BearerPrefix), ".")
	if !ok {
		return Bearer{}, refused(RefusalMisattested, "malformed bearer token")
	}
	claims, err1 := base64.RawURLEncoding.DecodeString(body)
	sig, err2 := decodeSignature(sigPart)
	if err1 != nil || err2 != nil {
		return Bearer{}, refused(RefusalMisattested, "malformed bearer token")
	}
	var c BearerClaims
	dec := json.NewDecoder(bytes.NewReader(claims))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Bearer{}, refused(RefusalMisattested, "malformed bearer token claims")
	}
	e, ok := s.clients[c.Client]
	if !ok {
		return Bearer{}, refused(RefusalMisattested, "the bearer token's client is not in the clients file")
	}
	if !ed25519.Verify(e.key, append([]byte(bearerLabel), claims...), sig) {
		return Bearer{}, refused(RefusalMisattested, "the bearer token's signature does not verify for client %s", c.Client)
	}
	if !c.Expires.After(c.Issued) || c.Expires.Sub(c.Issued) > MaxBearerTTL {
		// The lifetime MintBearer enforces holds for every token, whoever signed it.
		return Bearer{}, refused(RefusalExpired, "the bearer token's lifetime (%s to %s) is not within %s",
			c.Issued.UTC().Format(time.RFC3339), c.Expires.UTC().Format(time.RFC3339), MaxBearerTTL)
	}
	if at.Before(c.Issued.Add(-MaxSkew)) || at.After(c.Expires) {
		return Bearer{}, refused(RefusalExpired, "the bearer token is valid from %s to %s",
			c.Issued.UTC().Format(time.RFC3339), c.Expires.UTC().Format(time.RFC3339))
	}
	if !PrincipalPattern.MatchString(c.Principal) {
		return Bearer{}, refused(RefusalNoPrincipal, "the bearer token's principal is not a name (%s)", PrincipalPattern)
	}
	if !e.MaySpeakFor(c.Principal) {
		return Bearer{}, refused(RefusalOutOfScope, "client %s may not act for principal %s", c.Client, c.Principal)
	}
	return Bearer{BearerClaims: c, Signature: sigPart}, nil
}
