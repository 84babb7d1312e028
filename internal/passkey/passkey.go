// Package passkey verifies the WebAuthn assertions with which an approver's passkey signs a
// decision (issue 21, item 3). A capability whose policy says "approval/passkey" is decided
// only with an assertion whose challenge is the decision's MAC (token.SignDecision: it binds
// the confirmation, the decision, the approver, the reason, the argument digest and the
// nonce), made by one of the deciding approver's registered passkeys for this relying party
// (Config.RPID) from one of the approver page's origins, with the user present and verified,
// and with a signature counter that went up. The approver page (internal/web) registers
// passkeys and asks for assertions; the worker (activities.ConsumeConfirmation) verifies them
// with Verify against the credential the store holds (store.Passkey).
//
// The cryptography and the WebAuthn data formats are github.com/go-webauthn/webauthn's
// (W3C WebAuthn Level 3, §7.2 "Verifying an Authentication Assertion"); this package adds the
// checks Airlock names on their own: the challenge is the MAC, the origin is a configured page
// origin, and the counter.
package passkey

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/go-webauthn/webauthn/protocol"
)

// MaxAssertionBytes bounds an assertion as it travels in a decision (workflows.Decision.Passkey):
// a browser's PublicKeyCredential JSON of an ES256 or RS256 passkey is about 1 KiB.
const MaxAssertionBytes = 4 << 10

// Config is the relying party the approver page registers passkeys for and the worker
// verifies assertions against. RPID is the page's host name (a registrable domain or
// "localhost", never an IP address: browsers refuse those). Origins are the page's origins
// ("https://airlock.example.com"), matched exactly; empty means "https://RPID", and, when
// RPID is localhost, http://localhost:8780 and https://localhost:8780 (DefaultLocalPort;
// FromEnv takes the port of AIRLOCK_WEB_ADDR). Another local web app on another port is
// another origin and is refused (issue 33, item 4). For local development only, an origin
// may be "http://localhost:*" (any port of localhost, LocalWildcard); a page listening on a
// non-loopback address refuses to start with it (CheckServing).
type Config struct {
	RPID    string
	Origins []string
}

// DefaultLocalPort is the approver page's port on localhost when neither
// AIRLOCK_PASSKEY_ORIGINS nor AIRLOCK_WEB_ADDR says another (AIRLOCK_WEB_ADDR's default).
const DefaultLocalPort = "8780"

// ErrWildcardOrigin: a page listening on a non-loopback address with a wildcard passkey
// origin (or the localhost relying party): a deployment must list its exact origins.
var ErrWildcardOrigin = errors.New("passkey: wildcard origins are for local development only")

// LocalWildcard reports whether origin is a local-development wildcard: scheme
// "http(s)://localhost:*".
func LocalWildcard(origin string) bool {
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	return o == "http://localhost:*" || o == "https://localhost:*"
}

// CheckServing refuses (ErrWildcardOrigin) a page that listens on listenHost, a
// non-loopback address (or every address), with a wildcard origin: outside local development
// passkey origins must be exact (issue 33, item 4).
func (c Config) CheckServing(listenHost string) error {
	if loopback(listenHost) {
		return nil
	}
	for _, o := range c.Origins {
		if LocalWildcard(o) || strings.Contains(o, "*") {
			return fmt.Errorf("%w: the page listens on %q (not loopback) and %s lists %q; list the page's exact origins (https://approve.example.com)", ErrWildcardOrigin, listenHost, EnvOrigins, o)
		}
	}
	return nil
}

