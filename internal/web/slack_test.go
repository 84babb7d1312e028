package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// TestSlackInteractionsDecideOnlyWhenEverythingChecks: a Slack Approve click signed by Slack,
// from a mapped user, for a capability Slack may decide, with the digest the message showed,
// decides as that approver with that digest bound; a bad signature, an old timestamp, a
// replayed request, an unknown user, a removed approver, a stale digest and a capability
// decided on the page only decide nothing.
func TestSlackInteractionsDecideOnlyWhenEverythingChecks(t *testing.T) {
	e := newEnv(t)
	e.confirmation("cf-sl1", "turn/s/1", "pay", `{"amount":5}`, time.Hour)
	e.confirmation("cf-sl2", "turn/s/2", "pay", `{"amount":6}`, time.Hour)
	secret := []byte("slack-signing-secret")
	s, err := New(Options{Store: e.st, Approvers: func() (Authenticator, error) { return users{"alice": "correct horse"}, nil },
		Decide: e.rec.decide, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Slack: &SlackInteractions{SigningSecret: secret, Users: map[string]string{"UALICE": "alice", "UGONE": "mallory"},
			Allows: func(c string) bool { return c == "test.cap" }}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(user, action, value string, at time.Time, sign func(ts string, body []byte) string, raw []byte) (int, string) {
		body := raw
		if body == nil {
			body = slackPayloadBody(user, action, value, "")
		}
		ts := strconv.FormatInt(at.Unix(), 10)
		return postSlack(t, srv.URL, body, ts, sign(ts, body))
	}
	good := func(ts string, body []byte) string { return SlackSignature(secret, ts, body) }
	now := time.Now()
	decided := func() int { e.rec.mu.Lock(); defer e.rec.mu.Unlock(); return len(e.rec.reqs) }
	for _, tc := range []struct {
		name, user, action, value string
		at                        time.Time
		sign                      func(string, []byte) string
		status                    int
		text                      string
	}{
		{"bad signature", "UALICE", SlackActionApprove, "cf-sl1|sha256:cf-sl1", now, func(ts string, b []byte) string { return SlackSignature([]byte("other"), ts, b) }, 401, "bad or expired"},
		{"old timestamp", "UALICE", SlackActionApprove, "cf-sl1|sha256:cf-sl1", now.Add(-10 * time.Minute), good, 401, "bad or expired"},
		{"unknown user", "UEVE", SlackActionApprove, "cf-sl1|sha256:cf-sl1", now, good, 200, "not mapped"},
		{"approver removed", "UGONE", SlackActionApprove, "cf-sl1|sha256:cf-sl1", now.Add(time.Second), good, 200, "not mapped"},
		{"stale digest", "UALICE", SlackActionApprove, "cf-sl1|sha256:old", now.Add(2 * time.Second), good, 200, "no longer the ones waiting"},
		{"unknown button", "UALICE", "other", "cf-sl1|sha256:cf-sl1", now.Add(3 * time.Second), good, 400, "Not an Airlock"},
	} {
		status, body := post(tc.user, tc.action, tc.value, tc.at, tc.sign, nil)
		if status != tc.status || !strings.Contains(body, tc.text) || decided() != 0 {
			t.Errorf("%s: %d %q, %d decided", tc.name, status, body, decided())
		}
	}
	status, body := post("UALICE", SlackActionApprove, "cf-sl1|sha256:cf-sl1", now.Add(4*time.Second), good, nil)
	if status != 200 || decided() != 1 {
		t.Fatalf("a good click: %d %s (%d decided)", status, body, decided())
	}
	r := e.rec.reqs[0]
	if r.ConfirmationID != "cf-sl1" || r.Decision != workflows.DecisionApprove || r.Approver != "alice" || r.ArgsDigest != "sha256:cf-sl1" {
		t.Fatalf("decision sent: %+v", r)
	}
	// The same signed request again: a replay.
	p, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]string{"id": "UALICE"},
		"actions": []map[string]string{{"action_id": SlackActionDeny, "value": "cf-sl2|sha256:cf-sl2"}}})
	raw := []byte(url.Values{"payload": {string(p)}}.Encode())
	at := now.Add(5 * time.Second)
	if status, body := post("", "", "", at, good, raw); status != 200 || decided() != 2 || e.rec.reqs[1].Reason == "" {
		t.Fatalf("a deny click: %d %s", status, body)
	}
	if status, body := post("", "", "", at, good, raw); status != http.StatusConflict || decided() != 2 {
		t.Fatalf("replayed: %d %s (%d decided)", status, body, decided())
	}
	// A capability decided on the page only.
	if _, err := e.st.CreateConfirmation(context.Background(), store.Confirmation{ID: "cf-sl3", TokenHash: []byte("h-sl3"), WorkflowID: "turn/s/3",
		RunID: "r", Seq: 1, CallID: "c3", CapabilityID: "other.cap", Version: 1, ArgsDigest: "sha256:cf-sl3", Arguments: json.RawMessage(`{}`),
		Display: "x", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if status, body := post("UALICE", SlackActionApprove, "cf-sl3|sha256:cf-sl3", now.Add(6*time.Second), good, nil); status != 200 || !strings.Contains(body, "approver page only") || decided() != 2 {
		t.Fatalf("not allowed: %d %s", status, body)
	}
}

// TestSlackAnswersThroughTheResponseURL: Slack shows nothing of the HTTP answer to a
// block_actions click, so every answer also goes to the payload's response_url (a local
// server here). A decision slower than AckWithin is acknowledged at once and its verdict
// follows there; a response_url that is not Slack's is never contacted.
func TestSlackAnswersThroughTheResponseURL(t *testing.T) {
	e := newEnv(t)
	e.confirmation("cf-ru1", "turn/r/1", "pay", `{"amount":5}`, time.Hour)
	e.confirmation("cf-ru2", "turn/r/2", "pay", `{"amount":6}`, time.Hour)
	got := make(chan string, 8)
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Type string `json:"response_type"`
			Text string `json:"text"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || r.URL.Path != "/actions/T1/1/secret" || m.Type != "ephemeral" {
			t.Errorf("response URL got %s %v %+v", r.URL.Path, err, m)
		}
		got <- m.Text
	}))
	defer slack.Close()
	var contacted atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { contacted.Add(1) }))
	defer elsewhere.Close()
	slow := make(chan struct{})
	decide := func(ctx context.Context, req approval.Request) error {
		if req.ConfirmationID == "cf-ru2" {
			select {
			case <-slow:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return e.rec.decide(ctx, req)
	}
	secret := []byte("slack-signing-secret")
	s, err := New(Options{Store: e.st, Approvers: func() (Authenticator, error) { return users{"alice": "correct horse"}, nil },
		Decide: decide, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Slack: &SlackInteractions{SigningSecret: secret, Users: map[string]string{"UALICE": "alice"},
			Allows: func(c string) bool { return c == "test.cap" }, AckWithin: 50 * time.Millisecond,
			ResponseURLAllowed: func(u string) bool { return strings.HasPrefix(u, slack.URL+"/") }}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	at := time.Now()
	click := func(value, responseURL string) (int, string) {
		at = at.Add(time.Second) // a fresh signature each time, never a replay
		body := slackPayloadBody("UALICE", SlackActionApprove, value, responseURL)
		ts := strconv.FormatInt(at.Unix(), 10)
		return postSlack(t, srv.URL, body, ts, SlackSignature(secret, ts, body))
	}
	next := func(what string) string {
		t.Helper()
		select {
		case m := <-got:
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing posted to the response URL", what)
			return ""
		}
	}
	hook := slack.URL + "/actions/T1/1/secret"

	// A refusal reaches the user through the response URL too.
	if status, _ := click("cf-ru1|sha256:old", hook); status != 200 {
		t.Fatalf("stale click: %d", status)
	}
	if m := next("stale digest"); !strings.Contains(m, "no longer the ones waiting") {
		t.Fatalf("stale digest posted %q", m)
	}
	// A quick decision: answered in the HTTP answer and posted.
	if status, body := click("cf-ru1|sha256:cf-ru1", hook); status != 200 || !strings.Contains(body, "(as alice)") {
		t.Fatalf("quick decision: %d %s", status, body)
	}
	if m := next("quick decision"); !strings.Contains(m, "(as alice)") {
		t.Fatalf("quick decision posted %q", m)
	}
	// A slow one: acknowledged within AckWithin, its verdict posted once it comes.
	start := time.Now()
	status, body := click("cf-ru2|sha256:cf-ru2", hook)
	if status != 200 || !strings.Contains(body, "Deciding") || time.Since(start) > 5*time.Second {
		t.Fatalf("slow decision: %d %s after %s", status, body, time.Since(start))
	}
	select {
	case m := <-got:
		t.Fatalf("a verdict posted before the decision was made: %q", m)
	case <-time.After(100 * time.Millisecond):
	}
	close(slow)
	if m := next("slow decision"); !strings.Contains(m, "(as alice)") {
		t.Fatalf("slow decision posted %q", m)
	}
	e.rec.mu.Lock()
	n := len(e.rec.reqs)
	e.rec.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d decisions sent, want 2", n)
	}
	// A response URL that is not Slack's (the default check): answered in HTTP, never contacted.
	s2, err := New(Options{Store: e.st, Approvers: func() (Authenticator, error) { return users{"alice": "correct horse"}, nil },
		Decide: e.rec.decide, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Slack: &SlackInteractions{SigningSecret: secret, Users: map[string]string{"UALICE": "alice"}, Allows: func(string) bool { return true }}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = s2
	if status, _ := click("cf-ru1|sha256:old", elsewhere.URL+"/actions/x"); status != 200 {
		t.Fatalf("stale click, foreign response URL: %d", status)
	}
	time.Sleep(200 * time.Millisecond)
	if contacted.Load() != 0 {
		t.Fatalf("a non-Slack response URL was contacted %d times", contacted.Load())
	}
	for _, u := range []string{"https://hooks.slack.com/actions/T1/1/x", "https://hooks.slack-gov.com/actions/T1/1/x"} {
		if !slackResponseURL(u) {
			t.Errorf("%s refused", u)
		}
	}
	for _, u := range []string{"http://hooks.slack.com/actions/x", "https://hooks.slack.com.evil.example/x", "https://user@hooks.slack.com/x", "https://hooks.slack.com:8443/x", "https://127.0.0.1/x"} {
		if slackResponseURL(u) {
			t.Errorf("%s allowed", u)
		}
	}
}

// slackPayloadBody is the form body Slack posts for one block action (response_url omitted
// when empty).
func slackPayloadBody(user, action, value, responseURL string) []byte {
	m := map[string]any{"type": "block_actions", "user": map[string]string{"id": user},
		"actions": []map[string]string{{"action_id": action, "value": value}}}
	if responseURL != "" {
		m["response_url"] = responseURL
	}
	p, _ := json.Marshal(m)
	return []byte(url.Values{"payload": {string(p)}}.Encode())
}

// postSlack sends body to base's Slack interactions endpoint with Slack's timestamp and
// signature headers, and returns the status and body of the answer.
func postSlack(t testing.TB, base string, body []byte, ts, sig string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/slack/interactions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
