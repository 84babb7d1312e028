package identity

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/airlock-dev/airlock/internal/clients"
)

// Requester access tokens (issue 33, item 2): an application may present the identity
// provider's access token (a JWT) as the requester's identity, besides a client credential.
// AccessVerifier checks it against the provider's keys (its JWKS, through go-oidc's
// RemoteKeySet, re-fetched when a token names an unknown key: rotation), and its issuer,
// audience and expiry; the principal is "oidc:<name claim>" unless the subject is mapped.

// AccessConfig is one provider whose access tokens requesters may present.
type AccessConfig struct {
	// Issuer is the provider's issuer (the tokens' iss), exactly.
	Issuer string
	// JWKSURL is the provider's key set (default: discovered from the issuer's
	// /.well-known/openid-configuration jwks_uri).
	JWKSURL string
	// Audience is the audience Airlock's API is registered under at the provider (Okta: the
	// authorization server's audience, e.g. api://airlock; Entra ID: the application id URI
	// or client id); a token for any other audience is refused.
	Audience string
	// SubjectClaim names the person id (default "sub"; Entra ID: "oid").
	SubjectClaim string
	// PrincipalClaim names the claim whose value becomes the principal after
	// PrincipalPrefix (default "sub"; e.g. "preferred_username", Okta's "sub" is the login).
	PrincipalClaim string
	// PrincipalPrefix prefixes the principal (default "oidc:"), so a provider's user never
	// takes a principal a client credential speaks for by another route.
	PrincipalPrefix string
	// Algorithms are the accepted signing algorithms (default RS256, ES256).
	Algorithms []string
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// HTTPClient reaches the provider (default http.DefaultClient).
	HTTPClient *http.Client
}

// Requester is what a verified access token proves.
type Requester struct {
	// Principal is the turn principal the token speaks for (clients.PrincipalPattern).
	Principal string
	// Person is "<issuer>#<subject>".
	Person string
	// Expiry is the token's expiry.
	Expiry time.Time
}

// ErrAccessToken: an access token that does not verify (signature, issuer, audience,
// expiry, claims). Callers answer 401.
var ErrAccessToken = errors.New("identity: access token refused")

// AccessVerifier verifies requester access tokens of one provider. Safe for concurrent use.
type AccessVerifier struct {
	cfg AccessConfig
	v   *oidc.IDTokenVerifier
	ctx context.Context
}

// NewAccessVerifier builds the verifier; without JWKSURL it discovers the provider. Errors:
// missing issuer or audience, discovery failure.
func NewAccessVerifier(ctx context.Context, cfg AccessConfig) (*AccessVerifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("identity: an access-token verifier needs an issuer and an audience")
	}
	if cfg.SubjectClaim == "" {
		cfg.SubjectClaim = "sub"
	}
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = "sub"
	}
	if cfg.PrincipalPrefix == "" {
		cfg.PrincipalPrefix = "oidc:"
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = []string{oidc.RS256, oidc.ES256}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), cfg.HTTPClient)
	if cfg.JWKSURL == "" {
		p, err := oidc.NewProvider(pctx, cfg.Issuer)
		if err != nil {
			return nil, fmt.Errorf("identity: discover %s: %w", cfg.Issuer, err)
		}
		var meta struct {
			JWKS string `json:"jwks_uri"`
		}
		if err := p.Claims(&meta); err != nil || meta.JWKS == "" {
			return nil, fmt.Errorf("identity: %s lists no jwks_uri: %v", cfg.Issuer, err)
		}
		cfg.JWKSURL = meta.JWKS
	}
	keys := oidc.NewRemoteKeySet(pctx, cfg.JWKSURL)
	v := oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{ClientID: cfg.Audience, SupportedSigningAlgs: cfg.Algorithms, Now: cfg.Now})
	return &AccessVerifier{cfg: cfg, v: v, ctx: pctx}, nil
}

// MaxAccessTokenBytes bounds a presented token.
const MaxAccessTokenBytes = 8 << 10

// Verify checks raw (the bearer token, without "Bearer ") and returns the requester it
// proves. Errors wrap ErrAccessToken with why: a bad signature or unknown key, another
// issuer, another audience, expired, or a missing or unusable principal claim.
func (a *AccessVerifier) Verify(ctx context.Context, raw string) (Requester, error) {
	if raw == "" || len(raw) > MaxAccessTokenBytes || strings.Count(raw, ".") != 2 {
		return Requester{}, fmt.Errorf("%w: not a JWT", ErrAccessToken)
	}
	t, err := a.v.Verify(a.ctx, raw)
	if err != nil {
		return Requester{}, fmt.Errorf("%w: %w", ErrAccessToken, err)
	}
	var claims map[string]any
	if err := t.Claims(&claims); err != nil {
		return Requester{}, fmt.Errorf("%w: claims: %w", ErrAccessToken, err)
	}
	sub, _ := claims[a.cfg.SubjectClaim].(string)
	who, _ := claims[a.cfg.PrincipalClaim].(string)
	principal := a.cfg.PrincipalPrefix + who
	if sub == "" || who == "" || !clients.PrincipalPattern.MatchString(principal) {
		return Requester{}, fmt.Errorf("%w: claims %q / %q give no usable principal", ErrAccessToken, a.cfg.SubjectClaim, a.cfg.PrincipalClaim)
	}
	return Requester{Principal: principal, Person: t.Issuer + "#" + sub, Expiry: t.Expiry}, nil
}

// IsJWT reports whether a bearer token looks like a JWT (three base64url parts) rather than
// an Airlock bearer token (clients.BearerPrefix), so one Authorization header serves both.
func IsJWT(token string) bool {
	return !strings.HasPrefix(token, clients.BearerPrefix) && strings.Count(token, ".") == 2
}