// loopback reports whether host (an address or name without port) reaches this machine only.
func loopback(host string) bool {
	h := strings.Trim(host, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Settings read by FromEnv.
const (
	// EnvRPID names the relying party id (default: the first host name of AIRLOCK_WEB_HOSTS
	// that is not an IP address, else "localhost").
	EnvRPID = "AIRLOCK_PASSKEY_RP_ID"
	// EnvOrigins lists the approver page's origins, comma separated (default: see Config).
	EnvOrigins = "AIRLOCK_PASSKEY_ORIGINS"
)

// FromEnv reads the relying party from AIRLOCK_PASSKEY_RP_ID and AIRLOCK_PASSKEY_ORIGINS
// (AIRLOCK_WEB_HOSTS for the default id). Every worker and every `airlock web` of a deployment
// must read the same values: a passkey registered under one RP id never verifies under
// another. Errors: an invalid id or origin (Validate).
func FromEnv() (Config, error) {
	c := Config{RPID: strings.TrimSpace(os.Getenv(EnvRPID))}
	if c.RPID == "" {
		c.RPID = "localhost"
		for _, h := range splitList(os.Getenv("AIRLOCK_WEB_HOSTS")) {
			// The first plain host name; IP addresses (and anything with a port) cannot be a
			// relying party.
			if net.ParseIP(strings.Trim(h, "[]")) == nil && !strings.ContainsAny(h, ":/ []") {
				c.RPID = strings.ToLower(h)
				break
			}
		}
	}
	c.Origins = splitList(os.Getenv(EnvOrigins))
	if len(c.Origins) == 0 && c.RPID == "localhost" {
		// Exact by default: the page's own port, never any local port (issue 33, item 4).
		port := DefaultLocalPort
		if _, p, err := net.SplitHostPort(strings.TrimSpace(os.Getenv("AIRLOCK_WEB_ADDR"))); err == nil && p != "" && p != "0" {
			port = p
		}
		c.Origins = []string{"http://localhost:" + port, "https://localhost:" + port}
	}
	return c, c.Validate()
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Validate reports an RP id that is empty, an IP address or not a host name, and an origin
// that is not an http(s) origin (scheme, host, optional port, nothing else) on RPID or one of
// its subdomains.
func (c Config) Validate() error {
	id := c.RPID
	if id == "" || net.ParseIP(strings.Trim(id, "[]")) != nil || strings.ContainsAny(id, ":/ ") || strings.ToLower(id) != id {
		return fmt.Errorf("passkey: relying party id %q must be a lower-case host name, not an IP address (%s)", id, EnvRPID)
	}
	for _, o := range c.Origins {
		if LocalWildcard(o) {
			if id != "localhost" {
				return fmt.Errorf("passkey: origin %q is a local-development wildcard; the relying party %q needs exact origins", o, id)
			}
			continue
		}
		if strings.Contains(o, "*") {
			return fmt.Errorf("passkey: origin %q: wildcards are refused; list exact origins (%s)", o, EnvOrigins)
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("passkey: origin %q is not scheme://host[:port] (%s)", o, EnvOrigins)
		}
		if h := strings.ToLower(u.Hostname()); h != id && !strings.HasSuffix(h, "."+id) {
			return fmt.Errorf("passkey: origin %q is not on the relying party %q or a subdomain of it", o, id)
		}
	}
	return nil
}

// OriginAllowed reports whether a ceremony's origin (as the browser wrote it in the client
// data) is one of the page's origins.
func (c Config) OriginAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return false
	}
	norm := strings.ToLower(u.Scheme + "://" + u.Host)
	host := strings.ToLower(u.Hostname())
	origins := c.Origins
	if len(origins) == 0 && c.RPID == "localhost" {
		origins = []string{"http://localhost:" + DefaultLocalPort, "https://localhost:" + DefaultLocalPort}
	}
	if len(origins) > 0 {
		for _, o := range origins {
			if strings.ToLower(strings.TrimSuffix(o, "/")) == norm {
				return true
			}
			if LocalWildcard(o) && host == "localhost" && u.Port() != "" && strings.HasPrefix(strings.ToLower(o), strings.ToLower(u.Scheme)+"://") {
				return true
			}
		}
		return false
	}
	return u.Scheme == "https" && host == c.RPID && u.Port() == ""
}

// Errors of Verify, each a refusal the worker reports with its own code.
var (
	// ErrMalformed: the assertion is not a WebAuthn PublicKeyCredential JSON (or over
	// MaxAssertionBytes).
	ErrMalformed = errors.New("passkey: the assertion is not a WebAuthn assertion")
	// ErrChallenge: the assertion signs another challenge than this decision's MAC (made for
	// another decision, other arguments or an earlier token).
	ErrChallenge = errors.New("passkey: the assertion was made for another decision (its challenge is not this decision's MAC)")
	// ErrOrigin: the browser made the assertion on a page that is not one of the configured
	// origins, or for another ceremony than webauthn.get, or cross-origin.
	ErrOrigin = errors.New("passkey: the assertion was made on another origin than the approver page's")
	// ErrRPID: the authenticator signed for another relying party.
	ErrRPID = errors.New("passkey: the assertion is for another relying party id")
	// ErrUser: the authenticator did not report the user present and verified.
	ErrUser = errors.New("passkey: the authenticator did not verify the user")
	// ErrSignature: the signature does not verify under the registered public key.
	ErrSignature = errors.New("passkey: the assertion's signature does not verify under the registered passkey")
	// ErrCounter: the signature counter did not increase (a replayed assertion or a cloned
	// authenticator).
	ErrCounter = errors.New("passkey: the authenticator's signature counter did not increase")
)

// Assertion is a parsed assertion: CredentialID (base64url, unpadded) names the passkey that
// made it, to be looked up in the store before Verify.
type Assertion struct {
	CredentialID string
	parsed       *protocol.ParsedCredentialAssertionData
}

// Parse parses a browser's assertion (the JSON of the PublicKeyCredential that
// navigator.credentials.get returned, with base64url binary members). Errors wrap ErrMalformed.
func Parse(raw []byte) (*Assertion, error) {
	if len(raw) == 0 || len(raw) > MaxAssertionBytes {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", ErrMalformed, len(raw), MaxAssertionBytes)
	}
	p, err := protocol.ParseCredentialRequestResponseBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, detail(err))
	}
	return &Assertion{CredentialID: p.ID, parsed: p}, nil
}

