package token

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Decision is what an approver decides about one confirmation, as bound by a decision MAC
// (DESIGN "Tokens": the plaintext token never travels through Temporal history or the
// database; a decision carries a MAC bound to the token, the decision, the authenticated
// approver, the argument digest and a nonce).
type Decision struct {
	// ConfirmationID names the confirmation ("cf-…").
	ConfirmationID string
	// Decision is "approve", "deny" or "edit" (any other text is bound too, and refused later).
	Decision string
	// Approver is the approver identity the surface authenticated.
	Approver string
	// Reason is the deny reason the model receives (bound so a copy cannot carry another).
	Reason string
	// ArgsDigest is the hex SHA-256 of the canonical arguments the approver was shown.
	ArgsDigest string
	// Nonce is fresh per decision (NewNonce): the consumer records it, so one MAC is
	// accepted at most once.
	Nonce string
	// EditedDigest is, for an edit, the hex SHA-256 of the canonical arguments the approver
	// wrote (canonical.Digest), so a MAC over an edit authorizes exactly those arguments; ""
	// for approve and deny.
	EditedDigest string
	// Repeat is, for an approval that also grants the next identical calls (issue 37, item 4),
	// "N/Tm": N later calls within T minutes (RepeatTerms); "" for none. Bound only when set,
	// so a decision without a grant has the MAC it always had.
	Repeat string
}

// RepeatTerms is the Decision.Repeat text of a repeat grant of n calls for minutes minutes
// ("" when n is 0: no grant).
func RepeatTerms(n, minutes int) string {
	if n == 0 && minutes == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%dm", n, minutes)
}

// NonceBytes is the entropy of a decision nonce: 128 bits.
const NonceBytes = 16

// ErrMAC reports a decision MAC that does not verify under the confirmation's token.
var ErrMAC = errors.New("token: decision MAC does not verify")

// NewNonce returns a fresh random nonce (base64url, no padding) from crypto/rand.
func NewNonce() (string, error) {
	b := make([]byte, NonceBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decisionMACLabel separates this use of the token as an HMAC key from any other.
const decisionMACLabel = "airlock decision v1"

// message is the MAC input: the label and each field, length-prefixed so no two distinct
// decisions share an encoding (a field cannot bleed into the next).
func (d Decision) message() []byte {
	var b strings.Builder
	for _, f := range []string{decisionMACLabel, d.ConfirmationID, d.Decision, d.Approver, d.Reason, d.ArgsDigest, d.Nonce, d.EditedDigest} {
		fmt.Fprintf(&b, "%d:%s", len(f), f)
	}
	if d.Repeat != "" {
		fmt.Fprintf(&b, "%d:%s", len("repeat:"+d.Repeat), "repeat:"+d.Repeat)
	}
	return []byte(b.String())
}

// SignDecision returns the decision MAC, base64url HMAC-SHA256 keyed by the plaintext token
// over every field of d. Only a holder of the token (an approver surface that opened the
// sealed copy with the approver key, or the worker) can compute it; the MAC reveals nothing
// about the token and is useless for any other decision, approver, reason, arguments,
// edited arguments, confirmation or nonce.
func SignDecision(plain string, d Decision) string {
	m := hmac.New(sha256.New, []byte(plain))
	m.Write(d.message())
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// VerifyDecision checks mac against d under the plaintext token, in constant time.
// Errors: ErrMAC.
func VerifyDecision(plain string, d Decision, mac string) error {
	want := SignDecision(plain, d)
	if !hmac.Equal([]byte(want), []byte(mac)) {
		return ErrMAC
	}
	return nil
}

// SealAAD is the additional data a sealed token of confirmation id, generation gen, is bound
// to: the id alone for the first token (as sealed before reissue existed), "id/gen" after.
// A sealed token moved to another confirmation or generation does not open.
func SealAAD(id string, gen int) string {
	if gen == 0 {
		return id
	}
	return fmt.Sprintf("%s/%d", id, gen)
}
