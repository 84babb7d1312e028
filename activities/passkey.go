package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/store"
)

// Passkey decisions (issue 21, item 3). A capability whose policy says "approval/passkey" is
// decided only with a WebAuthn assertion, made by one of the deciding approver's registered
// and not removed passkeys, whose challenge is the decision's MAC: the approver's
// authenticator signed exactly that confirmation, decision, approver, reason, argument digest
// and nonce. ConsumeConfirmation checks it right after the approver's attestation, before any
// rule compares the approver; a refusal goes the refused-decision way (audited, the token
// reissued).

// Refusal codes of passkey decisions.
const (
	// PasskeyRequired: the capability requires a passkey and the decision carries no
	// assertion (the CLI, the client package, Slack, or a page that did not ask for one).
	PasskeyRequired = "passkey_required"
	// PasskeyUnknown: the assertion names no passkey registered to the deciding approver
	// (another approver's, a removed one, or none at all).
	PasskeyUnknown = "passkey_unknown"
	// PasskeyInvalid: the assertion does not verify: it signs another challenge (another
	// decision, other arguments, an earlier token), comes from another origin or relying
	// party, lacks user verification, or its signature is wrong.
	PasskeyInvalid = "passkey_invalid"
	// PasskeyReplayed: the assertion's signature counter did not increase over the last one
	// accepted (a replayed assertion or a cloned authenticator).
	PasskeyReplayed = "passkey_replayed"
)

// passkeyRequired reports whether a decision on row needs the approver's passkey: its
// capability's policy said "approval/passkey" when the confirmation was issued (what every
// surface showed the approver), or says so now. Either is enough, so a worker whose policy
// lost the rule (a rollback, a worker of the previous deploy) still refuses a decision
// without a passkey on a confirmation issued under it, a denial included (an approval or an
// edit would also be refused registry_changed).
func (a *Activities) passkeyRequired(row store.Confirmation, in ConsumeInput) bool {
	return row.PasskeyRequired || a.approvalPolicy(in).Passkey
}

// checkPasskey returns "" when a decision on row needs no passkey (passkeyRequired) or in
// carries a valid assertion over its MAC by one of in.Approver's live passkeys, whose new
// signature counter it has then stored (atomically: a second use of the same counter fails
// there); else a refusal code and a detail. Store failures are errors (the presentation is
// retried, and a retry of this presentation is accepted again: store.UsePasskey keeps the
// nonce that raised the counter).
func (a *Activities) checkPasskey(ctx context.Context, row store.Confirmation, in ConsumeInput, now time.Time) (code, detail string, err error) {
	if !a.passkeyRequired(row, in) {
		return "", "", nil
	}
	key := keyOf(in.CapabilityID, in.Version)
	if len(in.Passkey) == 0 {
		return PasskeyRequired, fmt.Sprintf("%s is decided only with the approver's passkey: decide it on the approver page (airlock web) with a passkey registered under Passkeys", key), nil
	}
	as, perr := passkey.Parse(in.Passkey)
	if perr != nil {
		return PasskeyInvalid, perr.Error(), nil
	}
	cred, err := a.Store.GetPasskey(ctx, as.CredentialID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return PasskeyUnknown, fmt.Sprintf("the assertion's passkey is not registered to %s", in.Approver), nil
	case err != nil:
		return "", "", fmt.Errorf("look up passkey: %w", err)
	case cred.Approver != in.Approver:
		return PasskeyUnknown, fmt.Sprintf("the assertion's passkey is not registered to %s", in.Approver), nil
	case cred.RemovedAt != nil:
		return PasskeyUnknown, fmt.Sprintf("the assertion's passkey was removed from %s's passkeys at %s", in.Approver, cred.RemovedAt.Format(time.RFC3339)), nil
	}
	challenge, cerr := passkey.Challenge(in.MAC)
	if cerr != nil {
		return PasskeyInvalid, cerr.Error(), nil
	}
	v, verr := passkey.Verify(a.passkeys(), as, passkey.Credential{PublicKey: cred.PublicKey, SignCount: cred.SignCount}, challenge)
	if errors.Is(verr, passkey.ErrCounter) {
		// Judged again on a retry of this very presentation: its counter was stored with
		// this nonce, which UsePasskey accepts once more.
		if a.Store.UsePasskey(ctx, in.Approver, as.CredentialID, v.SignCount, in.Nonce, now) == nil {
			return "", "", nil
		}
		return PasskeyReplayed, verr.Error(), nil
	}
	if verr != nil {
		return PasskeyInvalid, verr.Error(), nil
	}
	if err := a.Store.UsePasskey(ctx, in.Approver, as.CredentialID, v.SignCount, in.Nonce, now); errors.Is(err, store.ErrPasskeyCounter) {
		return PasskeyReplayed, "the passkey's signature counter was used by another decision at the same moment", nil
	} else if err != nil {
		return "", "", fmt.Errorf("record passkey use: %w", err)
	}
	return "", "", nil
}

// passkeys is the relying party assertions are verified against (Activities.Passkeys;
// "localhost" when unset).
func (a *Activities) passkeys() passkey.Config {
	if a.Passkeys.RPID == "" {
		return passkey.Config{RPID: "localhost"}
	}
	return a.Passkeys
}
