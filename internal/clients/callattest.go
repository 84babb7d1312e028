package clients

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"
)

// Call attestations: how a single call from an MCP client reaches a worker without its bearer
// token. The bearer token is a reusable secret (valid for up to MaxBearerTTL): written into a
// call workflow's input it would sit in Temporal history, where whoever reads histories could
// lift it and start calls as its principal. Instead the MCP server, having verified the token,
// signs a statement bound to exactly one call: this workflow id, this tool, these arguments'
// digest, for this client and principal, now. Copied out of a history it starts nothing else:
// another id, tool or argument digest fails the signature, and the same id is the same call
// (REJECT_DUPLICATE, and the requester record's replay check).
//
// Who signs: a client holding its own credential (stdio, where the MCP server is the client's
// own process) signs for itself; over HTTP the server signs with a gateway credential, a
// registered client marked Gateway, which may vouch only for callers whose registered client
// may itself speak for the principal (the bearer's client must still be in the clients file
// when the call starts: removing it revokes its tokens at once).

// callAttestationLabel separates call attestations from turn attestations and bearer tokens.
const callAttestationLabel = "airlock mcp call attestation v1"

// CallClaims are what a call attestation states about one call.
type CallClaims struct {
	// Client is the registered client whose bearer token (or credential) proved the caller,
	// Principal whom the call acts for.
	Client    string `json:"client"`
	Principal string `json:"principal"`
	// TokenID identifies the bearer token the caller presented (hex SHA-256 of its signature:
	// it names the token in audits without being it); empty when the client signed itself.
	TokenID string `json:"token_id,omitempty"`
	// TokenExpires is when that bearer token expires (zero when the client signed itself).
	TokenExpires time.Time `json:"token_expires,omitzero"`
	// WorkflowID is the call's workflow id (CallID of the fields below).
	WorkflowID string `json:"workflow_id"`
	// KeyDigest is the hex SHA-256 of the caller's idempotency key (KeyDigest).
	KeyDigest string `json:"key_digest"`
	// Tool is the tool name as the caller sent it; ArgsDigest the canonical digest of its
	// arguments (canonical.Digest), or "raw:<text>" for arguments that are not an object.
	Tool       string `json:"tool"`
	ArgsDigest string `json:"args_digest"`
}

// CallAttestation is a signed CallClaims: Signer is the registered client whose key signed
// (Client itself, or a gateway), Time when, Signature the base64url (no padding) ed25519
// signature over CallMessage.
type CallAttestation struct {
	CallClaims
	Signer    string    `json:"signer"`
	Time      time.Time `json:"time"`
	Signature string    `json:"signature"`
}

// KeyDigest is the hex SHA-256 of an idempotency key: the key itself (an MCP session id and
// progress token, or the client's own key) never enters a workflow's input.
func KeyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// TokenID is the id CallClaims.TokenID gives a verified bearer token.
func TokenID(b Bearer) string {
	sum := sha256.Sum256([]byte(b.Signature))
	return hex.EncodeToString(sum[:])
}

// CallID is the workflow id of a single call: prefix (workflows.CallWorkflowPrefix), the
// client, '/', and 32 hex digits of the SHA-256 of the principal, the key digest, the tool and
// the arguments' digest, each length-prefixed. The same call under the same key is the same id.
func CallID(prefix, client, principal, keyDigest, tool, argsDigest string) string {
	h := sha256.New()
	for _, f := range []string{principal, keyDigest, tool, argsDigest} {
		fmt.Fprintf(h, "%d:%s", len(f), f)
	}
	return prefix + client + "/" + hex.EncodeToString(h.Sum(nil)[:16])
}

// CallMessage is what a call attestation signs: the label, the signer, every claim and the
// signing time (RFC 3339, UTC, nanoseconds), each length-prefixed.
func CallMessage(signer string, c CallClaims, at time.Time) []byte {
	var b bytes.Buffer
	exp := ""
	if !c.TokenExpires.IsZero() {
		exp = c.TokenExpires.UTC().Format(time.RFC3339Nano)
	}
	for _, f := range []string{callAttestationLabel, signer, c.Client, c.Principal, c.TokenID, exp, c.WorkflowID,
		c.KeyDigest, c.Tool, c.ArgsDigest, at.UTC().Format(time.RFC3339Nano)} {
		fmt.Fprintf(&b, "%d:%s", len(f), f)
	}
	return b.Bytes()
}

