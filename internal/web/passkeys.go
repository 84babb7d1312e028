package web

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
)

// Passkeys on the approver page (issue 21, item 3). A signed-in approver registers passkeys
// under /passkeys (navigator.credentials.create, relying party Options.Passkeys.RPID, the
// request's origin checked against the configured page origins) and removes them. On a
// confirmation whose capability requires a passkey, the page asks /decide/challenge for the
// decision's MAC (approval.Challenge: the page signs the decision with the approver key as it
// always does), has the approver's authenticator sign it (navigator.credentials.get with that
// MAC as the challenge and the approver's passkeys as allowCredentials) and sends the
// assertion with the decision to /decide; the worker verifies it (activities.checkPasskey).

// ChallengeFunc signs a decision as DecideFunc would and returns its nonce and MAC without
// sending it (approval.Challenge): the challenge of the approver's passkey.
type ChallengeFunc func(ctx context.Context, r approval.Request) (nonce, mac string, err error)

// Challenger is the ChallengeFunc of a page that decides with the approver key and attests
// with its surface credential (Decider's).
func Challenger(st *store.Store, key token.Key, surface approvers.Credential) ChallengeFunc {
	return func(ctx context.Context, r approval.Request) (string, string, error) {
		r.Signer = surface
		row, err := st.GetConfirmation(ctx, r.ConfirmationID)
		if errors.Is(err, store.ErrNotFound) {
			return "", "", &approval.NotPendingError{ConfirmationID: r.ConfirmationID, Detail: "no such confirmation"}
		}
		if err != nil {
			return "", "", err
		}
		return approval.Challenge(key, row, r, time.Now())
	}
}

// passkeyTimeout is how long the browser waits for the authenticator.
const passkeyTimeout = 2 * time.Minute

// waUser is an approver as go-webauthn sees them: a user handle derived from the name (stable
// across page instances, never shown) and their live passkeys.
type waUser struct {
	name  string
	creds []webauthn.Credential
}

func (u waUser) WebAuthnID() []byte {
	h := sha256.Sum256([]byte("airlock approver\x00" + u.name))
	return h[:]
}
func (u waUser) WebAuthnName() string                       { return u.name }
func (u waUser) WebAuthnDisplayName() string                { return u.name }
func (u waUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// relyingParty is the go-webauthn relying party for a ceremony the browser runs on origin
// (the request's Origin header, same-origin checked by ServeHTTP), or an error for an origin
// that is not one of the page's configured origins.
func (s *Server) relyingParty(origin string) (*webauthn.WebAuthn, error) {
	if !s.opt.Passkeys.OriginAllowed(origin) {
		return nil, fmt.Errorf("this page is not served at a configured passkey origin (%s): passkeys work on %s", passkey.EnvOrigins, s.originsText())
	}
	return webauthn.New(&webauthn.Config{RPID: s.opt.Passkeys.RPID, RPDisplayName: "Airlock approvals", RPOrigins: []string{origin},
		AuthenticatorSelection: protocol.AuthenticatorSelection{ResidentKey: protocol.ResidentKeyRequirementPreferred,
			UserVerification: protocol.VerificationRequired},
		Timeouts: webauthn.TimeoutsConfig{Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: passkeyTimeout}}})
}

func (s *Server) originsText() string {
	if len(s.opt.Passkeys.Origins) > 0 {
		return strings.Join(s.opt.Passkeys.Origins, ", ")
	}
	if s.opt.Passkeys.RPID == "localhost" {
		return "http(s)://localhost on any port"
	}
	return "https://" + s.opt.Passkeys.RPID
}

func (s *Server) liveCredentials(ctx context.Context, approver string) ([]store.Passkey, []webauthn.Credential, error) {
	pks, err := s.opt.Store.ListPasskeys(ctx, approver)
	if err != nil {
		return nil, nil, err
	}
	creds := make([]webauthn.Credential, 0, len(pks))
	for _, p := range pks {
		id, err := base64.RawURLEncoding.DecodeString(p.CredentialID)
		if err != nil {
			continue
		}
		creds = append(creds, webauthn.Credential{ID: id, PublicKey: p.PublicKey, Authenticator: webauthn.Authenticator{SignCount: p.SignCount}})
	}
	return pks, creds, nil
}

// passkeyRow is one passkey as the page lists it.
type passkeyRow struct {
	ID, Short, AAGUID string
	Name              shown
	CreatedAt         time.Time
	LastUsedAt        *time.Time
	SignCount         uint32
}

type passkeysData struct {
	RPID     string
	Passkeys []passkeyRow
	Message  string
	OK       bool
}

// passkeyMessages are the fixed notices /passkeys shows after a redirect (?m=…): never text
// from the request.
var passkeyMessages = map[string]string{
	"registered": "Passkey registered: decisions that require a passkey can now be made with it.",
	"removed":    "Passkey removed: it decides nothing from now on.",
}

func (s *Server) passkeysPage(w http.ResponseWriter, r *http.Request) {
	s.renderPasskeys(w, r, http.StatusOK, passkeyMessages[r.URL.Query().Get("m")], true)
}

