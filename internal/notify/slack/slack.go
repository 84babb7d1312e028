// Package slack delivers Airlock notices (internal/notify) to Slack as Block Kit messages
// (issue 23): through an incoming webhook (its URL is the secret) or chat.postMessage with a
// bot token and a channel.
//
// Every value that came from the model or a client is put in plain_text objects, which Slack
// never parses: no mrkdwn, no mentions, no links. The only mrkdwn is the fallback text, made of
// the notice's fixed title, with &, < and > escaped as Slack asks. The card link is a button
// URL built from the trusted base_url.
package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/notify/webhook"
)

// Channel posts notices to Slack.
type Channel struct {
	// WebhookURL, when set, is the incoming webhook posted to.
	WebhookURL string
	// API (https://slack.com/api by default), Token and SlackChannel are used otherwise.
	API, Token, SlackChannel string
	Client                   *http.Client
}

// New builds the Slack channel of c: either secret (the incoming-webhook URL, from a file or the
// environment) or token plus slack_channel (chat.postMessage; url overrides the API base).
func New(c notify.ChannelConfig) (*Channel, error) {
	ch := &Channel{Client: &http.Client{Timeout: 30 * time.Second}}
	switch {
	case c.Secret.Set() && c.Token.Set():
		return nil, fmt.Errorf("slack channel %q: set secret (an incoming webhook URL) or token (chat.postMessage), not both", c.Name)
	case c.Secret.Set():
		u, err := c.Secret.Value()
		if err != nil {
			return nil, fmt.Errorf("slack channel %q: %w", c.Name, err)
		}
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return nil, fmt.Errorf("slack channel %q: the incoming webhook URL is not an http(s) URL", c.Name)
		}
		ch.WebhookURL = u
	case c.Token.Set():
		t, err := c.Token.Value()
		if err != nil {
			return nil, fmt.Errorf("slack channel %q: %w", c.Name, err)
		}
		if c.SlackChannel == "" {
			return nil, fmt.Errorf("slack channel %q: chat.postMessage needs slack_channel", c.Name)
		}
		ch.Token, ch.SlackChannel, ch.API = t, c.SlackChannel, strings.TrimRight(c.URL, "/")
		if ch.API == "" {
			ch.API = "https://slack.com/api"
		}
	default:
		return nil, fmt.Errorf("slack channel %q: set secret (an incoming webhook URL) or token and slack_channel", c.Name)
	}
	return ch, nil
}

// Escape makes s inert in Slack mrkdwn: &, < and > as entities (Slack's own rule), so no
// <!channel>, <@user> or <url|text> can be formed.
func Escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Message is the JSON posted: fallback text and blocks.
type Message struct {
	Channel string  `json:"channel,omitempty"`
	Text    string  `json:"text"`
	Blocks  []Block `json:"blocks"`
	// UnfurlLinks and UnfurlMedia are off: no preview is fetched for a value's URL.
	UnfurlLinks bool `json:"unfurl_links"`
	UnfurlMedia bool `json:"unfurl_media"`
}

// Block is one Block Kit block (header, section, context, actions).
type Block struct {
	Type     string    `json:"type"`
	Text     *Text     `json:"text,omitempty"`
	Elements []Element `json:"elements,omitempty"`
}

// Text is a Block Kit text object.
type Text struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Emoji *bool  `json:"emoji,omitempty"`
}

// Element is a context or actions element (a text object or a link button).
type Element struct {
	Type     string `json:"type"`
	Text     any    `json:"text,omitempty"`
	URL      string `json:"url,omitempty"`
	ActionID string `json:"action_id,omitempty"`
	Value    string `json:"value,omitempty"`
	Style    string `json:"style,omitempty"`
}

// Action ids of the decision buttons (web.SlackActionApprove, web.SlackActionDeny).
const (
	ActionApprove = "airlock_approve"
	ActionDeny    = "airlock_deny"
)

// plain is a plain_text object of s cut to Slack's limit, emoji shortcodes off.
func plain(s string, limit int) *Text {
	if utf8.RuneCountInString(s) > limit {
		r := []rune(s)
		s = string(r[:limit-1]) + "…"
	}
	f := false
	return &Text{Type: "plain_text", Text: s, Emoji: &f}
}

// Render is the Slack message of n.
func Render(n notify.Notice) Message {
	m := Message{Text: Escape(n.Title())}
	m.Blocks = append(m.Blocks, Block{Type: "header", Text: plain(n.Title(), 150)})
	section := func(label string, lines []string) {
		if len(lines) == 0 {
			return
		}
		m.Blocks = append(m.Blocks, Block{Type: "section", Text: plain(label+"\n"+strings.Join(lines, "\n"), 2900)})
	}
	for _, sec := range n.Sections() {
		section(sec.Title, sec.Lines)
	}
	var els []Element
	if n.Decide != "" {
		els = append(els, Element{Type: "button", Text: plain("Approve", 75), ActionID: ActionApprove, Value: n.Decide, Style: "primary"},
			Element{Type: "button", Text: plain("Deny", 75), ActionID: ActionDeny, Value: n.Decide, Style: "danger"})
	}
	if n.Link != "" {
		els = append(els, Element{Type: "button", Text: plain("Open the card", 75), URL: n.Link})
	}
	if len(els) > 0 {
		m.Blocks = append(m.Blocks, Block{Type: "actions", Elements: els})
	}
	return m
}

// Send posts n. Errors never contain the webhook URL or the token.
func (c *Channel) Send(ctx context.Context, n notify.Notice) error {
	m := Render(n)
	target := c.WebhookURL
	if target == "" {
		m.Channel = c.SlackChannel
		target = c.API + "/chat.postMessage"
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("slack: encode: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return errors.New("slack: cannot build the request")
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return fmt.Errorf("slack: POST failed: %w", webhook.Unwrap(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("slack: answered %s", resp.Status)
	}
	if c.WebhookURL == "" {
		var r struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return errors.New("slack: chat.postMessage answer is not JSON")
		}
		if !r.OK {
			return fmt.Errorf("slack: chat.postMessage: %.100q", r.Error)
		}
	}
	return nil
}
