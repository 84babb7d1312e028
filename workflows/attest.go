package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/internal/clients"
)

// EndUnattested is the TurnResult.EndReason of a turn whose request did not prove its
// requester (issue 21): no attestation, one that does not verify, one signed outside the
// window, one for a principal its client may not speak for, or no principal. The model was
// never asked and the user's message was not stored; TurnResult.EndDetail carries the
// refusal code (clients.Refusal*) and the audit a turn_refused row.
const EndUnattested = "unattested"

// Attestation is a turn request's proof of its requester (TurnRequest.Attestation; the
// wire form of internal/clients.Attestation): the registered client's name, the turn's
// sequence number in its conversation, the time it signed (the starter's clock) and the
// base64url ed25519 signature over clients.Message.
type Attestation struct {
	Client    string    `json:"client"`
	Seq       int       `json:"seq"`
	Time      time.Time `json:"time"`
	Signature string    `json:"signature"`
}

func (a *Attestation) internal() *clients.Attestation {
	if a == nil {
		return nil
	}
	c := clients.Attestation(*a)
	return &c
}

// SignRequest attests req as turn seq of its conversation with cred at time at (the
// starter's clock): every client that starts turns calls it before ExecuteWorkflow.
func SignRequest(cred clients.Credential, req *TurnRequest, seq int, at time.Time) {
	att := cred.Attest(clients.Request{Conversation: req.Conversation, Seq: seq, Principal: req.Principal,
		Message: req.Message, SystemPrompt: req.SystemPrompt, Terms: RequestTerms(*req)}, at)
	w := Attestation(*att)
	req.Attestation = &w
}

// requesterRefused is round 1's refusal of the turn's request.
type requesterRefused struct{ code, detail string }

func (e *requesterRefused) Error() string { return "requester refused: " + e.code + ": " + e.detail }

func newRequesterRefused(appErr *temporal.ApplicationError) *requesterRefused {
	r := &requesterRefused{code: clients.RefusalMisattested, detail: appErr.Error()}
	if appErr.HasDetails() {
		_ = appErr.Details(&r.code, &r.detail)
	}
	return r
}

// requester is the client credential that started the turn: its attestation passed round 1
// (a turn whose attestation did not never reaches a confirmation).
func (t *turn) requester() string {
	if t.req.Attestation == nil {
		return ""
	}
	return t.req.Attestation.Client
}

// requesterOf is the turn's proven requester for the pending query (nil before round 1 passed,
// which no confirmation precedes).
func (t *turn) requesterOf() *Requester {
	if t.req.Attestation == nil {
		return nil
	}
	return &Requester{Principal: t.req.Principal, Client: t.req.Attestation.Client}
}

// RequestTerms is the digest an attestation signs of a request's terms besides its
// conversation, principal and message: the recorded session, model, infer mode, budgets,
// confirmation expiry, scope, context limit and divergence rule, as the starter sent them
// (before the workflow's defaults). Hex SHA-256 of a length-prefixed encoding; deterministic,
// so the workflow computes it from its input too.
func RequestTerms(req TurnRequest) string {
	var b strings.Builder
	for _, f := range []string{req.Session, req.Model, req.InferMode, strconv.Itoa(req.MaxRounds), strconv.Itoa(req.MaxCalls),
		strconv.FormatInt(int64(req.ConfirmationTTL), 10), strings.Join(req.Scope, "\x00"), strconv.Itoa(req.ContextLimit),
		strconv.FormatBool(req.StopOnDivergence)} {
		b.WriteString(strconv.Itoa(len(f)))
		b.WriteByte(':')
		b.WriteString(f)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
