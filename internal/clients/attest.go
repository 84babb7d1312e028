package clients

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Attestation is the starter's proof that it asked for a turn (TurnRequest.Attestation): its
// client name, the turn's sequence number in its conversation, the time it signed, and an
// ed25519 signature (base64url, no padding) over Message.
type Attestation struct {
	Client    string    `json:"client"`
	Seq       int       `json:"seq"`
	Time      time.Time `json:"time"`
	Signature string    `json:"signature"`
}

// Request is what an attestation binds: the turn (its conversation and sequence number), the
// principal it acts for, and the user's message and system prompt (through MessageDigest).
type Request struct {
	Conversation string
	Seq          int
	Principal    string
	Message      string
	SystemPrompt string
	// Terms is the digest of the request's other terms (the recorded session, the model, the
	// budgets, the confirmation expiry, the scope: workflows.RequestTerms), so nobody who
	// intercepts a signed request can start it under the same principal with other terms.
	Terms string
}

// MaxAge is how long before the turn's start an attestation may have been signed; MaxSkew how
// far after it (the starter's clock ahead of the server's). Outside the window the turn is
// refused requester_expired: a request copied from an old history does not start a turn.
const (
	MaxAge  = 5 * time.Minute
	MaxSkew = time.Minute
)

// attestationLabel separates turn attestations from any other use of the keys.
const attestationLabel = "airlock turn attestation v1"

// MessageDigest is the hex SHA-256 of the user's message and the system prompt,
// length-prefixed (a system prompt steers the model as much as the message does).
func MessageDigest(message, systemPrompt string) string { return digest(message, systemPrompt) }

// Message is what an attestation signs: the label, client, conversation, sequence number,
// principal, message digest, the terms' digest and the signing time (RFC 3339, UTC,
// nanoseconds), each length-prefixed so no two requests share an encoding.
func Message(client string, r Request, at time.Time) []byte {
	var b bytes.Buffer
	for _, f := range []string{attestationLabel, client, r.Conversation, strconv.Itoa(r.Seq), r.Principal,
		MessageDigest(r.Message, r.SystemPrompt), r.Terms, at.UTC().Format(time.RFC3339Nano)} {
		fmt.Fprintf(&b, "%d:%s", len(f), f)
	}
	return b.Bytes()
}

// Attest signs request r at time at (the caller's clock, time.Now in clients).
func (c Credential) Attest(r Request, at time.Time) *Attestation {
	at = at.UTC()
	sig := ed25519.Sign(c.key, Message(c.Name, r, at))
	return &Attestation{Client: c.Name, Seq: r.Seq, Time: at, Signature: base64.RawURLEncoding.EncodeToString(sig)}
}

// Refusal codes of a turn request (audited as turn_refused; TurnResult.EndReason
// "unattested" carries the code in its detail).
const (
	// RefusalUnattested: the request carries no attestation.
	RefusalUnattested = "requester_unattested"
	// RefusalMisattested: unknown client, bad signature, or an attestation for another turn or
	// another request (conversation, sequence, principal, message).
	RefusalMisattested = "requester_misattested"
	// RefusalExpired: signed outside [start-MaxAge, start+MaxSkew].
	RefusalExpired = "requester_expired"
	// RefusalOutOfScope: the client may not speak for this principal.
	RefusalOutOfScope = "requester_out_of_scope"
	// RefusalNoPrincipal: the request names no principal, or one PrincipalPattern refuses.
	RefusalNoPrincipal = "principal_missing"
	// RefusalNoClients: the worker has no usable clients file (nobody can start a turn).
	RefusalNoClients = "clients_unavailable"
	// RefusalReplayed: another run of the turn already used this attestation.
	RefusalReplayed = "requester_replayed"
	// RefusalOtherConversation: the conversation belongs to another principal (the one its
	// first proven turn was for); a turn for this principal would read and add to their context.
	RefusalOtherConversation = "conversation_of_another_principal"
)

// RefusedError is a turn request the worker refuses; Code is one of the refusal codes.
type RefusedError struct {
	Code, Detail string
}

// Error is the code and detail.
func (e *RefusedError) Error() string { return e.Code + ": " + e.Detail }

// ErrRefused is what every *RefusedError matches with errors.Is.
var ErrRefused = errors.New("clients: turn request refused")

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func refused(code, format string, a ...any) error {
	return &RefusedError{Code: code, Detail: fmt.Sprintf(format, a...)}
}

// Verify checks that att proves a registered client asked for request r of workflow
// workflowID, in time for a turn started at startedAt, for a principal its registration
// allows. It returns the client's registration. Errors: a *RefusedError whose Code says
// which check failed (the checks run in the order principal, presence, turn, client,
// signature, time, scope, so a refusal never tells an unauthenticated starter anything about
// the scopes of others).
func (s *Set) Verify(workflowID string, r Request, att *Attestation, startedAt time.Time) (Client, error) {
	switch {
	case !PrincipalPattern.MatchString(r.Principal):
		if r.Principal == "" {
			return Client{}, refused(RefusalNoPrincipal, "the turn names no principal")
		}
		return Client{}, refused(RefusalNoPrincipal, "the principal is not a name (%s)", PrincipalPattern)
	case att == nil || att.Signature == "":
		return Client{}, refused(RefusalUnattested, "the turn request carries no attestation by a registered client")
	}
	r.Seq = att.Seq
	if att.Seq < 1 || TurnID(r.Conversation, att.Seq) != workflowID {
		return Client{}, refused(RefusalMisattested, "the attestation is for turn %d of the conversation, not this workflow", att.Seq)
	}
	e, ok := s.clients[att.Client]
	if !ok {
		return Client{}, refused(RefusalMisattested, "the attesting client is not in the clients file")
	}
	sig, err := decodeSignature(att.Signature)
	if err != nil || !ed25519.Verify(e.key, Message(att.Client, r, att.Time), sig) {
		return Client{}, refused(RefusalMisattested, "the signature of client %s does not verify over this turn's conversation, sequence, principal and message", att.Client)
	}
	if age := startedAt.Sub(att.Time); age > MaxAge || age < -MaxSkew {
		return Client{}, refused(RefusalExpired, "signed at %s, the turn started at %s (an attestation is good from %s before to %s after)",
			att.Time.UTC().Format(time.RFC3339), startedAt.UTC().Format(time.RFC3339), MaxAge, MaxSkew)
	}
	if !e.MaySpeakFor(r.Principal) {
		return Client{}, refused(RefusalOutOfScope, "client %s may not start turns for principal %s", att.Client, r.Principal)
	}
	return e.Client, nil
}

// decodeSignature decodes a base64url (no padding) signature and refuses every other spelling
// of the same bytes (line breaks, non-zero trailing bits): replay checks key on the string, so
// one signature must have one string.
func decodeSignature(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || base64.RawURLEncoding.EncodeToString(b) != s {
		return nil, fmt.Errorf("clients: not a canonical base64url signature")
	}
	return b, nil
}
