// Package webhook delivers Airlock notices (internal/notify) as signed JSON POSTs (issue 23).
//
// The body is the notify.Notice as JSON, schema airlock.notice.v1 (docs/notice.v1.schema.json:
// the event, the confirmation's one presentation, requester, decision, outcome, or the MCP
// tool that changed; the flat fields of the notice before v1 are kept beside). Headers: X-Airlock-Delivery (the delivery id: the
// same on every retry, for the receiver's idempotency), X-Airlock-Timestamp (Unix seconds at
// sending) and X-Airlock-Signature ("v1=" and the hex HMAC-SHA256, keyed by the channel's
// secret, of the timestamp, ".", and the body). Verify checks them for a receiver. Any 2xx
// answer is delivered; anything else is retried by the dispatcher.
package webhook

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
	"time"

	"github.com/airlock-dev/airlock/internal/notify"
)

// Header names.
const (
	HeaderDelivery  = "X-Airlock-Delivery"
	HeaderTimestamp = "X-Airlock-Timestamp"
	HeaderSignature = "X-Airlock-Signature"
)

// Channel posts notices to URL signed with Secret.
type Channel struct {
	URL    string
	Secret []byte
	Client *http.Client
	// Now is the clock for the timestamp (time.Now by default).
	Now func() time.Time
}

// New builds the webhook channel of c: url (http or https) and secret (file or env) required.
func New(c notify.ChannelConfig) (*Channel, error) {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook channel %q: url must be an http or https URL", c.Name)
	}
	sec, err := c.Secret.Value()
	if err != nil {
		return nil, fmt.Errorf("webhook channel %q: %w", c.Name, err)
	}
	return &Channel{URL: c.URL, Secret: []byte(sec), Client: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Sign is the signature header value of body sent at timestamp ts (Unix seconds).
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// ErrBadSignature: Verify found no valid signature, or a timestamp outside the window.
var ErrBadSignature = errors.New("webhook: bad signature")

// Verify checks a received notice: sig must be Sign(secret, ts, body) and ts within maxAge of
// now (either way: clocks drift). Errors wrap ErrBadSignature.
func Verify(secret []byte, ts, sig string, body []byte, maxAge time.Duration, now time.Time) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not Unix seconds", ErrBadSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > maxAge || d < -maxAge {
		return fmt.Errorf("%w: timestamp outside the %s window", ErrBadSignature, maxAge)
	}
	if !hmac.Equal([]byte(Sign(secret, ts, body)), []byte(sig)) {
		return fmt.Errorf("%w: signature does not match", ErrBadSignature)
	}
	return nil
}

// Send posts n. Errors never contain the URL (it may carry a key) or the secret.
func (c *Channel) Send(ctx context.Context, n notify.Notice) error {
	body, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("webhook: encode: %w", err)
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	ts := strconv.FormatInt(now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("webhook: cannot build the request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "airlock-notify/1")
	req.Header.Set(HeaderDelivery, n.DeliveryID)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(c.Secret, ts, body))
	resp, err := c.Client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: POST failed: %w", Unwrap(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook: receiver answered %s", resp.Status)
	}
	return nil
}

// Unwrap strips a *url.Error of its URL (which may hold a key: a Slack webhook URL does), keeping
// the operation and cause.
func Unwrap(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		msg := ue.Err.Error()
		if strings.Contains(msg, ue.URL) {
			msg = strings.ReplaceAll(msg, ue.URL, "<url>")
		}
		return errors.New(msg)
	}
	return err
}
