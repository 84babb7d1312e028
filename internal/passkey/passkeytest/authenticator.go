// Package passkeytest is a software WebAuthn authenticator for tests: it makes ES256
// assertions the way a browser returns them from navigator.credentials.get (W3C WebAuthn
// §6.3.3 authenticatorGetAssertion, §5.8.1 client data), so the verifier and the consume path
// can be tested without a browser. The end-to-end tests use Chromium's DevTools virtual
// authenticator instead (integration/passkey_test.go). Never used outside tests.
package passkeytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
)

// Flags of authenticator data (W3C WebAuthn §6.1): user present, user verified.
const (
	FlagUP byte = 0x01
	FlagUV byte = 0x04
)

// Authenticator holds one ES256 passkey.
type Authenticator struct {
	key  *ecdsa.PrivateKey
	id   []byte
	cose []byte
}

// New makes an authenticator with a fresh P-256 key and a random 16-byte credential id.
func New() (*Authenticator, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := k.PublicKey.ECDH()
	if err != nil {
		return nil, err
	}
	raw := pub.Bytes() // 0x04 ‖ x ‖ y
	cose, err := webauthncbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: raw[1:33], -3: raw[33:65]})
	if err != nil {
		return nil, fmt.Errorf("passkeytest: COSE key: %w", err)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	return &Authenticator{key: k, id: id, cose: cose}, nil
}

// PublicKey is the credential's COSE public key, as registration stores it.
func (a *Authenticator) PublicKey() []byte { return a.cose }

// ID is the credential id, base64url without padding (store.Passkey.CredentialID).
func (a *Authenticator) ID() string { return base64.RawURLEncoding.EncodeToString(a.id) }

// Assertion is what the browser and the authenticator put into one assertion. Type defaults
// to "webauthn.get".
type Assertion struct {
	Type, Origin, RPID string
	Challenge          []byte
	Flags              byte
	Counter            uint32
	CrossOrigin        bool
}

// Assert returns the PublicKeyCredential JSON of an assertion signed with the passkey.
func (a *Authenticator) Assert(m Assertion) ([]byte, error) {
	if m.Type == "" {
		m.Type = "webauthn.get"
	}
	cd, err := json.Marshal(map[string]any{"type": m.Type, "challenge": base64.RawURLEncoding.EncodeToString(m.Challenge), "origin": m.Origin, "crossOrigin": m.CrossOrigin})
	if err != nil {
		return nil, err
	}
	rp := sha256.Sum256([]byte(m.RPID))
	ad := append(rp[:], m.Flags)
	ad = binary.BigEndian.AppendUint32(ad, m.Counter)
	cdh := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, ad...), cdh[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, a.key, digest[:])
	if err != nil {
		return nil, err
	}
	b := base64.RawURLEncoding.EncodeToString
	return json.Marshal(map[string]any{"id": b(a.id), "rawId": b(a.id), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b(cd), "authenticatorData": b(ad), "signature": b(sig)}})
}