// AttestCall signs claims with the credential at time at.
func (c Credential) AttestCall(claims CallClaims, at time.Time) (*CallAttestation, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("clients: attest a call: the credential holds no key")
	}
	at = at.UTC()
	sig := ed25519.Sign(c.key, CallMessage(c.Name, claims, at))
	return &CallAttestation{CallClaims: claims, Signer: c.Name, Time: at, Signature: base64.RawURLEncoding.EncodeToString(sig)}, nil
}

// VerifyCall checks that att proves the call workflowPrefix+… with these fields, started at
// startedAt: the signer is registered and is the call's client or a Gateway; its signature
// verifies; the claimed workflow id is CallID of the claims and equals workflowID; the claims
// name tool and argsDigest; it was signed within [startedAt-MaxAge, startedAt+MaxSkew]; the
// bearer token it names had not expired at startedAt; the client is registered and may speak
// for the principal, and so may the gateway. Errors: *RefusedError with the turn refusal codes
// (RefusalUnattested, RefusalMisattested, RefusalExpired, RefusalNoPrincipal, RefusalOutOfScope).
func (s *Set) VerifyCall(prefix, workflowID, tool, argsDigest string, att *CallAttestation, startedAt time.Time) (Client, error) {
	if att == nil || att.Signature == "" {
		return Client{}, refused(RefusalUnattested, "the call carries no attestation by a registered client or gateway")
	}
	c := att.CallClaims
	if !PrincipalPattern.MatchString(c.Principal) {
		return Client{}, refused(RefusalNoPrincipal, "the call's principal is not a name (%s)", PrincipalPattern)
	}
	if c.WorkflowID != workflowID || CallID(prefix, c.Client, c.Principal, c.KeyDigest, c.Tool, c.ArgsDigest) != workflowID {
		return Client{}, refused(RefusalMisattested, "the attestation is for another call, not this workflow")
	}
	if c.Tool != tool || c.ArgsDigest != argsDigest {
		return Client{}, refused(RefusalMisattested, "the attestation names another tool or other arguments than this call's")
	}
	signer, ok := s.clients[att.Signer]
	if !ok {
		return Client{}, refused(RefusalMisattested, "the attesting client is not in the clients file")
	}
	if att.Signer != c.Client && !signer.Gateway {
		return Client{}, refused(RefusalMisattested, "client %s signed for client %s but is not registered as a gateway", att.Signer, c.Client)
	}
	sig, err := decodeSignature(att.Signature)
	if err != nil || !ed25519.Verify(signer.key, CallMessage(att.Signer, c, att.Time), sig) {
		return Client{}, refused(RefusalMisattested, "the signature of %s does not verify over this call", att.Signer)
	}
	if age := startedAt.Sub(att.Time); age > MaxAge || age < -MaxSkew {
		return Client{}, refused(RefusalExpired, "signed at %s, the call started at %s (an attestation is good from %s before to %s after)",
			att.Time.UTC().Format(time.RFC3339), startedAt.UTC().Format(time.RFC3339), MaxAge, MaxSkew)
	}
	if att.Signer != c.Client && (c.TokenID == "" || c.TokenExpires.IsZero()) {
		return Client{}, refused(RefusalMisattested, "gateway %s vouched for client %s without naming the bearer token it verified", att.Signer, c.Client)
	}
	if !c.TokenExpires.IsZero() && startedAt.After(c.TokenExpires) {
		return Client{}, refused(RefusalExpired, "the caller's bearer token expired at %s", c.TokenExpires.UTC().Format(time.RFC3339))
	}
	client, ok := s.clients[c.Client]
	if !ok {
		return Client{}, refused(RefusalMisattested, "client %s is no longer in the clients file", c.Client)
	}
	if !client.MaySpeakFor(c.Principal) {
		return Client{}, refused(RefusalOutOfScope, "client %s may not act for principal %s", c.Client, c.Principal)
	}
	if att.Signer != c.Client && !signer.MaySpeakFor(c.Principal) {
		return Client{}, refused(RefusalOutOfScope, "gateway %s may not vouch for principal %s", att.Signer, c.Principal)
	}
	return client.Client, nil
}
