package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/workflows"
)

// SlackInteractions configures deciding from Slack's Approve and Deny buttons (issue 23, item
// 2): POST /slack/interactions, Slack's interactivity request URL. Nothing is decided unless
// Slack's request signature verifies under SigningSecret (v0 HMAC-SHA256 of "v0:ts:body", ts
// within 5 minutes, each signed request once), the Slack user maps to a registered approver,
// the capability may be decided from Slack, and the button's argument digest is the
// confirmation's (a stale message never approves changed arguments).
type SlackInteractions struct {
	// SigningSecret is the Slack app's signing secret.
	SigningSecret []byte
	// Users maps Slack user ids (U…) to approver names of the approvers file.
	Users map[string]string
	// Allows reports whether confirmations of capability id may be decided from Slack (the
	// notify file's routes with slack_decide). A capability that needs a passkey must never be.
	Allows func(capability string) bool
}

// Slack interaction action ids (the buttons internal/notify/slack renders).
const (
	SlackActionApprove = "airlock_approve"
	SlackActionDeny    = "airlock_deny"
)

// slackWindow is how old a signed Slack request may be (Slack's own recommendation).
const slackWindow = 5 * time.Minute

// slackReplays remembers the signatures of accepted Slack requests for slackWindow.
type slackReplays struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// first records sig at now and reports whether it was not seen within the window.
func (r *slackReplays) first(sig string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]time.Time{}
	}
	for k, at := range r.seen {
		if now.Sub(at) > 2*slackWindow {
			delete(r.seen, k)
		}
	}
	if _, ok := r.seen[sig]; ok {
		return false
	}
	r.seen[sig] = now
	return true
}

// SlackSignature is the X-Slack-Signature of body sent at ts under secret.
func SlackSignature(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// slackPayload is the part of a block_actions payload Airlock reads.
type slackPayload struct {
	Type string `json:"type"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Actions []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// slackAnswer writes Slack's ephemeral reply (plain text: Slack shows it to the clicking user).
func slackAnswer(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"response_type": "ephemeral", "replace_original": false,
		"text": strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(text)})
}

// slackInteraction decides a confirmation from a Slack button, after every check above.
func (s *Server) slackInteraction(w http.ResponseWriter, r *http.Request) {
	cfg := s.opt.Slack
	if cfg == nil || len(cfg.SigningSecret) == 0 {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	now := s.opt.Now()
	ts, sig := r.Header.Get("X-Slack-Request-Timestamp"), r.Header.Get("X-Slack-Signature")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > slackWindow ||
		!hmac.Equal([]byte(SlackSignature(cfg.SigningSecret, ts, body)), []byte(sig)) {
		s.opt.Log.Warn("web: refused a Slack interaction with a bad or old signature", "client", clientIP(r))
		http.Error(w, "refused: bad or expired Slack signature", http.StatusUnauthorized)
		return
	}
	if !s.slackSeen.first(sig, now) {
		s.opt.Log.Warn("web: refused a replayed Slack interaction", "client", clientIP(r))
		http.Error(w, "refused: this Slack request was already handled", http.StatusConflict)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, "refused: not a form", http.StatusBadRequest)
		return
	}
	var p slackPayload
	if err := json.Unmarshal([]byte(form.Get("payload")), &p); err != nil || p.Type != "block_actions" || len(p.Actions) != 1 {
		http.Error(w, "refused: not one Slack block action", http.StatusBadRequest)
		return
	}
	act := p.Actions[0]
	decision := map[string]string{SlackActionApprove: workflows.DecisionApprove, SlackActionDeny: workflows.DecisionDeny}[act.ActionID]
	id, digest, ok := strings.Cut(act.Value, "|")
	if decision == "" || !ok || id == "" || digest == "" {
		slackAnswer(w, http.StatusBadRequest, "Not an Airlock decision button: nothing was decided.")
		return
	}
	approver, mapped := cfg.Users[p.User.ID]
	set, aerr := s.opt.Approvers()
	if !mapped || aerr != nil || !set.Has(approver) {
		s.opt.Log.Warn("web: refused a Slack decision from an unmapped user", "slack_user", p.User.ID)
		slackAnswer(w, http.StatusOK, "Your Slack user is not mapped to a registered approver: nothing was decided.")
		return
	}
	row, err := s.opt.Store.GetConfirmation(r.Context(), id)
	if err != nil {
		slackAnswer(w, http.StatusOK, "No such confirmation: nothing was decided.")
		return
	}
	if cfg.Allows == nil || !cfg.Allows(row.CapabilityID) {
		slackAnswer(w, http.StatusOK, "This capability is decided on the approver page only: open the card.")
		return
	}
	if !hmac.Equal([]byte(digest), []byte(row.ArgsDigest)) {
		slackAnswer(w, http.StatusOK, "This message shows arguments that are no longer the ones waiting: nothing was decided. Open the card.")
		return
	}
	req := approval.Request{ConfirmationID: id, Decision: decision, Approver: approver, ArgsDigest: digest}
	if decision == workflows.DecisionDeny {
		req.Reason = "denied from Slack"
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opt.DecideTimeout)
	defer cancel()
	err = s.opt.Decide(ctx, req)
	_, text := verdictText(id, req, err)
	if err != nil {
		s.opt.Log.Info("web: Slack decision not accepted", "confirmation", id, "approver", approver, "err", err)
		slackAnswer(w, http.StatusOK, text) // Slack shows the text: the refusal is in it
		return
	}
	slackAnswer(w, http.StatusOK, fmt.Sprintf("%s (as %s)", text, approver))
}