func (s *Server) renderPasskeys(w http.ResponseWriter, r *http.Request, status int, msg string, ok bool) {
	pks, _, err := s.liveCredentials(r.Context(), current(r).approver)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not read your passkeys", err)
		return
	}
	data := passkeysData{RPID: s.opt.Passkeys.RPID, Message: msg, OK: ok}
	for _, p := range pks {
		short := p.CredentialID
		if len(short) > 16 {
			short = short[:16] + "…"
		}
		data.Passkeys = append(data.Passkeys, passkeyRow{ID: p.CredentialID, Short: short, AAGUID: p.AAGUID, Name: show(p.Name, fieldLimit),
			CreatedAt: p.CreatedAt, LastUsedAt: p.LastUsedAt, SignCount: p.SignCount})
	}
	s.render(w, r, status, "passkeys", "Passkeys", data)
}

// writeJSON answers a script's request.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type jsonError struct {
	Error string `json:"error"`
}

// passkeyBegin starts a registration ceremony: the creation options for the browser, and the
// ceremony's id (its session data waits in the store, store.SavePasskeyChallenge).
//
// The approver types their password again: a passkey decides as them from then on, so a
// session alone (a cookie left in a shared browser) must not add one. Failures count towards
// the sign-in limit.
func (s *Server) passkeyBegin(w http.ResponseWriter, r *http.Request) {
	me := current(r)
	rp, err := s.relyingParty(r.Header.Get("Origin"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jsonError{err.Error()})
		return
	}
	keys := []string{userKey(me.approver), ipKey(clientIP(r))}
	at, blocked, wait := s.limiter.Attempt(keys...)
	if blocked {
		writeJSON(w, http.StatusTooManyRequests, jsonError{fmt.Sprintf("Too many wrong passwords: try again in %d s.", int(wait.Seconds())+1)})
		return
	}
	set, err := s.opt.Approvers()
	if err != nil {
		s.limiter.Forgive(at, keys...)
		s.opt.Log.Error("web: read the approvers file", "err", err)
		writeJSON(w, http.StatusInternalServerError, jsonError{"the approvers file could not be read"})
		return
	}
	password := r.PostForm.Get("password")
	if len(password) > maxPasswordLen {
		password = ""
	}
	if who, err := set.Authenticate(me.approver, password); err != nil || who != me.approver {
		s.opt.Log.Warn("web: passkey registration with a wrong password", "approver", me.approver)
		writeJSON(w, http.StatusUnauthorized, jsonError{"Wrong password: type your approver page password to register a passkey."})
		return
	}
	s.limiter.Forgive(at, keys...)
	pks, creds, err := s.liveCredentials(r.Context(), me.approver)
	if err != nil {
		s.opt.Log.Error("web: read passkeys", "err", err)
		writeJSON(w, http.StatusInternalServerError, jsonError{"could not read your passkeys"})
		return
	}
	if len(pks) >= store.MaxPasskeysPerApprover {
		writeJSON(w, http.StatusBadRequest, jsonError{store.ErrTooManyPasskeys.Error()})
		return
	}
	u := waUser{name: me.approver, creds: creds}
	opts, sess, err := rp.BeginRegistration(u, webauthn.WithExclusions(webauthn.Credentials(creds).CredentialDescriptors()))
	if err != nil {
		s.opt.Log.Error("web: begin passkey registration", "err", err)
		writeJSON(w, http.StatusInternalServerError, jsonError{"could not start the registration"})
		return
	}
	raw, err := json.Marshal(sess)
	if err == nil {
		var id string
		if id, err = randomID(); err == nil {
			// The store keys the ceremony by its id's hash (as it does sessions): a reader of the
			// database who also stole the approver's cookie cannot finish a registration the
			// approver began (with their password) by naming it with a credential of their own.
			if err = s.opt.Store.SavePasskeyChallenge(r.Context(), hashID(id), me.approver, raw, s.opt.Now().Add(store.PasskeyChallengeTTL)); err == nil {
				writeJSON(w, http.StatusOK, struct {
					Ceremony string `json:"ceremony"`
					*protocol.CredentialCreation
				}{id, opts})
				return
			}
		}
	}
	s.opt.Log.Error("web: save passkey registration", "err", err)
	writeJSON(w, http.StatusInternalServerError, jsonError{"could not start the registration"})
}

