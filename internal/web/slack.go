package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	// ResponseURLAllowed reports whether a payload's response_url may be posted to (nil: an
	// https URL on hooks.slack.com or hooks.slack-gov.com, where Slack's response URLs live;
	// anything else is never contacted, so a request signed with a leaked secret cannot make
	// the page post to an address of its choosing).
	ResponseURLAllowed func(string) bool
	// AckWithin is how long a click waits for its decision before Slack is answered at once
	// and the verdict follows through the response_url (default 2 s: Slack shows an error to
	// the clicking user when no answer comes within 3 s).
	AckWithin time.Duration
	// Client posts to response URLs (nil: a client with a 10 s timeout that follows no
	// redirect).
	Client *http.Client
}

// slackResponseURL is the default ResponseURLAllowed.
func slackResponseURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https" && u.User == nil && u.Port() == "" &&
		(u.Host == "hooks.slack.com" || u.Host == "hooks.slack-gov.com")
}

// slackAckWithin is the default SlackInteractions.AckWithin.
const slackAckWithin = 2 * time.Second

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
	// ResponseURL is where Slack takes messages in answer to this click (for block_actions,
	// the only way the clicking user sees one: the body of the HTTP answer is not shown).
	ResponseURL string `json:"response_url"`
}

// slackMessage is Slack's ephemeral reply to the clicking user (plain text, Slack's three
// control characters escaped so the text stays inert).
func slackMessage(text string) map[string]any {
	return map[string]any{"response_type": "ephemeral", "replace_original": false,
		"text": strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(text)}
}

// slackAnswer writes the reply as the HTTP answer (legacy interactive messages show it; a
// block_actions answer is only Slack's acknowledgement).
func slackAnswer(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(slackMessage(text))
}

// slackReply answers a click both ways: the HTTP answer, and a message posted to the
// payload's response_url (in the background) when cfg allows that URL.
func (s *Server) slackReply(w http.ResponseWriter, p slackPayload, status int, text string) {
	slackAnswer(w, status, text)
	go s.slackRespond(p, text)
}

// slackRespond posts text to p's response_url when the URL is allowed (callers run it in the
// background); a failure is logged (with the URL's host only: the URL itself is a credential).
func (s *Server) slackRespond(p slackPayload, text string) {
	cfg := s.opt.Slack
	allowed := cfg.ResponseURLAllowed
	if allowed == nil {
		allowed = slackResponseURL
	}
	if p.ResponseURL == "" || !allowed(p.ResponseURL) {
		return
	}
	client := cfg.Client
	if client == nil {
		// No redirects: the allowed host is the only one ever contacted.
		client = &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	body, _ := json.Marshal(slackMessage(text))
	host := ""
	if u, err := url.Parse(p.ResponseURL); err == nil {
		host = u.Host
	}
	resp, err := client.Post(p.ResponseURL, "application/json", bytes.NewReader(body))
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
	}
	if err != nil {
		s.opt.Log.Warn("web: could not answer a Slack click through its response URL", "host", host, "err", redactURLError(err))
	}
}

// redactURLError drops the URL from a *url.Error (a Slack response URL is a credential).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
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
		s.slackReply(w, p, http.StatusOK, "Your Slack user is not mapped to a registered approver: nothing was decided.")
		return
	}
	row, err := s.opt.Store.GetConfirmation(r.Context(), id)
	if err != nil {
		s.slackReply(w, p, http.StatusOK, "No such confirmation: nothing was decided.")
		return
	}
	if cfg.Allows == nil || !cfg.Allows(row.CapabilityID) {
		s.slackReply(w, p, http.StatusOK, "This capability is decided on the approver page only: open the card.")
		return
	}
	if !hmac.Equal([]byte(digest), []byte(row.ArgsDigest)) {
		s.slackReply(w, p, http.StatusOK, "This message shows arguments that are no longer the ones waiting: nothing was decided. Open the card.")
		return
	}
	req := approval.Request{ConfirmationID: id, Decision: decision, Approver: approver, ArgsDigest: digest}
	if decision == workflows.DecisionDeny {
		req.Reason = "denied from Slack"
	}
	// The decision outlives the request: Slack must be answered within 3 s, and a decision
	// waits for the turn's verdict. What does not come within AckWithin follows through the
	// response_url.
	verdict := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.opt.DecideTimeout)
		defer cancel()
		err := s.opt.Decide(ctx, req)
		_, text := verdictText(id, req, err)
		if err != nil {
			s.opt.Log.Info("web: Slack decision not accepted", "confirmation", id, "approver", approver, "err", err)
			verdict <- text // the refusal is in the text
			return
		}
		verdict <- fmt.Sprintf("%s (as %s)", text, approver)
	}()
	wait := cfg.AckWithin
	if wait <= 0 {
		wait = slackAckWithin
	}
	select {
	case text := <-verdict:
		s.slackReply(w, p, http.StatusOK, text)
	case <-time.After(wait):
		slackAnswer(w, http.StatusOK, "Deciding: the verdict follows here.")
		go func() { s.slackRespond(p, <-verdict) }()
	}
}