// Origin is the origin the browser wrote in the assertion's client data: the page that asked
// for it (unverified until Verify).
func (a *Assertion) Origin() string {
	if a == nil || a.parsed == nil {
		return ""
	}
	return a.parsed.Response.CollectedClientData.Origin
}

// Credential is the registered passkey an assertion is verified against.
type Credential struct {
	// PublicKey is the COSE public key from registration.
	PublicKey []byte
	// SignCount is the counter last accepted.
	SignCount uint32
}

// Verified is what a verified assertion proved: the authenticator's new signature counter
// (to be stored, store.UsePasskey) and the user-verified flag.
type Verified struct {
	SignCount    uint32
	UserVerified bool
}

// Verify checks a against the registered credential: the client data's type is webauthn.get,
// its challenge is exactly challenge (the decision's MAC bytes; ErrChallenge), its origin one
// of c's (ErrOrigin), not cross-origin; the authenticator data's RP id hash is SHA-256 of
// c.RPID (ErrRPID); the user-present and user-verified flags are set (ErrUser); the signature
// over authenticator data ‖ SHA-256(client data) verifies under cred.PublicKey
// (ErrSignature); and the counter is above cred.SignCount, or both are 0 (ErrCounter, with
// Verified.SignCount set: everything else verified, so a caller may recognise the retry of a
// presentation it accepted before). The caller stores the returned counter atomically (a
// concurrent use of the same assertion then fails there).
func Verify(c Config, a *Assertion, cred Credential, challenge []byte) (Verified, error) {
	if a == nil || a.parsed == nil {
		return Verified{}, ErrMalformed
	}
	p := a.parsed
	cd := p.Response.CollectedClientData
	got, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(cd.Challenge, "="))
	if err != nil || len(challenge) == 0 || subtle.ConstantTimeCompare(got, challenge) != 1 {
		return Verified{}, ErrChallenge
	}
	if cd.Type != protocol.AssertCeremony || cd.CrossOrigin || cd.TopOrigin != "" || !c.OriginAllowed(cd.Origin) {
		return Verified{}, fmt.Errorf("%w (%q)", ErrOrigin, cd.Origin)
	}
	rpHash := sha256.Sum256([]byte(c.RPID))
	if !bytes.Equal(p.Response.AuthenticatorData.RPIDHash, rpHash[:]) {
		return Verified{}, fmt.Errorf("%w: the page's is %q", ErrRPID, c.RPID)
	}
	flags := p.Response.AuthenticatorData.Flags
	if !flags.HasUserPresent() || !flags.HasUserVerified() {
		return Verified{}, ErrUser
	}
	// Everything above again, and the signature, by the library (W3C WebAuthn §7.2 steps 7-21).
	if err := p.Verify(cd.Challenge, c.RPID, "", []string{cd.Origin}, nil, nil, protocol.TopOriginExplicitVerificationMode,
		false, true, true, cred.PublicKey, protocol.SignaturePolicy{}); err != nil {
		return Verified{}, fmt.Errorf("%w: %v", ErrSignature, detail(err))
	}
	n := p.Response.AuthenticatorData.Counter
	if !(n > cred.SignCount || (n == 0 && cred.SignCount == 0)) {
		return Verified{SignCount: n, UserVerified: true}, fmt.Errorf("%w: %d after %d", ErrCounter, n, cred.SignCount)
	}
	return Verified{SignCount: n, UserVerified: flags.HasUserVerified()}, nil
}

// detail is a library error's message with its details (protocol.Error keeps them apart).
func detail(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		s := pe.Type + ": " + pe.Details
		if pe.DevInfo != "" {
			s += " (" + pe.DevInfo + ")"
		}
		return s
	}
	return err.Error()
}

// Challenge is the WebAuthn challenge of a decision: the 32 bytes of its MAC (HMAC-SHA256,
// base64url as token.SignDecision writes it). Errors: a MAC that is not that.
func Challenge(mac string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("passkey: the decision's MAC is not 32 bytes of base64url")
	}
	return b, nil
}