// passkeyFinish verifies the browser's new credential against the ceremony's session data and
// registers it (store.AddPasskey), then shows the list.
func (s *Server) passkeyFinish(w http.ResponseWriter, r *http.Request) {
	me := current(r)
	f := r.PostForm
	refuse := func(msg string, err error) {
		if err != nil {
			s.opt.Log.Warn("web: passkey registration refused", "approver", me.approver, "err", err)
		}
		s.renderPasskeys(w, r, http.StatusBadRequest, msg, false)
	}
	rp, err := s.relyingParty(r.Header.Get("Origin"))
	if err != nil {
		refuse(err.Error(), nil)
		return
	}
	raw, err := s.opt.Store.TakePasskeyChallenge(r.Context(), hashID(f.Get("ceremony")), me.approver, s.opt.Now())
	if err != nil {
		refuse("The registration expired or was already used: start it again.", err)
		return
	}
	var sess webauthn.SessionData
	if err := json.Unmarshal(raw, &sess); err != nil {
		refuse("The registration could not be read: start it again.", err)
		return
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes([]byte(f.Get("credential")))
	if err != nil {
		refuse("The browser's answer is not a passkey registration: nothing was registered.", err)
		return
	}
	_, creds, err := s.liveCredentials(r.Context(), me.approver)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not read your passkeys", err)
		return
	}
	cred, err := rp.CreateCredential(waUser{name: me.approver, creds: creds}, sess, parsed)
	if err != nil {
		refuse("The passkey did not verify (origin, relying party, user verification or signature): nothing was registered.", err)
		return
	}
	name := strings.TrimSpace(f.Get("name"))
	if len([]rune(name)) > 64 {
		name = string([]rune(name)[:64])
	}
	err = s.opt.Store.AddPasskey(r.Context(), store.Passkey{CredentialID: base64.RawURLEncoding.EncodeToString(cred.ID), Approver: me.approver,
		PublicKey: cred.PublicKey, SignCount: cred.Authenticator.SignCount, AAGUID: hex.EncodeToString(cred.Authenticator.AAGUID),
		Name: name, CreatedAt: s.opt.Now()})
	switch {
	case errors.Is(err, store.ErrPasskeyExists):
		refuse("This passkey is already registered (a removed passkey cannot be registered again).", nil)
		return
	case errors.Is(err, store.ErrTooManyPasskeys):
		refuse(err.Error(), nil)
		return
	case err != nil:
		s.fail(w, r, http.StatusInternalServerError, "could not store the passkey", err)
		return
	}
	s.opt.Log.Info("web: passkey registered", "approver", me.approver, "credential", base64.RawURLEncoding.EncodeToString(cred.ID))
	http.Redirect(w, r, "/passkeys?m=registered", http.StatusSeeOther)
}

func (s *Server) passkeyRemove(w http.ResponseWriter, r *http.Request) {
	me := current(r)
	id := r.PostForm.Get("credential_id")
	if err := s.opt.Store.RemovePasskey(r.Context(), me.approver, id, s.opt.Now()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.renderPasskeys(w, r, http.StatusNotFound, "You have no such passkey.", false)
			return
		}
		s.fail(w, r, http.StatusInternalServerError, "could not remove the passkey", err)
		return
	}
	s.opt.Log.Info("web: passkey removed", "approver", me.approver, "credential", id)
	http.Redirect(w, r, "/passkeys?m=removed", http.StatusSeeOther)
}

// challengeAnswer is what /decide/challenge returns: the decision's nonce (sent back with the
// assertion) and the request options for navigator.credentials.get.
type challengeAnswer struct {
	Nonce     string                                     `json:"nonce"`
	PublicKey protocol.PublicKeyCredentialRequestOptions `json:"publicKey"`
}

// decideChallenge signs the decision the form describes (approval.Challenge) and returns its
// MAC as the challenge for the approver's passkeys.
func (s *Server) decideChallenge(w http.ResponseWriter, r *http.Request) {
	me := current(r)
	if s.opt.Challenge == nil {
		writeJSON(w, http.StatusNotImplemented, jsonError{"this page cannot make passkey decisions"})
		return
	}
	req, row, text, err := s.decisionRequest(r)
	switch {
	case err != nil:
		writeJSON(w, http.StatusNotFound, jsonError{"no such confirmation"})
		return
	case text != "":
		writeJSON(w, http.StatusBadRequest, jsonError{text})
		return
	case !s.opt.Passkeys.OriginAllowed(r.Header.Get("Origin")):
		writeJSON(w, http.StatusBadRequest, jsonError{"this page is not served at a configured passkey origin: passkeys work on " + s.originsText()})
		return
	}
	_, creds, err := s.liveCredentials(r.Context(), me.approver)
	if err != nil {
		s.opt.Log.Error("web: read passkeys", "err", err)
		writeJSON(w, http.StatusInternalServerError, jsonError{"could not read your passkeys"})
		return
	}
	if len(creds) == 0 {
		writeJSON(w, http.StatusBadRequest, jsonError{"You have no passkey: register one under Passkeys first."})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opt.DecideTimeout)
	defer cancel()
	nonce, mac, err := s.opt.Challenge(ctx, req)
	if err != nil {
		_, text := verdictText(row.ID, req, err)
		writeJSON(w, http.StatusConflict, jsonError{text})
		return
	}
	challenge, err := passkey.Challenge(mac)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, jsonError{err.Error()})
		return
	}
	allow := webauthn.Credentials(creds).CredentialDescriptors()
	writeJSON(w, http.StatusOK, challengeAnswer{Nonce: nonce, PublicKey: protocol.PublicKeyCredentialRequestOptions{
		Challenge: challenge, Timeout: int(passkeyTimeout / time.Millisecond), RelyingPartyID: s.opt.Passkeys.RPID,
		AllowedCredentials: allow, UserVerification: protocol.VerificationRequired}})
}
