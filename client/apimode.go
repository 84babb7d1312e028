package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
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

	"github.com/airlock-dev/airlock/workflows"
)

// apiMode is a Client that talks to Airlock's application API (airlock api serve) instead of
// Temporal and the store (issue 32): it holds an API key, never Temporal access, the store or
// the approver key.
type apiMode struct {
	base string
	key  string
	hc   *http.Client
}

// ErrAPI is an answer of the application API that this package has no better error for; the
// concrete error is an *APIError.
var ErrAPI = errors.New("client: the Airlock API refused the request")

// APIError is an error answer of the application API: its HTTP status and error code
// (internal/appapi/openapi.yaml lists them).
type APIError struct {
	Status  int
	Code    string
	Message string
}

// Error says the status, code and message (the server's words).
func (e *APIError) Error() string {
	return fmt.Sprintf("client: API %d %s: %s", e.Status, e.Code, Visible(e.Message))
}

// Unwrap returns ErrAPI.
func (e *APIError) Unwrap() error { return ErrAPI }

func newAPIMode(opts Options) (*Client, error) {
	u, err := url.Parse(opts.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: Options.APIURL must be an http(s) URL such as http://127.0.0.1:8092", ErrNotConfigured)
	}
	if opts.APIKey == "" {
		return nil, fmt.Errorf("%w: Options.APIKey (airlock api key NAME) goes with Options.APIURL", ErrNotConfigured)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{api: &apiMode{base: strings.TrimRight(opts.APIURL, "/"), key: opts.APIKey, hc: hc}}, nil
}

// do sends one JSON request and decodes a 2xx answer into out; other answers are *APIError.
func (a *apiMode) do(ctx context.Context, method, path string, hdr map[string]string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("client: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return 0, fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e struct{ Error, Message string }
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Code: e.Error, Message: e.Message}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("client: %s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// apiTurn is the API's turn (internal/appapi.Turn).
type apiTurn struct {
	ID      string                `json:"id"`
	Status  string                `json:"status"`
	Pending []apiConfirmation     `json:"pending"`
	Result  *workflows.TurnResult `json:"result"`
	Error   string                `json:"error"`
}

type apiConfirmation struct {
	ID             string          `json:"id"`
	TurnID         string          `json:"turn_id"`
	Seq            int             `json:"seq"`
	CallID         string          `json:"call_id"`
	Capability     string          `json:"capability"`
	Version        int             `json:"version"`
	ArgsDigest     string          `json:"args_digest"`
	Arguments      json.RawMessage `json:"arguments"`
	Display        string          `json:"display"`
	ExpiresAt      time.Time       `json:"expires_at"`
	ApproverGroups []string        `json:"approver_groups"`
	// Presentation is the API's one presentation of the confirmation.
	Presentation *Presentation `json:"presentation"`
}

func (c apiConfirmation) pending() PendingConfirmation {
	p := PendingConfirmation{ConfirmationID: c.ID, WorkflowID: c.TurnID, Seq: c.Seq, CallID: c.CallID, CapabilityID: c.Capability,
		Version: c.Version, ArgsDigest: c.ArgsDigest, Arguments: c.Arguments, Display: c.Display, ExpiresAt: c.ExpiresAt, ApproverGroups: c.ApproverGroups,
		Presentation: c.Presentation}
	if pr := c.Presentation; pr != nil {
		p.Quorum, p.Approvals, p.PasskeyRequired = pr.Quorum.Needed, pr.Quorum.Approvals, pr.PasskeyRequired
		p.DistinctApprover = pr.Quorum.DistinctFromRequester
		if pr.Requester.Attested {
			p.Requester = &workflows.Requester{Principal: pr.Requester.Principal.Text, Client: pr.Requester.Client.Text}
		}
	}
	return p
}

// turnPath is the API path of the turn with workflow id "turn/<conversation>/<seq>".
func turnPath(id string) (string, error) {
	rest, ok := strings.CutPrefix(id, "turn/")
	i := strings.LastIndexByte(rest, '/')
	if !ok || i < 1 {
		return "", fmt.Errorf("client: %q is not a turn id (turn/<conversation>/<seq>)", Visible(id))
	}
	return "/v1/conversations/" + url.PathEscape(rest[:i]) + "/turns/" + url.PathEscape(rest[i+1:]), nil
}

// newIdempotencyKey is a random key for a start that names none.
func newIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "go-" + hex.EncodeToString(b)
}

func (a *apiMode) startTurn(ctx context.Context, c *Client, req TurnRequest, key string) (*Turn, error) {
	if key == "" {
		key = newIdempotencyKey()
	}
	var t apiTurn
	_, err := a.do(ctx, http.MethodPost, "/v1/turns", map[string]string{"Idempotency-Key": key},
		map[string]string{"conversation": req.Conversation, "message": req.Message, "model": req.Model}, &t)
	if err != nil {
		return nil, err
	}
	return &Turn{ID: t.ID, c: c}, nil
}

func (a *apiMode) turn(ctx context.Context, id string) (apiTurn, error) {
	p, err := turnPath(id)
	if err != nil {
		return apiTurn{}, err
	}
	var t apiTurn
	_, err = a.do(ctx, http.MethodGet, p, nil, nil, &t)
	return t, err
}

func (a *apiMode) result(ctx context.Context, t *Turn) (TurnResult, error) {
	for {
		at, err := a.turn(ctx, t.ID)
		if err != nil {
			return TurnResult{}, err
		}
		switch at.Status {
		case StatusCompleted:
			if at.Result != nil {
				return *at.Result, nil
			}
		case StatusFailed:
			return TurnResult{}, fmt.Errorf("client: turn %s ended: %s", Visible(t.ID), Visible(at.Error))
		}
		// Wait for the turn's end on its event stream (no polling while it waits).
		err = a.stream(ctx, t.ID, 0, func(StreamEvent) error { return nil })
		if err != nil && ctx.Err() != nil {
			return TurnResult{}, ctx.Err()
		}
		if err != nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// stream follows the turn's events after `after`, reconnecting with the last id seen when the
// server ends an idle stream, until the turn's final event.
func (a *apiMode) stream(ctx context.Context, id string, after int64, fn func(StreamEvent) error) error {
	p, err := turnPath(id)
	if err != nil {
		return err
	}
	for {
		final, last, err := a.streamOnce(ctx, p+"/events", after, fn)
		if err != nil || final {
			return err
		}
		after = last
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *apiMode) streamOnce(ctx context.Context, path string, after int64, fn func(StreamEvent) error) (final bool, last int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return false, after, fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return false, after, fmt.Errorf("client: follow %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e struct{ Error, Message string }
		_ = json.Unmarshal(b, &e)
		return false, after, &APIError{Status: resp.StatusCode, Code: e.Error, Message: e.Message}
	}
	last = after
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var ev StreamEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Type == "" {
				continue
			}
			if ev.ID > 0 {
				last = ev.ID
			}
			if err := fn(ev); err != nil {
				return false, last, err
			}
			if ev.Type == EventRunError || ev.Type == EventRunFinished {
				return true, last, nil
			}
			ev = StreamEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			ev.Type = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = json.RawMessage(line[6:])
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return false, last, nil // the connection broke: reconnect after the last id
	}
	return false, last, ctx.Err()
}

func (a *apiMode) listPending(ctx context.Context, f ListFilter) ([]PendingConfirmation, error) {
	p := "/v1/confirmations"
	if f.Conversation != "" {
		p += "?conversation=" + url.QueryEscape(f.Conversation)
	}
	var out struct {
		Confirmations []apiConfirmation `json:"confirmations"`
	}
	if _, err := a.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	list := make([]PendingConfirmation, 0, len(out.Confirmations))
	for _, c := range out.Confirmations {
		list = append(list, c.pending())
	}
	return list, nil
}

func (a *apiMode) decide(ctx context.Context, r DecideRequest) error {
	if r.ArgsDigest == "" {
		// The API decides only on arguments the caller names: take the pending ones.
		list, err := a.listPending(ctx, ListFilter{})
		if err != nil {
			return err
		}
		for _, p := range list {
			if p.ConfirmationID == r.ConfirmationID {
				r.ArgsDigest = p.ArgsDigest
			}
		}
		if r.ArgsDigest == "" {
			return &DecisionError{ConfirmationID: r.ConfirmationID, Code: workflows.RefusalNotPending, kind: ErrNotPending,
				cause: fmt.Errorf("confirmation %s is not pending for this approver", Visible(r.ConfirmationID))}
		}
	}
	var resp struct {
		Status string `json:"status"`
		Detail string `json:"detail"`
	}
	_, err := a.do(ctx, http.MethodPost, "/v1/confirmations/"+url.PathEscape(r.ConfirmationID)+"/decision", nil,
		map[string]string{"decision": r.Decision, "reason": r.Reason, "args_digest": r.ArgsDigest}, &resp)
	var ae *APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && ae.Code == workflows.RefusalNotPending || errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		return &DecisionError{ConfirmationID: r.ConfirmationID, Code: workflows.RefusalNotPending, Detail: ae.Message, kind: ErrNotPending, cause: err}
	case errors.As(err, &ae) && ae.Code == "stale_digest":
		return &DecisionError{ConfirmationID: r.ConfirmationID, Code: ae.Code, Detail: ae.Message, kind: ErrStaleDigest, cause: err}
	case errors.As(err, &ae) && (ae.Status == http.StatusUnprocessableEntity || ae.Status == http.StatusForbidden):
		return &DecisionError{ConfirmationID: r.ConfirmationID, Code: ae.Code, Detail: ae.Message, kind: ErrRefused, cause: err}
	}
	return err
}

// StartTurnOnce is StartTurn with an idempotency key (API mode only): the same key and request
// sent again, after a timeout or a crash, name the turn the first one started instead of
// starting another; the same key with another request is refused (*APIError 409).
func (c *Client) StartTurnOnce(ctx context.Context, req TurnRequest, key string) (*Turn, error) {
	if c.api == nil {
		return nil, fmt.Errorf("%w: StartTurnOnce needs the API (Options.APIURL)", ErrNotConfigured)
	}
	if key == "" {
		return nil, fmt.Errorf("client: StartTurnOnce needs a key")
	}
	return c.api.startTurn(ctx, c, req, key)
}
